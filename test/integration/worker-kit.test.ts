import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { createWorker, fetchTransport, fileStore, RunCancelledError, type ListeningWorker, type LogLine, type RunFunction, type RunStore, type Transport } from '@dispatch-ledger/worker';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import type { DispatchView } from '../../shared/dispatch/view.js';
import { uniqueName } from '../support/engines.js';
import { eventually, startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * The worker kit as a real `http` target of the local platform: the ledger submits to it, looks its runs
 * up, forwards approvals and cancels to it, and takes its events and uploads (CONTRACT §8, §12).
 */
let t: TestPlatform;
let table: LedgerTable;
/** How long the racing test's proxy holds the answer to POST /runs at most. */
const RACE_HOLD_MS = 20_000;
const dirs: string[] = [];
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  // The racing test holds the kit's answer to POST /runs until the kit has been told not_yet_recorded:
  // the ledger's submission must outlast that wait on a slow machine (2 s, the tests' default, did not).
  t = await startTestPlatform({ TARGET_TIMEOUT_MS: String(RACE_HOLD_MS * 2) });
  table = new LedgerTable(DynamoDBDocumentClient.from(t.clients.dynamodb), { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
});
afterAll(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await t.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
const reportOf = (runId: string): string => `# Report\n\nWritten by run ${runId}.\n`;

/** What a kit worker's `run` did, counted per run. */
interface Kit extends ListeningWorker {
  readonly dir: string;
  readonly store: RunStore;
  readonly calls: Map<string, number>;
  readonly aborts: Map<string, unknown>;
  readonly log: LogLine[];
}

/**
 * A kit worker whose task says what to do: `report` uploads out/report.md and completes;
 * `no_evidence` completes with nothing uploaded; `hold` waits for its signal (attempts up to
 * `holdAttempts`, later ones complete); `approval` asks for approval and completes on approve.
 */
async function startKit(options: { dir?: string; port?: number; target?: string; transport?: Transport } = {}): Promise<Kit> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'kit-worker-'));
  if (!options.dir) dirs.push(dir);
  const calls = new Map<string, number>();
  const aborts = new Map<string, unknown>();
  const log: LogLine[] = [];
  const run: RunFunction = async (task, ctx) => {
    calls.set(ctx.runId, (calls.get(ctx.runId) ?? 0) + 1);
    ctx.signal.addEventListener('abort', () => aborts.set(ctx.runId, ctx.signal.reason), { once: true });
    ctx.heartbeat();
    switch (task['mode']) {
      case 'report': {
        const report = reportOf(ctx.runId);
        await ctx.putEvidence('out/report.md', report);
        return { summary: 'report written', body: { sha256: sha256(report) } };
      }
      case 'no_evidence':
        return { summary: 'finished without the report' };
      case 'hold': {
        const holdAttempts = typeof task['holdAttempts'] === 'number' ? task['holdAttempts'] : Number.POSITIVE_INFINITY;
        if (ctx.attempt > holdAttempts) return { summary: `attempt ${ctx.attempt} done` };
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
        throw new Error('stopped: the signal was aborted');
      }
      case 'approval': {
        const decision = await ctx.requestApproval('publish the report?');
        if (decision !== 'approve') throw new Error(`not approved (${decision})`);
        await ctx.putEvidence('out/report.md', reportOf(ctx.runId));
        return { summary: 'approved and published' };
      }
    }
    throw new Error(`unknown mode ${String(task['mode'])}`);
  };
  const store = fileStore({ dir });
  const worker = createWorker({ name: 'kit-worker', run, store, log: (line) => void log.push(line), ...(options.transport ? { transport: options.transport } : {}) });
  const listening = await worker.listen(options.port ?? 0);
  closers.push(() => listening.close());
  if (options.target) await table.putTarget({ name: options.target, kind: 'http', baseUrl: listening.url });
  return { ...listening, dir, store, calls, aborts, log };
}

