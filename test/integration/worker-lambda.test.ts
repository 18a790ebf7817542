import { createHash } from 'node:crypto';
import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchTransport, RunCancelledError, type RunFunction, type Transport } from '@dispatch-ledger/worker';
import { createLambdaWorker, dynamoRunStore, type LambdaHandler, type LambdaRunStore } from '@dispatch-ledger/worker/lambda';
import { startLocalLambda, type LocalLambda } from '../../local/runtime/lambda-invoke.js';
import { lambdaTarget } from '../../shared/adapters/lambda-target.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import type { DispatchView } from '../../shared/dispatch/view.js';
import { loopbackOnly, uniqueName } from '../support/engines.js';
import { eventually, startTestPlatform, type TestPlatform } from '../support/platform.js';
import { failuresQueue } from '../support/sqs-records.js';

/**
 * The worker kit as a Lambda (CONTRACT §12), end to end on the local platform: the ledger invokes the
 * function through the local Lambda (its own LambdaClient, pointed there by AWS_ENDPOINT_URL_LAMBDA),
 * the kit keeps its runs in a DynamoDB Local table and reports through the API; the ledger's lookup
 * reads that table.
 */
const FUNCTION = 'kit-lambda';
const ARN = `arn:aws:lambda:us-east-1:000000000000:function:${FUNCTION}`;
let t: TestPlatform;
let table: LedgerTable;
let runtime: LocalLambda;
let stateTable: string;
let documents: DynamoDBDocumentClient;
let store: LambdaRunStore;
let handler: LambdaHandler;
const calls = new Map<string, number>();
const aborts = new Map<string, unknown>();
const gates = new Map<string, () => void>();
const deliveries: Array<{ event: unknown; requestId: string }> = [];
/** Every event the kit posted, with the ledger's answer. */
const posted: Array<{ runId: string; seq: number; type: string; status: number; text: string }> = [];

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
const reportOf = (runId: string): string => `# Report\n\nWritten by run ${runId}.\n`;

