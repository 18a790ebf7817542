import { mkdirSync } from 'node:fs';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { connect as connectSocket, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { launchChromium } from '../support/chromium.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLedgerClient, type LedgerClient } from '@dispatch-ledger/client';
import { EXECUTION_BUCKETS } from '../../shared/dispatch/counts.js';
import { PHASES } from '../../shared/dispatch/transitions/legal.js';
import { startStatusPage, type StatusPage } from '../../ui/server.js';
import { SESSION_HEADER } from '../../ui/session.js';
import { uniqueName } from '../support/engines.js';
import { eventually, startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * The status page (CONTRACT §13, issue 17 "Must show"), driven in Debian's Chromium by playwright-core
 * against the local platform: what needs a person, a dispatch's three claims, a state that changes
 * while the page is open — without a reload and without a console error — and the server's refusals.
 * The screenshots it takes are the README's (docs/status-page-*.png).
 */
const DOCS = join(import.meta.dirname, '..', '..', 'docs');

let t: TestPlatform;
let statusPage: StatusPage;
let context: BrowserContext;
let browser: { readonly close: () => Promise<void> } | undefined;
const pageLog: Array<Record<string, unknown>> = [];
/** This start's secret (the printed URL's `?token=`), which the raw requests send as the page's script does. */
let session = '';

/** Every console error and uncaught exception of every page the test opens. */
const consoleErrors: string[] = [];

const orphan = { dispatchId: uniqueName('ui-orphan'), origin: 'team-b', target: 'demo-agent', task: { behavior: 'complete_without_evidence' }, expectedEvidence: ['out/report.md'], timeouts: { deliveryGraceSeconds: 2 } };
const stalled = { dispatchId: uniqueName('ui-stall'), origin: 'team-a', target: 'demo-agent', task: { behavior: 'stall' }, timeouts: { stallAfterSeconds: 2 } };
const handled = { dispatchId: uniqueName('ui-done'), origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' }, expectedEvidence: ['out/summary.md'] };
const expiring = { dispatchId: uniqueName('ui-approve'), origin: 'team-a', target: 'demo-agent', task: { behavior: 'await_approval' }, timeouts: { approvalWaitSeconds: 2 } };

beforeAll(async () => {
  t = await startTestPlatform();
  for (const message of [orphan, stalled, handled, expiring]) await t.send(JSON.stringify(message));
  statusPage = await startStatusPage({ client: createLedgerClient({ local: t.platform.info }), refreshMs: 500, log: (line) => pageLog.push(line) });
  session = new URL(statusPage.url).searchParams.get('token') ?? '';
  const launched = await launchChromium();
  browser = launched;
  context = launched.context;
  mkdirSync(DOCS, { recursive: true });
});

afterAll(async () => {
  await browser?.close();
  await statusPage?.close();
  await t?.stop();
});

/** A page that records its console errors and counts its document loads (a reload would be a second). */
async function openPage(): Promise<{ page: Page; loads: () => number }> {
  const page = await context.newPage();
  let loads = 0;
  page.on('load', () => {
    loads += 1;
  });
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => consoleErrors.push(`pageerror: ${error.message}`));
  await page.goto(statusPage.url);
  return { page, loads: () => loads };
}

/** The elements that stick out past the viewport's right edge (none: nothing scrolls sideways), named for the failure message. */
async function sideways(page: Page): Promise<string[]> {
  // Evaluated in the page (a string: this project's types have no DOM).
  return page.evaluate<string[]>(`(() => {
    const width = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth <= width) return [];
    return [...document.querySelectorAll('body *')]
      .filter((element) => element.getBoundingClientRect().right > width + 0.5 && element.closest('.visually-hidden, thead') === null)
      .map((element) => element.tagName.toLowerCase() + '.' + element.className + ' "' + (element.textContent || '').slice(0, 60) + '" right=' + Math.round(element.getBoundingClientRect().right));
  })()`);
}

interface RawOptions {
  /** @default the page's own `127.0.0.1:port` */
  readonly host?: string;
  /** The secret sent in the page's session header. @default this start's; '' for none */
  readonly session?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** A raw request to the page's server, with the Host header and the secret chosen by the test. */
function raw(method: string, path: string, options: RawOptions = {}): Promise<{ status: number; headers: Record<string, unknown>; body: unknown }> {
  const secret = options.session ?? session;
  const headers = { host: options.host ?? `127.0.0.1:${statusPage.port}`, ...(secret === '' ? {} : { [SESSION_HEADER]: secret }), ...options.headers };
  return new Promise((resolveRequest, rejectRequest) => {
    const outgoing = request({ host: '127.0.0.1', port: statusPage.port, method, path, headers }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => {
        const isJson = String(response.headers['content-type']).startsWith('application/json');
        resolveRequest({ status: response.statusCode ?? 0, headers: response.headers, body: isJson ? (JSON.parse(text) as unknown) : text });
      });
    });
    outgoing.on('error', rejectRequest);
    outgoing.end(method === 'POST' ? '{}' : undefined);
  });
}

/** Another server on 127.0.0.1 (another port: another origin, the same site), told of each request, for the length of `use`. */
async function elsewhere(onRequest: (incoming: IncomingMessage) => void, use: (url: string) => Promise<void>): Promise<void> {
  const other: Server = createServer((incoming, response) => {
    onRequest(incoming);
    response.writeHead(200, { 'content-type': 'text/html' });
    response.end('<!doctype html><title>elsewhere</title>');
  });
  await new Promise<void>((resolveListen) => other.listen(0, '127.0.0.1', resolveListen));
  try {
    await use(`http://127.0.0.1:${(other.address() as AddressInfo).port}/`);
  } finally {
    other.closeAllConnections();
    await new Promise((resolveClose) => other.close(resolveClose));
  }
}

describe('the status page in Chromium', () => {
  it('lists an orphaned and a stalled dispatch under what needs a person; the orphan shows its missing ref and the three claims', async () => {
    await t.viewWhen(orphan.dispatchId, (view) => view.evidence.outcome === 'orphan_no_delivery', { origin: orphan.origin });
    await t.viewWhen(stalled.dispatchId, (view) => view.execution.status === 'unknown', { origin: stalled.origin });
    await t.viewWhen(handled.dispatchId, (view) => view.evidence.outcome === 'handled');

    const { page, loads } = await openPage();
    const orphans = page.locator('#attention-orphan_no_delivery');
    const unknowns = page.locator('#attention-unknown');
    await orphans.getByRole('link', { name: orphan.dispatchId }).waitFor();
    await unknowns.getByRole('link', { name: stalled.dispatchId }).waitFor();
    const orphanCard = orphans.locator('li', { has: page.getByRole('link', { name: orphan.dispatchId }) });
    expect(await orphanCard.innerText()).toContain('Missing: out/report.md');
    const stalledCard = unknowns.locator('li', { has: page.getByRole('link', { name: stalled.dispatchId }) });
    expect(await stalledCard.innerText()).toMatch(/stalled: no word from the run/);
    // What needs a person comes before the counts and the list.
    const headings = await page.getByRole('heading', { level: 2 }).allInnerTexts();
    expect(headings).toEqual(['Needs a person', 'Counts by state', 'Dispatches']);
    // The filter's lists are the shared modules' (sent in config.json), not a copy in the page.
    expect(await page.getByLabel('Phase').locator('option').allInnerTexts()).toEqual(['any', ...PHASES]);
    expect(await page.getByLabel('Execution').locator('option').allInnerTexts()).toEqual(['any', ...EXECUTION_BUCKETS]);
    await page.screenshot({ path: join(DOCS, 'status-page-desktop.png') });

    await orphans.getByRole('link', { name: orphan.dispatchId }).click();
    const execution = page.getByRole('region', { name: 'Execution' });
    const acceptance = page.getByRole('region', { name: 'Artifact acceptance' });
    const delivery = page.getByRole('region', { name: 'Owner delivery' });
    await execution.waitFor();
    expect(await execution.innerText()).toContain('completed');
    expect(await acceptance.innerText()).toContain('unverified');
    expect(await delivery.innerText()).toContain('unconfirmed');
    // Side by side at 1280 wide: the three claims share one row. Read in one pass in the page (was: three
    // round trips, between which the page's refresh could move the row: a clean clone saw two tops).
    const tops = await page.evaluate<Array<number | null>>(
      `['claim-execution', 'claim-acceptance', 'claim-delivery'].map((id) => document.getElementById(id)?.getBoundingClientRect().top ?? null)`,
    );
    expect(tops.every((top) => top !== null)).toBe(true);
    expect(new Set(tops).size).toBe(1);
    const evidence = page.getByRole('region', { name: 'Evidence' });
    expect(await evidence.innerText()).toMatch(/missing\s+out\/report\.md/);
    expect(await page.locator('.alert').innerText()).toContain('out/report.md');
    // What the monitor does for an orphaned, completed run: nothing more — never "watching".
    expect(await execution.innerText()).toContain('done: the run completed (evidence orphan_no_delivery)');
    expect(await page.getByRole('region', { name: 'Act on it' }).innerText()).toContain(`npx ledger check ${orphan.dispatchId} --refresh --origin team-b`);
    await page.screenshot({ path: join(DOCS, 'status-page-dispatch.png'), fullPage: true });

    // An approval that waited past its window has a banner of its own, and the monitor line says so.
    await t.viewWhen(expiring.dispatchId, (seen) => seen.execution.monitorStatus === 'approval_wait_expired', { origin: expiring.origin });
    await page.goto(`${statusPage.origin}#/dispatches/${expiring.dispatchId}`);
    const expired = page.locator('.alert[data-kind="approval_wait_expired"]');
    await expired.waitFor();
    expect(await expired.innerText()).toMatch(/^Approval wait expired: approval \S+, pending since \S+, has waited past its window \(2 s\)\. It is still pending: approve or cancel it\.$/);
    expect(await page.getByRole('region', { name: 'Execution' }).innerText()).toContain('the approval has waited longer than its window; it is still pending');
    await page.screenshot({ path: join(DOCS, 'status-page-approval-expired.png'), fullPage: true });

    // The handled dispatch: its evidence file with the SHA-256 the ledger sealed, as its view has it.
    const view = await t.view(handled.dispatchId);
    const file = view.evidence.files[0];
    expect(file?.ref).toBe('out/summary.md');
    await page.goto(`${statusPage.origin}#/dispatches/${handled.dispatchId}`);
    const files = page.locator('table.files');
    await files.waitFor();
    expect(await files.innerText()).toContain(file?.sha256 ?? 'no file');
    expect(await page.getByRole('region', { name: 'Receipt timeline' }).innerText()).toContain('dispatch_completed');
    expect(loads()).toBe(1);
    await page.close();
    expect(consoleErrors).toEqual([]);
  });

  it('shows a dispatch that completes while the page is open in its new state, without a reload', async () => {
    // Held until the test approves it: a run of fixed seconds had to outlast the page's steps, which a
    // slow machine did not promise (the run could complete before the page first showed it).
    const slow = { dispatchId: uniqueName('ui-slow'), origin: 'planner', target: 'demo-agent', task: { behavior: 'await_approval' }, timeouts: { approvalWaitSeconds: 3600 } };
    await t.send(JSON.stringify(slow));
    const waiting = await t.viewWhen(slow.dispatchId, (view) => view.execution.pendingApproval !== null);

    const { page, loads } = await openPage();
    // A mark on this document's window: a reload would make a new window without it.
    await page.evaluate("window.ledgerMarker = 'same document'");
    await page.getByRole('link', { name: slow.dispatchId }).first().click();
    const state = page.getByRole('region', { name: 'Execution' }).locator('.claim-state');
    await state.waitFor();
    expect(await state.innerText()).toMatch(/^waiting.for.approval$/);
    await createLedgerClient({ origin: 'planner', local: t.platform.info }).decide(slow.dispatchId, { approvalId: waiting.execution.pendingApproval?.approvalId ?? '', decision: 'approve' });
    await eventually('the execution claim to read completed', async () => state.innerText(), { until: (text) => text === 'completed' });
    const marker = await page.evaluate<unknown>('window.ledgerMarker');
    expect(marker).toBe('same document');
    expect(loads()).toBe(1);

    // Back in the list: the same dispatch, completed, found by the search box.
    await page.getByRole('link', { name: '← Everything' }).click();
    await page.getByLabel('Search').fill(slow.dispatchId);
    const row = page.locator('table.dispatches tbody tr', { has: page.getByRole('link', { name: slow.dispatchId }) });
    await eventually('the list row of the slow dispatch', async () => row.innerText(), { until: (text) => text.includes('completed') });
    expect(await page.locator('table.dispatches tbody tr').count()).toBe(1);
    expect(loads()).toBe(1);
    await page.close();
    expect(consoleErrors).toEqual([]);
  });

  /** A status page on this platform whose ledger answers `route` as `answer` says (else as the platform does), opened in a new tab. */
  it('reads well on a 390-wide phone: one column, no sideways scrolling', async () => {
    const { page } = await openPage();
    await page.setViewportSize({ width: 390, height: 844 });
    await page.locator('#attention-orphan_no_delivery').getByRole('link', { name: orphan.dispatchId }).waitFor();
    expect(await sideways(page)).toEqual([]);
    await page.screenshot({ path: join(DOCS, 'status-page-phone.png') });
    await page.locator('#attention-orphan_no_delivery').getByRole('link', { name: orphan.dispatchId }).click();
    await page.getByRole('region', { name: 'Owner delivery' }).waitFor();
    const lefts = await Promise.all(['Execution', 'Artifact acceptance', 'Owner delivery'].map(async (name) => (await page.getByRole('region', { name }).boundingBox())?.x));
    expect(new Set(lefts).size).toBe(1);
    expect(await sideways(page)).toEqual([]);
    await page.screenshot({ path: join(DOCS, 'status-page-phone-dispatch.png'), fullPage: true });
    await page.close();
    expect(consoleErrors).toEqual([]);
  });

  it('shows target-supplied text with its control and bidi characters escaped, never as markup', async () => {
    // The demo agent's result summary quotes the task's goal: target-supplied text, stored as given.
    const goal = 'report \u202eTXT.exe\u001b[31m <img src=x id=injected> done';
    const sneaky = { dispatchId: uniqueName('ui-bidi'), origin: 'planner', target: 'demo-agent', task: { behavior: 'complete', goal } };
    await t.send(JSON.stringify(sneaky));
    const view = await t.viewWhen(sneaky.dispatchId, (candidate) => candidate.execution.status === 'completed');
    expect(view.execution.result?.summary).toContain('\u202e');
    const { page } = await openPage();
    await page.goto(`${statusPage.origin}#/dispatches/${sneaky.dispatchId}`);
    const execution = page.getByRole('region', { name: 'Execution' });
    await execution.waitFor();
    const shown = await execution.innerText();
    expect(shown).toContain('report \\u202eTXT.exe\\u001b[31m <img src=x id=injected> done');
    expect(await page.locator('#injected').count()).toBe(0);
    // Every text node of the page, as the DOM holds it: no raw control or bidi character anywhere.
    const texts = await page.evaluate<string>(`(() => {
      const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      const found = [];
      for (let node = walker.nextNode(); node; node = walker.nextNode()) found.push(node.textContent || '');
      return found.join(' ');
    })()`);
    expect(texts).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    await page.close();
    expect(consoleErrors).toEqual([]);
  });
});

describe('the status page server', () => {
  it('relays an allowed read as the operator, with a strict Content-Security-Policy', async () => {
    const answer = await raw('GET', `/api/dispatches/${orphan.dispatchId}`);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ status: 200, body: { dispatchId: orphan.dispatchId, origin: 'team-b' } });
    const policy = String(answer.headers['content-security-policy']);
    expect(policy).toContain("default-src 'self'");
    expect(policy).toContain("script-src 'self'");
    expect(policy).not.toContain('unsafe-inline');
    const html = await raw('GET', '/');
    expect(html.status).toBe(200);
    expect(String(html.headers['content-security-policy'])).toBe(policy);
  });

  it('refuses a POST, a route outside the allowlist and a foreign Host, calling the ledger for none of them', async () => {
    const post = await raw('POST', `/api/dispatches/${stalled.dispatchId}/cancel`);
    expect(post.status).toBe(405);
    expect(post.body).toEqual({ error: { code: 'method_not_allowed', message: expect.any(String) } });
    expect(post.headers.allow).toBe('GET');

    for (const path of ['/api/origins/planner/dispatches', '/api/targets/demo-agent/slots/release', '/api/dispatches/x/evidence/out%2Fa.md', '/api/dispatches/..%2Fattention', '/api/inbox']) {
      const refused = await raw('GET', path);
      expect(refused.status, path).toBe(404);
      expect(refused.body, path).toMatchObject({ error: { code: 'not_found' } });
    }
    const badQuery = await raw('GET', '/api/attention?kind=unknown&secret=1');
    expect(badQuery.status).toBe(400);

    for (const host of ['evil.example:80', `localhost:${statusPage.port}`, `127.0.0.1:${statusPage.port + 1}`, `127.0.0.1.nip.io:${statusPage.port}`]) {
      const foreign = await raw('GET', '/api/attention', { host });
      expect(foreign.status, host).toBe(403);
      expect(foreign.body, host).toMatchObject({ error: { code: 'forbidden_host' } });
      expect((await raw('GET', '/', { host })).status, host).toBe(403);
    }
    // Each refusal is logged, none relayed: no line says the ledger was called or unreachable.
    expect(pageLog.filter((line) => line.msg === 'request refused: foreign Host')).toHaveLength(8);
    expect(pageLog.some((line) => line.msg === 'ledger unreachable')).toBe(false);
  });

  it('serves the page for the printed token and refuses a wrong one; answers config and reads only to the secret in its header, never to a cookie', async () => {
    const printed = new URL(statusPage.url);
    const token = printed.searchParams.get('token') ?? '';
    expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    const opened = await raw('GET', `/?token=${token}`, { session: '' });
    expect(opened.status).toBe(200);
    expect(String(opened.body)).toContain('<script type="module" src="/app.js">');
    expect(opened.headers['set-cookie']).toBeUndefined();

    const wrong = await raw('GET', `/?token=${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`, { session: '' });
    expect(wrong.status).toBe(403);
    expect(wrong.body).toMatchObject({ error: { code: 'forbidden_token' } });
    expect((await raw('GET', '/?token=', { session: '' })).status).toBe(403);
    // On every path: the page's script would keep a wrong token in place of the good one.
    for (const path of ['/index.html', '/app.js', '/config.json']) expect((await raw('GET', `${path}?token=not-it`, { session: '' })).status, path).toBe(403);
    // The page's own files are the same for everyone: no secret needed, none given out.
    for (const path of ['/', '/index.html', '/app.js', '/styles.css', '/favicon.svg']) {
      const file = await raw('GET', path, { session: '' });
      expect(file.status, path).toBe(200);
      expect(String(file.body), path).not.toContain(token);
    }

    const before = pageLog.length;
    const attempts: ReadonlyArray<RawOptions> = [
      { session: '' },
      { session: 'x'.repeat(token.length) },
      { session: `${token}A` },
      // The old session cookie: a cookie is no longer a way in (every port on 127.0.0.1 is sent it).
      { session: '', headers: { cookie: `ledger_status_${statusPage.port}=${token}` } },
    ];
    for (const attempt of attempts) {
      for (const path of [`/api/dispatches/${orphan.dispatchId}?refresh=true`, '/api/counts', '/config.json']) {
        const refused = await raw('GET', path, attempt);
        expect(refused.status, `${path} with ${JSON.stringify(attempt)}`).toBe(403);
        expect(refused.body, path).toMatchObject({ error: { code: 'forbidden_token' } });
      }
    }
    // With the secret in its header, the same reads are answered.
    expect((await raw('GET', '/api/counts')).body).toMatchObject({ status: 200 });
    expect((await raw('GET', '/config.json')).body).toMatchObject({ refreshMs: 500 });
    // The token is in no log line, refused or not; no refused read reached the ledger.
    expect(JSON.stringify(pageLog)).not.toContain(token);
    expect(pageLog.slice(before).filter((line) => line.msg === 'request refused: no session')).toHaveLength(12);
    expect(pageLog.some((line) => line.msg === 'ledger unreachable')).toBe(false);
  });

  it('refuses what a browser marks as coming from another site, secret or not', async () => {
    for (const site of ['cross-site', 'same-site']) {
      for (const path of ['/api/dispatches/x?refresh=true', '/', `/?token=${new URL(statusPage.url).searchParams.get('token') ?? ''}`]) {
        const refused = await raw('GET', path, { headers: { 'sec-fetch-site': site } });
        expect(refused.status, `${site} ${path}`).toBe(403);
        expect(refused.body).toMatchObject({ error: { code: 'cross_site' } });
      }
    }
    for (const site of ['same-origin', 'none']) expect((await raw('GET', '/api/counts', { headers: { 'sec-fetch-site': site } })).status, site).toBe(200);
  });

  it("refuses a web page's fetch at the port in Chromium, even while the browser has the page open", async () => {
    // Another page on this machine (another port is another origin, and the same site).
    await elsewhere(() => undefined, async (otherUrl) => {
      const { page } = await openPage();
      await page.locator('#attention-orphan_no_delivery').waitFor();
      await page.goto(otherUrl);
      const before = pageLog.length;
      const target = `${statusPage.origin}api/dispatches/${encodeURIComponent(stalled.dispatchId)}?refresh=true`;
      // A blind GET (no-cors: the page could not read the answer, only cause it).
      await page.evaluate(`void fetch(${JSON.stringify(target)}, { mode: 'no-cors', credentials: 'include' }).catch(() => undefined)`);
      await eventually('the cross-site refusal', async () => pageLog.slice(before), { until: (lines) => lines.some((line) => line.msg === 'request refused: cross-site') });
      expect(pageLog.slice(before).find((line) => line.msg === 'request refused: cross-site')).toMatchObject({ site: 'same-site' });
      await page.close();
    });
  });

  // Regression: the secret was a cookie, and cookies are not kept apart by port — Chromium sent
  // `ledger_status_PORT=<token>` to every server on 127.0.0.1 the operator's browser then visited, so
  // any local process with a port could read the ledger as the operator.
  it('keeps its secret from every other server on 127.0.0.1 the browser visits', async () => {
    const seen: string[] = [];
    await elsewhere((incoming) => seen.push(`${incoming.url ?? ''} ${JSON.stringify(incoming.headers)}`), async (otherUrl) => {
      const { page } = await openPage();
      await page.locator('#attention-orphan_no_delivery').waitFor();
      // The page works on after a reload (the secret is kept for this origin), and the address bar holds no secret.
      await page.reload();
      await page.locator('#attention-orphan_no_delivery').waitFor();
      expect(page.url()).toBe(statusPage.origin);
      // Another tab opened at the clean URL reads too.
      const second = await context.newPage();
      await second.goto(statusPage.origin);
      await second.locator('#attention-orphan_no_delivery').waitFor();
      await second.close();
      await page.goto(otherUrl);
      await page.evaluate(`fetch(${JSON.stringify(`${otherUrl}again`)}, { credentials: 'include' }).then((answer) => answer.text())`);
      const token = new URL(statusPage.url).searchParams.get('token') ?? '';
      // The document and the fetch (and whatever else the browser asks for, its icon): none carries the secret.
      expect(seen.filter((line) => /^\/(again)? /.test(line))).toHaveLength(2);
      for (const line of seen) expect(line).not.toContain(token);
      // Nor can the other page read it: storage is kept apart by origin, port included.
      expect(await page.evaluate<string>('JSON.stringify({ cookie: document.cookie, local: { ...localStorage }, session: { ...sessionStorage } })')).not.toContain(token);
      await page.close();
    });
  });

  it('answers a request line that is no URL with 400, and goes on serving', async () => {
    const port = statusPage.port;
    const reply = await new Promise<string>((resolveReply, rejectReply) => {
      const socket = connectSocket(port, '127.0.0.1', () => socket.end(`GET http://[/ HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${SESSION_HEADER}: ${session}\r\nConnection: close\r\n\r\n`));
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (text += chunk));
      socket.on('end', () => resolveReply(text));
      socket.on('error', rejectReply);
    });
    expect(reply).toMatch(/^HTTP\/1\.1 400 /);
    expect(reply).toContain('"code":"malformed"');
    expect((await raw('GET', '/api/counts')).body).toMatchObject({ status: 200 });
  });

  it('answers 500 when handling a request throws, with a log line and no stack, and goes on serving', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const ledger: LedgerClient = createLedgerClient({ local: t.platform.info });
    const fragile = await startStatusPage({
      client: ledger,
      // A log that throws on one refusal: the handler fails midway, as a bug would make it.
      log: (line) => {
        if (line.msg === 'request refused: route') throw new Error('log sink broke');
        lines.push(line);
      },
    });
    try {
      const headers = { [SESSION_HEADER]: new URL(fragile.url).searchParams.get('token') ?? '' };
      const broken = await fetch(`${fragile.origin}api/targets/x/slots/release`, { headers });
      expect(broken.status).toBe(500);
      const text = await broken.text();
      expect(JSON.parse(text)).toEqual({ error: { code: 'internal', message: 'the status page failed to answer this request' } });
      expect(text).not.toContain('log sink broke');
      expect(lines).toContainEqual(expect.objectContaining({ level: 'error', msg: 'request failed', error: 'log sink broke' }));
      expect(((await (await fetch(`${fragile.origin}api/counts`, { headers })).json()) as { status: number }).status).toBe(200);
    } finally {
      await fragile.close();
    }
  });
});