const dispatch = (target: string, task: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  dispatchId: uniqueName('kit'),
  origin: 'planner',
  target,
  task,
  timeouts: { stallAfterSeconds: 30, deliveryGraceSeconds: 2, approvalWaitSeconds: 60 },
  ...extra,
});

const viewWhen = (dispatchId: string, done: (view: DispatchView) => boolean) => t.viewWhen(dispatchId, done);

async function post(path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${t.platform.info.apiUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-ledger-origin': 'planner' }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function getJson(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('the worker kit on the local platform', () => {
  let kit: Kit;
  beforeAll(async () => {
    kit = await startKit({ target: 'kit-worker' });
  });

  it('completes with its evidence: the platform finds the file itself, the dispatch is handled, run called once', async () => {
    const message = dispatch('kit-worker', { mode: 'report' }, { expectedEvidence: ['out/report.md'] });
    await t.send(JSON.stringify(message));

    const handled = await viewWhen(message.dispatchId, (view) => view.evidence.outcome !== 'pending' && view.execution.status === 'completed');
    const runId = `${message.dispatchId}:1`;
    expect(handled.runId).toBe(runId);
    expect(handled.evidence).toMatchObject({ outcome: 'handled', found: ['out/report.md'], missing: [] });
    expect(handled.evidence.files.map((file) => [file.ref, file.sha256])).toEqual([['out/report.md', sha256(reportOf(runId))]]);
    expect(handled.execution.result?.summary).toBe('report written');
    expect(handled.gate).toEqual({ satisfied: true, reasons: [] });
    expect(kit.calls.get(runId)).toBe(1);

    // The lookup the ledger makes reads the kit's store.
    const looked = await getJson(`${kit.url}/runs/${encodeURIComponent(runId)}`);
    expect(looked).toEqual({ status: 200, body: { runId, status: 'completed', result: { summary: 'report written', body: { sha256: sha256(reportOf(runId)) } }, evidence: ['out/report.md'] } });
    const refreshed = await t.view(message.dispatchId, { query: '?refresh=true' });
    expect(refreshed.execution).toMatchObject({ status: 'completed', monitorStatus: null });
  });

  it('completes without its evidence: the completion claims nothing, and the platform calls it an orphan after the grace', async () => {
    const message = dispatch('kit-worker', { mode: 'no_evidence' }, { expectedEvidence: ['out/report.md'] });
    await t.send(JSON.stringify(message));

    const completed = await viewWhen(message.dispatchId, (view) => view.execution.status === 'completed');
    expect(completed.evidence.outcome).toBe('pending');
    const orphan = await viewWhen(message.dispatchId, (view) => view.evidence.outcome !== 'pending');
    expect(orphan.evidence).toMatchObject({ outcome: 'orphan_no_delivery', found: [], missing: ['out/report.md'] });
    expect(orphan.gate.satisfied).toBe(false);
    const looked = await getJson(`${kit.url}/runs/${encodeURIComponent(`${message.dispatchId}:1`)}`);
    expect(looked.body).toEqual({ runId: `${message.dispatchId}:1`, status: 'completed', result: { summary: 'finished without the report' } });
  });

  it('makes one run, and calls run once, for concurrent duplicate submissions with one Idempotency-Key', async () => {
    const dispatchId = uniqueName('dup');
    const key = `${dispatchId}:1`;
    const body = JSON.stringify({ dispatchId, attempt: 1, origin: 'planner', task: { mode: 'no_evidence' }, expectedEvidence: [], callbackUrl: t.platform.info.apiUrl, timeouts: { stallAfterSeconds: 30 } });
    const answers = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const response = await fetch(`${kit.url}/runs`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': key }, body });
        return { status: response.status, body: (await response.json()) as { runId: string } };
      }),
    );
    expect(new Set(answers.map((answer) => answer.body.runId))).toEqual(new Set([key]));
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);

    await eventually('the duplicated run ended', () => getJson(`${kit.url}/runs/${encodeURIComponent(key)}`), { until: (found) => found.body['status'] === 'completed' });
    const again = await fetch(`${kit.url}/runs`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': key }, body });
    expect(await again.json()).toEqual({ runId: key, status: 'completed' });
    expect(kit.calls.get(key)).toBe(1);
    const listed = await kit.store.list();
    expect(listed.records.filter((record) => record.dispatchId === dispatchId)).toHaveLength(1);
    // The ledger never heard of this dispatch: its callbacks were refused, and the kit said so.
    const refusals = await eventually('the refusal of its final event, logged', () => {
      const lines = kit.log.filter((line) => line.msg === 'callback_refused' && line['dispatchId'] === dispatchId);
      return lines.some((line) => line['type'] === 'completed') ? lines : undefined;
    });
    expect(refusals.map((line) => line['status'])).toEqual(refusals.map(() => 404));
    // …and its store says the ledger refused the final report (written just after the log line).
    await eventually('the refusal recorded in the store', async () => ((await kit.store.get(key))?.finalReport?.state === 'refused' ? true : undefined));
  });

  it('aborts ctx.signal when a forced redispatch makes the ledger cancel the run, and runs the next attempt', async () => {
    const message = dispatch('kit-worker', { mode: 'hold', holdAttempts: 1 });
    await t.send(JSON.stringify(message));
    const firstRun = `${message.dispatchId}:1`;
    await viewWhen(message.dispatchId, (view) => view.execution.status === 'running');

    const redispatched = await post(`/dispatches/${message.dispatchId}/redispatch`, { reason: 'the run looks stuck', force: true });
    expect(redispatched.status).toBe(202);
    expect(redispatched.body).toMatchObject({ attempt: 2, supersededRunId: firstRun });
    expect(String(redispatched.body['cancel'])).toMatch(/^cancelled/);

    expect(kit.aborts.get(firstRun)).toBeInstanceOf(RunCancelledError);
    const done = await viewWhen(message.dispatchId, (view) => view.attempt === 2 && view.execution.status === 'completed');
    expect(done.runId).toBe(`${message.dispatchId}:2`);
    expect(done.execution.result?.summary).toBe('attempt 2 done');
    const old = await eventually('the first run cancelled', () => getJson(`${kit.url}/runs/${encodeURIComponent(firstRun)}`), { until: (found) => found.body['status'] === 'cancelled' });
    expect(old.body).toMatchObject({ runId: firstRun, status: 'cancelled' });
    expect([kit.calls.get(firstRun), kit.calls.get(`${message.dispatchId}:2`)]).toEqual([1, 1]);
  });

  it('completes an approval the worker asked for once the origin approves it through the ledger', async () => {
    const message = dispatch('kit-worker', { mode: 'approval' }, { expectedEvidence: ['out/report.md'] });
    await t.send(JSON.stringify(message));
    const waiting = await viewWhen(message.dispatchId, (view) => view.execution.pendingApproval !== null);
    expect(waiting.execution.status).toBe('waiting_for_approval');
    const approvalId = waiting.execution.pendingApproval?.approvalId ?? '';

    // The kit answers the lookup with the same pending approval.
    const looked = await getJson(`${kit.url}/runs/${encodeURIComponent(`${message.dispatchId}:1`)}`);
    expect(looked.body).toMatchObject({ status: 'waiting_for_approval', pendingApproval: { approvalId } });
    expect((await post(`/dispatches/${message.dispatchId}/approval`, { approvalId: 'a-not-this-one', decision: 'approve' })).status).toBe(409);
    expect(await post(`/dispatches/${message.dispatchId}/approval`, { approvalId, decision: 'approve' })).toEqual({ status: 200, body: { approvalId, decision: 'approve' } });

    const done = await viewWhen(message.dispatchId, (view) => view.execution.status === 'completed' && view.evidence.outcome !== 'pending');
    expect(done.execution.result?.summary).toBe('approved and published');
    expect(done.evidence.outcome).toBe('handled');
    expect(kit.calls.get(`${message.dispatchId}:1`)).toBe(1);
  });
});

