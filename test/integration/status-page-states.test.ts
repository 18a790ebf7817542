import type { BrowserContext, Page } from 'playwright-core';
import { launchChromium } from '../support/chromium.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLedgerClient, type LedgerClient } from '@dispatch-ledger/client';
import type { LocalInfo } from '../../local/state.js';
import { startStatusPage } from '../../ui/server.js';
import { eventually } from '../support/eventually.js';

/**
 * The status page in Chromium against a scripted ledger: the states a live platform rarely shows on cue —
 * a backlog past one page, a failed lookup, a ledger that is down, a hidden tab, a filter changed while a
 * read fails. The ledger's answers are the script's (no platform runs here); status-page.test.ts drives
 * the page against a live one.
 */

/** A ledger no request reaches: every answer the page gets is the script's. */
const NOWHERE: LocalInfo = {
  region: 'us-east-1',
  apiUrl: 'http://127.0.0.1:9',
  dispatchQueueUrl: 'http://127.0.0.1:9/000000000000/dispatches',
  dlqUrl: 'http://127.0.0.1:9/000000000000/dlq',
  sqsEndpoint: 'http://127.0.0.1:9',
  dynamodbEndpoint: 'http://127.0.0.1:9',
  s3Endpoint: 'http://127.0.0.1:9',
  eventBridgeEndpoint: 'http://127.0.0.1:9',
  eventBusName: 'dispatch-ledger',
  eventLog: '/dev/null',
  demoAgentUrl: 'http://127.0.0.1:9',
};

/** What a quiet ledger answers to a route the script leaves alone. */
function quiet(route: string): { status: number; body: unknown } {
  if (route === 'counts') return { status: 200, body: { total: 0, phase: {}, execution: {}, evidence: {}, asOf: '2026-12-07T10:00:00.000Z' } };
  if (route === 'getDispatch') return { status: 404, body: { error: { code: 'not_found', message: 'no such dispatch' } } };
  return { status: 200, body: { items: [], cursor: null } };
}

let context: BrowserContext;
let browser: { readonly close: () => Promise<void> } | undefined;
const pageErrors: string[] = [];

beforeAll(async () => {
  const launched = await launchChromium();
  browser = launched;
  context = launched.context;
});

afterAll(async () => {
  await browser?.close();
  expect(pageErrors).toEqual([]);
});

/** A count of the page's requests to its server under `prefix` from now on (the reads it makes of the ledger). */
function readsOf(page: Page, prefix = '/api/'): () => number {
  let reads = 0;
  page.on('request', (request) => {
    if (new URL(request.url()).pathname.startsWith(prefix)) reads += 1;
  });
  return () => reads;
}

/** The page's tab hidden or shown, as the browser tells it (`document.hidden` and a visibilitychange event). */
const setHidden = (page: Page, hidden: boolean) => page.evaluate(`(() => { Object.defineProperty(document, 'hidden', { value: ${hidden}, configurable: true }); document.dispatchEvent(new Event('visibilitychange')); })()`);