const run: RunFunction = async (task, ctx) => {
  calls.set(ctx.runId, (calls.get(ctx.runId) ?? 0) + 1);
  ctx.signal.addEventListener('abort', () => aborts.set(ctx.runId, ctx.signal.reason), { once: true });
  // Not the gate's: that invocation is the one the test has Lambda give up on, and one that is gone writes
  // nothing. A heartbeat of its own here would follow the kit's first one 400 ms later (coalesced), and
  // when its write lands between the retry's read and its write, the retry rightly leaves the run to the
  // invocation that is evidently alive: no `failed` then (the flake of 2026-12-06, 30 s waiting for it).
  if (task['mode'] !== 'gate') ctx.heartbeat();
  switch (task['mode']) {
    case 'report': {
      const report = reportOf(ctx.runId);
      await ctx.putEvidence('out/report.md', report);
      return { summary: 'report written', body: { sha256: sha256(report) } };
    }
    case 'gate':
      // Waits for the test to let it go: an invocation the test will declare dead.
      await new Promise<void>((resolve) => gates.set(ctx.runId, resolve));
      return { summary: 'finished after the gate' };
    case 'hold':
      if (ctx.attempt > 1) return { summary: `attempt ${ctx.attempt} done` };
      while (!ctx.signal.aborted) {
        ctx.heartbeat();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error('stopped: the signal was aborted');
    case 'approval': {
      // Re-entrant: everything before the approval is redone when the decision re-invokes the function.
      const decision = await ctx.requestApproval('publish the report?');
      if (decision !== 'approve') throw new Error(`not approved (${decision})`);
      await ctx.putEvidence('out/report.md', reportOf(ctx.runId));
      return { summary: 'approved and published' };
    }
    default:
      throw new Error(`unknown mode ${String(task['mode'])}`);
  }
};

/** Runs whose final event never reaches the ledger: the connection drops on every try. */
const finalLost = new Set<string>();
/**
 * The invocations of those runs end this soon (a short function timeout), so the kit stops retrying soon.
 * The kit keeps 2 s of it for its last writes, so the run's own upload has the rest: 1.5 s (at 3.5 s) was
 * too little on a clean clone's saturated machine — the upload gave up, the run failed, and the test
 * waited for a completion that never came (2026-12-07).
 */
const SHORT_INVOCATION_MS = 8_000;

const recording: Transport = async (url, init) => {
  const match = /\/runs\/([^/]+)\/events$/.exec(new URL(url).pathname);
  if (match && typeof init.body === 'string' && finalLost.has(decodeURIComponent(match[1] ?? '')) && (JSON.parse(init.body) as { type: string }).type === 'completed') {
    throw new TypeError('fetch failed: the connection was reset');
  }
  const answer = await fetchTransport(url, init);
  if (match && typeof init.body === 'string') {
    const event = JSON.parse(init.body) as { seq: number; type: string };
    posted.push({ runId: decodeURIComponent(match[1] ?? ''), seq: event.seq, type: event.type, status: answer.status, text: answer.text });
  }
  return answer;
};

beforeAll(async () => {
  runtime = await startLocalLambda({
    region: 'us-east-1',
    retryDelaysMs: [50, 50],
    functions: [
      {
        name: FUNCTION,
        timeoutMs: 60_000,
        handler: async (event, context) => {
          deliveries.push({ event, requestId: context.awsRequestId });
          const runId = typeof event === 'object' && event !== null && 'runId' in event ? String(event.runId) : '';
          if (!finalLost.has(runId)) return handler(event, context);
          const endsAt = Date.now() + SHORT_INVOCATION_MS;
          return handler(event, { ...context, getRemainingTimeInMillis: () => Math.max(0, endsAt - Date.now()) });
        },
      },
    ],
    onFailure: failuresQueue(() => table),
  });
  t = await startTestPlatform({ AWS_ENDPOINT_URL_LAMBDA: runtime.url });
  documents = DynamoDBDocumentClient.from(t.clients.dynamodb, { marshallOptions: { removeUndefinedValues: true } });
  table = new LedgerTable(documents, { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
  stateTable = uniqueName('kit-runs');
  await t.clients.dynamodb.send(
    new CreateTableCommand({ TableName: stateTable, BillingMode: 'PAY_PER_REQUEST', AttributeDefinitions: [{ AttributeName: 'runId', AttributeType: 'S' }], KeySchema: [{ AttributeName: 'runId', KeyType: 'HASH' }] }),
  );
  store = dynamoRunStore({ tableName: stateTable, client: t.clients.dynamodb });
  handler = createLambdaWorker({ name: 'kit-lambda', run, store, transport: recording, log: () => undefined });
  await table.putTarget({ name: FUNCTION, kind: 'lambda', functionArn: ARN, timeoutSeconds: 60, stateTable });
});
afterAll(async () => {
  for (const release of gates.values()) release();
  await runtime?.idle();
  await runtime?.close();
  await t?.stop();
});

const dispatch = (task: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  dispatchId: uniqueName('kl'),
  origin: 'planner',
  target: FUNCTION,
  task,
  timeouts: { stallAfterSeconds: 2, deliveryGraceSeconds: 2, approvalWaitSeconds: 60 },
  ...extra,
});

const viewWhen = (dispatchId: string, done: (view: DispatchView) => boolean) => t.viewWhen(dispatchId, done);

async function post(path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${t.platform.info.apiUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-ledger-origin': 'planner' }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const submissionOf = (runId: string) => {
  const found = deliveries.find((delivery) => typeof delivery.event === 'object' && delivery.event !== null && 'runId' in delivery.event && delivery.event.runId === runId);
  if (!found) throw new Error(`no delivery for ${runId}`);
  return found;
};
const context = (awsRequestId: string) => ({ awsRequestId, getRemainingTimeInMillis: () => 60_000 });

describe('the worker kit as a Lambda on the local platform', () => {
  it('completes with its evidence (handled), a repeated delivery runs nothing again, and the ledger’s lookup reads the table', async () => {
    const message = dispatch({ mode: 'report' }, { expectedEvidence: ['out/report.md'] });
    await t.send(JSON.stringify(message));
    const runId = `${message.dispatchId}:1`;
    const handled = await viewWhen(message.dispatchId, (view) => view.evidence.outcome !== 'pending' && view.execution.status === 'completed');
    expect(handled.runId).toBe(runId);
    expect(handled.evidence).toMatchObject({ outcome: 'handled', found: ['out/report.md'], missing: [] });
    expect(handled.execution.result?.summary).toBe('report written');
    expect(calls.get(runId)).toBe(1);

    const item = await store.get(runId);
    expect(item).toMatchObject({ runId, status: 'completed', result: { summary: 'report written' }, finalReport: { state: 'delivered' } });
    const seqBefore = item?.seq;

    // Lambda delivers the same event again (a retry, a duplicate invoke), under a new request id and the old one.
    const { event, requestId } = submissionOf(runId);
    await handler(event, context('duplicate-1'));
    await handler(event, context(requestId));
    expect(calls.get(runId)).toBe(1);
    expect((await store.get(runId))?.seq).toBe(seqBefore);

    const port = lambdaTarget(
      { name: FUNCTION, kind: 'lambda', functionArn: ARN, timeoutSeconds: 60, stateTable },
      { lambda: loopbackOnly(new LambdaClient({ region: 'us-east-1', endpoint: runtime.url, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } })), documents, failureOf: async () => undefined, now: () => new Date() },
    );
    const report = reportOf(runId);
    expect(await port.lookup(runId, { submittedAt: new Date().toISOString() })).toEqual({ kind: 'found', run: { runId, status: 'completed', result: { summary: 'report written', bodyJson: JSON.stringify({ sha256: sha256(report) }) } } });
  });

  it("records a run whose final event never reached the ledger from its lookup, the result's body included (regression: the lookup read the summary alone, and the body was lost)", async () => {
    const message = dispatch({ mode: 'report' });
    const runId = `${message.dispatchId}:1`;
    finalLost.add(runId);
    await t.send(JSON.stringify(message));
    // The kit gave up on its final event when the invocation ran out of time; the run's end is in its table only.
    await eventually('the run completed in the kit\'s table', async () => ((await store.get(runId))?.status === 'completed' ? true : undefined));
    await runtime.idle();
    expect((await store.get(runId))?.finalReport?.state).toBe('pending');
    expect(posted.filter((p) => p.runId === runId && p.type === 'completed')).toEqual([]);

    // The stall watch looks the run up: the kit's table says completed, with the body.
    const ended = await viewWhen(message.dispatchId, (view) => view.execution.status === 'completed');
    expect(ended.execution.result?.summary).toBe('report written');
    const state = await table.getState(message.dispatchId);
    const body = state?.execution.result?.body;
    expect(body).toMatchObject({ seq: 0 });
    const kept = body && (await table.getResultBody(message.dispatchId, 1, body.seq, body.digest));
    expect(kept?.json && JSON.parse(kept.json)).toEqual({ sha256: sha256(reportOf(runId)) });
  });

  it('reports a run an interrupted invocation left running as failed worker_restarted, on a fresh seq the ledger applies; the old invocation then sends nothing', async () => {
    const message = dispatch({ mode: 'gate' });
    await t.send(JSON.stringify(message));
    const runId = `${message.dispatchId}:1`;
    await viewWhen(message.dispatchId, (view) => view.execution.status === 'running');
    await eventually('the first heartbeat applied', async () => (posted.some((p) => p.runId === runId && p.type === 'heartbeat' && p.status === 202) ? true : undefined));
    expect((await store.get(runId))?.status).toBe('running');

    // Lambda retries the invocation (same request id): the earlier try is gone as far as Lambda knows.
    const { event, requestId } = submissionOf(runId);
    await handler(event, context(requestId));
    const failed = await viewWhen(message.dispatchId, (view) => view.execution.status === 'failed');
    expect(failed.execution).toMatchObject({ status: 'failed', nativeStatus: 'worker_restarted', result: { summary: 'worker_restarted' } });
    const item = await store.get(runId);
    expect(item).toMatchObject({ status: 'failed', nativeStatus: 'worker_restarted', result: { summary: 'worker_restarted' }, finalReport: { state: 'delivered' } });
    const final = posted.find((p) => p.runId === runId && p.type === 'failed');
    expect(final).toMatchObject({ status: 202 });
    expect(posted.filter((p) => p.runId === runId).map((p) => p.seq)).toEqual([...new Set(posted.filter((p) => p.runId === runId).map((p) => p.seq))]);
    expect(posted.filter((p) => p.runId === runId && JSON.parse(p.text).applied === false && p.type !== 'heartbeat')).toEqual([]);

    // The old invocation's run returns after all: its write loses (the item moved on), nothing is sent.
    const sentBefore = posted.filter((p) => p.runId === runId).length;
    gates.get(runId)?.();
    await runtime.idle();
    expect((await store.get(runId))?.status).toBe('failed');
    expect(posted.filter((p) => p.runId === runId)).toHaveLength(sentBefore);
    expect(calls.get(runId)).toBe(1);
  });

  it('aborts ctx.signal when the control record says superseded (a forced redispatch), and runs the next attempt', async () => {
    const message = dispatch({ mode: 'hold' });
    await t.send(JSON.stringify(message));
    const firstRun = `${message.dispatchId}:1`;
    await viewWhen(message.dispatchId, (view) => view.execution.status === 'running');

    const redispatched = await post(`/dispatches/${message.dispatchId}/redispatch`, { reason: 'the run looks stuck', force: true });
    expect(redispatched.status).toBe(202);
    const done = await viewWhen(message.dispatchId, (view) => view.attempt === 2 && view.execution.status === 'completed');
    expect(done.execution.result?.summary).toBe('attempt 2 done');
    await eventually('the first run cancelled in the store', async () => ((await store.get(firstRun))?.status === 'cancelled' ? true : undefined));
    expect(aborts.get(firstRun)).toBeInstanceOf(RunCancelledError);
    expect([calls.get(firstRun), calls.get(`${message.dispatchId}:2`)]).toEqual([1, 1]);
  });

  it('aborts ctx.signal when its origin cancels (the control record says cancelRequested), and the run ends cancelled on the kit\'s word', async () => {
    const message = dispatch({ mode: 'hold' });
    await t.send(JSON.stringify(message));
    const runId = `${message.dispatchId}:1`;
    await viewWhen(message.dispatchId, (view) => view.execution.status === 'running');

    const cancelled = await post(`/dispatches/${message.dispatchId}/cancel`, { reason: 'no longer needed' });
    expect(cancelled.status).toBe(202);
    // A Lambda cannot be called: the ledger records the request and the run learns it from its control record.
    const done = await viewWhen(message.dispatchId, (view) => view.execution.status === 'cancelled');
    expect(done.execution.cancelRequestedAt).not.toBeNull();
    expect(done.execution.cancel?.answer).toContain('control record');
    expect(aborts.get(runId)).toBeInstanceOf(RunCancelledError);
    expect((await store.get(runId))?.status).toBe('cancelled');
    expect(calls.get(runId)).toBe(1);
  });

  it('ends the invocation on requestApproval; the approval through the API re-invokes the function, which completes the run', async () => {
    const message = dispatch({ mode: 'approval' }, { expectedEvidence: ['out/report.md'] });
    await t.send(JSON.stringify(message));
    const runId = `${message.dispatchId}:1`;
    const waiting = await viewWhen(message.dispatchId, (view) => view.execution.status === 'waiting_for_approval' && view.execution.pendingApproval !== null);
    const approvalId = waiting.execution.pendingApproval?.approvalId ?? '';
    expect(await store.get(runId)).toMatchObject({ status: 'waiting_for_approval', pendingApproval: { approvalId } });
    await runtime.idle(); // the first invocation has ended, throwing nothing

    const decided = await post(`/dispatches/${message.dispatchId}/approval`, { approvalId, decision: 'approve' });
    expect(decided.status).toBe(200);
    const handled = await viewWhen(message.dispatchId, (view) => view.execution.status === 'completed' && view.evidence.outcome !== 'pending');
    expect(handled.execution.result?.summary).toBe('approved and published');
    expect(handled.evidence.outcome).toBe('handled');
    expect(deliveries.some((d) => typeof d.event === 'object' && d.event !== null && 'resume' in d.event && d.event.resume === runId)).toBe(true);
    expect(calls.get(runId)).toBe(2); // re-entered once, from the top
    const item = await store.get(runId);
    expect(item).toMatchObject({ status: 'completed', approvals: [{ approvalId, decision: 'approve' }] });
    expect(item?.pendingApproval).toBeUndefined();
  });
});