describe('the worker kit across a restart', () => {
  it("records a run whose final event has not reached the ledger from its lookup, the result's body included (regression: the lookup kept the summary alone)", async () => {
    // The final event is held back: the ledger can only learn how the run ended by looking it up.
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const held: Transport = async (url, init) => {
      if (typeof init.body === 'string' && url.endsWith('/events') && (JSON.parse(init.body) as { type?: string }).type === 'completed') await released;
      return fetchTransport(url, init);
    };
    const heldKit = await startKit({ target: 'kit-final-held', transport: held });
    const message = dispatch('kit-final-held', { mode: 'report' });
    await t.send(JSON.stringify(message));
    const runId = `${message.dispatchId}:1`;
    await eventually('the run over in the kit\'s store', async () => ((await heldKit.store.get(runId))?.status === 'completed' ? true : undefined));
    expect((await t.view(message.dispatchId)).execution.status).toBe('running');

    const refreshed = await t.view(message.dispatchId, { query: '?refresh=true' });
    expect(refreshed.execution).toMatchObject({ status: 'completed', result: { summary: 'report written' } });
    const body = (await table.getState(message.dispatchId))?.execution.result?.body;
    const kept = body && (await table.getResultBody(message.dispatchId, 1, body.seq, body.digest));
    expect(kept?.json && JSON.parse(kept.json)).toEqual({ sha256: sha256(reportOf(runId)) });

    // The final event, once through, changes nothing more: the ledger already holds the end and its body.
    release();
    await eventually('the final event delivered', async () => ((await heldKit.store.get(runId))?.finalReport?.state === 'delivered' ? true : undefined));
    expect((await table.getState(message.dispatchId))?.execution.result?.body).toEqual(body);
  });

  it('answers the ledger\'s lookup from its store after a restart mid-run (never 404): the run is failed worker_restarted', async () => {
    const first = await startKit({ target: 'kit-restart' });
    const message = dispatch('kit-restart', { mode: 'hold' });
    await t.send(JSON.stringify(message));
    const runId = `${message.dispatchId}:1`;
    await viewWhen(message.dispatchId, (view) => view.execution.status === 'running');
    await first.close();
    expect((await first.store.get(runId))?.status).toBe('running');

    // The same store, the same address: a restarted process, whose callbacks are held back for now, so
    // the ledger can only learn what happened by looking the run up.
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const held: Transport = async (url, init) => {
      await released;
      return fetchTransport(url, init);
    };
    const second = await startKit({ dir: first.dir, port: first.port, transport: held });
    expect(second.url).toBe(first.url);
    const looked = await getJson(`${second.url}/runs/${encodeURIComponent(runId)}`);
    expect(looked).toEqual({ status: 200, body: { runId, status: 'failed', nativeStatus: 'worker_restarted', result: { summary: 'worker_restarted' } } });
    expect((await t.view(message.dispatchId)).execution.status).toBe('running');

    const refreshed = await t.view(message.dispatchId, { query: '?refresh=true' });
    expect(refreshed.execution).toMatchObject({ status: 'failed', nativeStatus: 'worker_restarted', monitorStatus: null, result: { summary: 'worker_restarted' } });

    // Its own report, once through, changes nothing more: the ledger already knows.
    release();
    await eventually('the restart report delivered', async () => ((await second.store.get(runId))?.finalReport?.state === 'delivered' ? true : undefined));
    expect((await t.view(message.dispatchId)).execution).toMatchObject({ status: 'failed', nativeStatus: 'worker_restarted', result: { summary: 'worker_restarted' } });
    expect(first.calls.get(runId)).toBe(1);
    expect(second.calls.get(runId)).toBeUndefined();
  });
});