describe('the status page in Chromium, against a scripted ledger', () => {
  type Answer = { status: number; body: unknown } | undefined;
  async function scriptedPage(answer: (route: string, query: Readonly<Record<string, unknown>>) => Answer | Promise<Answer>, options: { readonly clock?: boolean } = {}): Promise<{ page: Page; close: () => Promise<void> }> {
    const ledger = createLedgerClient({ local: NOWHERE });
    const scripted: LedgerClient = {
      ...ledger,
      raw: async (route, parts) => ({ ...((await answer(route, parts?.query ?? {})) ?? quiet(route)), requestId: undefined }),
    };
    const other = await startStatusPage({ client: scripted, refreshMs: 500, log: () => undefined });
    const page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(`pageerror: ${error.message}`));
    // The page's timers on a clock that stands still until the test moves it (no waiting in the test).
    if (options.clock) {
      const now = Date.now();
      await page.clock.install({ time: now });
      await page.clock.pauseAt(now + 1_000);
    }
    await page.goto(other.url);
    return { page, close: async () => { await page.close(); await other.close(); } };
  }

  it('shows every kind of a backlog, not the first page of the first kind (regression: 100 retrying hid a pending cancel, and the count said 100)', async () => {
    const line = (kind: string, n: number) => ({ kind, dispatchId: `d-${kind}-${n}`, origin: 'planner', target: 'demo-agent', attempt: 1, since: '2026-12-07T10:00:00.000Z', status: kind === 'retrying' ? 'pending' : 'running', reason: `${kind} ${n}` });
    const asked: string[] = [];
    const { page, close } = await scriptedPage((route, query) => {
      if (route !== 'attention') return undefined;
      const kind = typeof query.kind === 'string' ? query.kind : undefined;
      asked.push(kind ?? 'all');
      if (kind === undefined) return { status: 200, body: { items: Array.from({ length: 100 }, (_, n) => line('retrying', n)), cursor: 'next-page' } };
      if (kind === 'retrying') return { status: 200, body: { items: Array.from({ length: 25 }, (_, n) => line('retrying', n)), cursor: 'more-retrying' } };
      if (kind === 'cancel_pending') return { status: 200, body: { items: [line('cancel_pending', 1)], cursor: null } };
      return { status: 200, body: { items: [], cursor: null } };
    });
    try {
      await page.locator('#attention-cancel_pending').getByRole('link', { name: 'd-cancel_pending-1' }).waitFor();
      await expect(page.locator('#attention-retrying h3').textContent()).resolves.toMatch(/\(25\+\)$/);
      await expect(page.locator('#attention-retrying').textContent()).resolves.toContain('npx ledger attention --kind retrying');
      expect(asked).toContain('all');
      expect(asked).toContain('cancel_pending');
    } finally {
      await close();
    }
  });

  it('says a lookup that failed failed (regression: "looked up at …" whatever the answer), and the header no "updated" when nothing could be read', async () => {
    let down = false;
    const { page, close } = await scriptedPage((route, query) => {
      if (route === 'getDispatch' && String(query.refresh) === 'true') return { status: 502, body: { error: { code: 'ledger_unreachable', message: 'the target did not answer' } } };
      return down ? { status: 503, body: { error: { code: 'unavailable', message: 'down' } } } : undefined;
    });
    try {
      await page.goto(`${new URL(page.url()).origin}/#/dispatches/d-lookup`);
      await page.getByRole('button', { name: 'Look the run up at the target now' }).click();
      await page.getByText('the lookup failed: the ledger answered 502 ledger_unreachable: the target did not answer').waitFor();
      await expect(page.locator('#dispatch').textContent()).resolves.not.toMatch(/looked up at|asked the ledger/);
      down = true;
      await page.locator('#updated').getByText(/^nothing could be read at/).waitFor();
    } finally {
      await close();
    }
  });

  it('reads nothing while the tab is hidden, and reads again when it is shown (regression: a forgotten tab polled the ledger every few seconds for ever)', async () => {
    const { page, close } = await scriptedPage(() => undefined, { clock: true });
    try {
      // The first tick's reads done: the next tick waits on the page's (installed) clock.
      await page.locator('#updated').getByText(/^updated/).waitFor();
      const reads = readsOf(page);
      await setHidden(page, true);
      // Four refresh periods (500 ms each) on the page's clock: hidden, not one read.
      await page.clock.runFor(2_000);
      expect(reads()).toBe(0);
      const whenHidden = reads();
      await setHidden(page, false);
      await eventually('a read once shown', () => (reads() > whenHidden ? true : undefined), 5_000);
    } finally {
      await close();
    }
  });

  it('reads at once when shown again during a backoff (regression: a tab shown again waited out up to a minute of backoff, saying nothing could be read)', async () => {
    const { page, close } = await scriptedPage(() => ({ status: 503, body: { error: { code: 'unavailable', message: 'down' } } }), { clock: true });
    try {
      const reads = readsOf(page);
      await page.locator('#updated').getByText(/^nothing could be read at/).waitFor();
      // Hidden and shown again before the backed-off tick is due (the page's clock stands still).
      await setHidden(page, true);
      const before = reads();
      await setHidden(page, false);
      await eventually('a read once shown', () => (reads() > before ? true : undefined), 5_000);
    } finally {
      await close();
    }
  });

  it("goes on reading when shown while an older view's slow read is still under way (a review's regression: the page stopped for good)", async () => {
    // The overview's counts read is held, so its tick is still reading when the view changes.
    let release: () => void = () => undefined;
    let held: Promise<void> | undefined;
    const { page, close } = await scriptedPage(async (route) => {
      if (route === 'counts' && held) await held;
      return undefined;
    }, { clock: true });
    try {
      await page.locator('#updated').getByText(/^updated/).waitFor();
      held = new Promise((resolve) => (release = resolve));
      const reads = readsOf(page, '/api/dispatches/d-slow');
      // The overview's next tick starts and waits on its counts.
      await page.clock.runFor(500);
      // The view changes: its own tick reads, ends, and sets the next one's timer.
      await page.evaluate(`location.hash = '#/dispatches/d-slow'`);
      await eventually('the dispatch view read', () => (reads() > 0 ? true : undefined), 5_000);
      // Hidden: the timer's tick stops the loop. Shown while the overview's old read is still held.
      await setHidden(page, true);
      await page.clock.runFor(500);
      const before = reads();
      await setHidden(page, false);
      release();
      await eventually('a read after it was shown', () => (reads() > before ? true : undefined), 5_000);
    } finally {
      release();
      await close();
    }
  });

  it('asks a ledger that answers nothing less and less often (regression: every 3 s for ever)', async () => {
    const { page, close } = await scriptedPage(() => ({ status: 503, body: { error: { code: 'unavailable', message: 'down' } } }), { clock: true });
    try {
      const reads = readsOf(page);
      await page.locator('#updated').getByText(/^nothing could be read at/).waitFor();
      const first = reads();
      // The first failure doubles the 500 ms period: nothing at 999 ms, the next tick's three reads at 1,000.
      await page.clock.runFor(999);
      expect(reads()).toBe(first);
      await page.clock.runFor(1);
      await eventually('the next tick', () => (reads() === first + 3 ? true : undefined), 5_000);
    } finally {
      await close();
    }
  });

  it("shows a new filter's list alone, even after its first read failed (regression: the old filter's older pages and cursor stayed under the new filter)", async () => {
    const row = (id: string, phase: string) => ({ dispatchId: id, origin: 'planner', target: 'demo-agent', phase, status: phase === 'submitted' ? 'running' : null, createdAt: '2026-12-07T10:00:00.000Z', runId: null, blockedReason: null });
    let failNextAny = false;
    const { page, close } = await scriptedPage((route, query) => {
      if (route !== 'listDispatches') return undefined;
      if (query.phase === 'submitted') {
        return query.cursor === 'c-s' ? { status: 200, body: { items: Array.from({ length: 10 }, (_, n) => row(`d-s-${50 + n}`, 'submitted')), cursor: null } } : { status: 200, body: { items: Array.from({ length: 50 }, (_, n) => row(`d-s-${n}`, 'submitted')), cursor: 'c-s' } };
      }
      if (failNextAny) {
        failNextAny = false;
        return { status: 503, body: { error: { code: 'unavailable', message: 'try again' } } };
      }
      // Every phase's newest: a few accepted, then the newest submitted ones (the old list's head, so the two meet).
      return query.cursor ? { status: 200, body: { items: [], cursor: null } } : { status: 200, body: { items: [...Array.from({ length: 5 }, (_, n) => row(`d-a-${n}`, 'accepted')), ...Array.from({ length: 45 }, (_, n) => row(`d-s-${n}`, 'submitted'))], cursor: 'c-a' } };
    }, { clock: true });
    try {
      await page.selectOption('#filter-phase', 'submitted');
      await page.getByRole('link', { name: 'd-s-0', exact: true }).waitFor();
      await page.getByRole('button', { name: 'Load older dispatches' }).click();
      await page.getByRole('link', { name: 'd-s-59', exact: true }).waitFor();
      // Back to any phase: that read fails once; the next tick's succeeds.
      failNextAny = true;
      await page.selectOption('#filter-phase', '');
      await page.getByText(/Could not load the dispatches/).waitFor();
      await page.clock.runFor(500);
      await page.getByRole('link', { name: 'd-a-0', exact: true }).waitFor();
      // The submitted-only older page (d-s-45…59) belongs to the old filter: not shown under any phase.
      await expect(page.getByRole('link', { name: 'd-s-59', exact: true }).count()).resolves.toBe(0);
      await expect(page.locator('#dispatches tbody tr').count()).resolves.toBe(50);
    } finally {
      await close();
    }
  });
});