describe('the worker kit reporting a restarted run', () => {
  it('reads failed with nativeStatus worker_restarted in the dispatch view, from the kit\'s own report (CONTRACT V3 §2)', async () => {
    const first = await startKit({ target: 'kit-restart-report' });
    const message = dispatch('kit-restart-report', { mode: 'hold' });
    await t.send(JSON.stringify(message));
    await viewWhen(message.dispatchId, (view) => view.execution.status === 'running');
    await first.close();

    const second = await startKit({ dir: first.dir, port: first.port });
    const failed = await viewWhen(message.dispatchId, (view) => view.execution.status === 'failed');
    expect(failed.execution).toMatchObject({ status: 'failed', nativeStatus: 'worker_restarted', monitorStatus: null, result: { summary: 'worker_restarted' } });
    expect(failed.runs.at(-1)).toMatchObject({ status: 'failed', nativeStatus: 'worker_restarted' });
    expect(second.calls.size).toBe(0);
  });
});

describe('the worker kit when its callbacks race the ledger', () => {
  /**
   * A proxy in front of the worker that holds back the worker's answer to POST /runs until `release`
   * resolves: until then the ledger cannot have recorded the run, whatever the worker sends it.
   */
  async function holdingProxy(upstream: string, release: () => Promise<void>): Promise<{ url: string; server: Server }> {
    const readAll = async (request: IncomingMessage): Promise<Buffer> => {
      const chunks: Buffer[] = [];
      for await (const chunk of request as AsyncIterable<Buffer>) chunks.push(chunk);
      return Buffer.concat(chunks);
    };
    const server = createServer((request, response) => {
      void (async () => {
        const body = await readAll(request);
        const headers: Record<string, string> = {};
        for (const name of ['content-type', 'idempotency-key', 'x-request-id']) {
          const value = request.headers[name];
          if (typeof value === 'string') headers[name] = value;
        }
        const answer = await fetch(`${upstream}${request.url ?? '/'}`, { method: request.method ?? 'GET', headers, ...(body.length > 0 ? { body } : {}) });
        const text = await answer.text();
        if (request.method === 'POST' && request.url === '/runs') await release();
        response.writeHead(answer.status, { 'content-type': 'application/json', 'x-request-id': answer.headers.get('x-request-id') ?? '' });
        response.end(text);
      })().catch(() => response.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
  }

  it('retries an upload the ledger answers 409 not_yet_recorded until the run is recorded, and loses no evidence', async () => {
    const kit = await startKit();
    const toldNotYet = (line: LogLine): boolean => line.msg === 'callback_retry' && line['callback'] === 'evidence' && line['code'] === 'not_yet_recorded';
    let raced = false;
    const proxy = await holdingProxy(kit.url, async () => {
      raced = await eventually('a not_yet_recorded answer to the upload', () => (kit.log.some(toldNotYet) ? true : undefined), { timeoutMs: RACE_HOLD_MS }).catch(() => false);
    });
    closers.push(() => new Promise((resolve) => proxy.server.close(() => resolve())));
    await table.putTarget({ name: 'kit-raced', kind: 'http', baseUrl: proxy.url });

    const message = dispatch('kit-raced', { mode: 'report' }, { expectedEvidence: ['out/report.md'] });
    await t.send(JSON.stringify(message));
    const handled = await viewWhen(message.dispatchId, (view) => view.execution.status === 'completed' && view.evidence.outcome !== 'pending');

    expect(raced).toBe(true);
    const runId = `${message.dispatchId}:1`;
    expect(handled.evidence).toMatchObject({ outcome: 'handled', found: ['out/report.md'] });
    expect(handled.evidence.files.map((file) => file.sha256)).toEqual([sha256(reportOf(runId))]);
    const uploads = kit.log.filter((line) => line['callback'] === 'evidence' && line['runId'] === runId);
    expect(uploads.filter(toldNotYet).length).toBeGreaterThanOrEqual(1);
    expect(uploads.filter((line) => line.msg === 'callback_delivered')).toHaveLength(1);
    expect(uploads.filter((line) => line.msg === 'callback_refused' || line.msg === 'callback_gave_up')).toHaveLength(0);
    expect(kit.calls.get(runId)).toBe(1);
  });
});
