import { afterEach, describe, expect, it } from 'vitest';
import { createWorker, memoryStore, type ListeningWorker, type RunFunction, type Transport } from '@dispatch-ledger/worker';
import { createLambdaWorker, memoryLambdaStore, type LambdaContextLike, type LambdaRunStore } from '@dispatch-ledger/worker/lambda';
import { eventually } from '../support/eventually.js';

// The worker kit hands the dispatch message's trace context (CONTRACT §1 v2) to `run` as
// ctx.traceparent: from the `traceparent` header of POST /runs, and from the payload of a Lambda invoke.
// The ledger is a stand-in transport that takes every callback; the HTTP side listens on 127.0.0.1.

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const CALLBACK_URL = 'http://127.0.0.1:9';

/** What `run` saw in ctx.traceparent, per dispatchId (`'absent'` when the property was missing, not just undefined). */
function recordingRun(): { readonly seen: Map<string, string | undefined>; readonly run: RunFunction } {
  const seen = new Map<string, string | undefined>();
  return {
    seen,
    run: async (task, ctx) => {
      seen.set(ctx.dispatchId, 'traceparent' in ctx ? ctx.traceparent : 'absent');
      if (task['mode'] === 'approval' && (await ctx.requestApproval('go on?')) !== 'approve') throw new Error('not approved');
      return { summary: 'done' };
    },
  };
}

/** Takes every event and upload; answers the spilled-task read with the task the test set. */
function ledgerStandIn(task: Record<string, unknown> = {}): Transport {
  return async (url, init) => {
    if (init.method === 'GET' && url.includes('/task?runId=')) return { status: 200, text: JSON.stringify(task) };
    if (init.method === 'GET') return { status: 200, text: '{}' };
    return { status: init.method === 'PUT' ? 201 : 202, text: '{}' };
  };
}

const submissionFactory = (dispatchId: string, extra: Record<string, unknown> = {}) => ({ dispatchId, attempt: 1, origin: 'planner', task: {}, expectedEvidence: [], callbackUrl: CALLBACK_URL, ...extra });

describe('createWorker().listen: ctx.traceparent', () => {
  let listening: ListeningWorker | undefined;
  afterEach(async () => {
    await listening?.close();
    listening = undefined;
  });

  async function post(dispatchId: string, headers: Record<string, string>, extra: Record<string, unknown> = {}): Promise<number> {
    if (!listening) throw new Error('not listening');
    const response = await fetch(`${listening.url}/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': `${dispatchId}:1`, ...headers },
      body: JSON.stringify(submissionFactory(dispatchId, extra)),
    });
    await response.text();
    return response.status;
  }

  it('is the traceparent header of POST /runs, undefined without one or with a malformed one (the run still runs)', async () => {
    const { seen, run } = recordingRun();
    listening = await createWorker({ name: 'traced-http', run, store: memoryStore(), transport: ledgerStandIn(), log: () => undefined }).listen(0, '127.0.0.1');

    expect(await post('d-header', { traceparent: TRACEPARENT })).toBe(201);
    expect(await post('d-none', {})).toBe(201);
    expect(await post('d-malformed', { traceparent: 'ff-not-a-trace' })).toBe(201);
    // Over HTTP the header is the channel: a body field of that name is not taken for it.
    expect(await post('d-body-only', {}, { traceparent: TRACEPARENT })).toBe(201);

    await eventually('every run started', () => (seen.size === 4 ? seen : undefined));
    expect(Object.fromEntries(seen)).toEqual({ 'd-header': TRACEPARENT, 'd-none': undefined, 'd-malformed': undefined, 'd-body-only': undefined });
  });
});

describe('createLambdaWorker(): ctx.traceparent', () => {
  let invocations = 0;
  const context = (): LambdaContextLike => ({ awsRequestId: `req-${++invocations}`, getRemainingTimeInMillis: () => 60_000 });

  function lambdaWorker(task: Record<string, unknown> = {}): { readonly seen: Map<string, string | undefined>; readonly store: LambdaRunStore; readonly handler: (event: unknown) => Promise<void> } {
    const { seen, run } = recordingRun();
    const store = memoryLambdaStore();
    const lambda = createLambdaWorker({ name: 'traced-lambda', run, store, transport: ledgerStandIn(task), log: () => undefined });
    return { seen, store, handler: (event) => lambda(event, context()) };
  }

  it('is the payload field traceparent, undefined without one or with a malformed one', async () => {
    const { seen, handler } = lambdaWorker();
    await handler({ ...submissionFactory('d-payload', { traceparent: TRACEPARENT }), runId: 'd-payload:1' });
    await handler({ ...submissionFactory('d-none'), runId: 'd-none:1' });
    await handler({ ...submissionFactory('d-malformed', { traceparent: `${TRACEPARENT}\n` }), runId: 'd-malformed:1' });
    expect(Object.fromEntries(seen)).toEqual({ 'd-payload': TRACEPARENT, 'd-none': undefined, 'd-malformed': undefined });
  });

  it('is the same in the invocation that resumes the run after an approval (the resume event carries none)', async () => {
    const task = { mode: 'approval' };
    const { seen, store, handler } = lambdaWorker(task);
    await handler({ ...submissionFactory('d-resumed', { task, traceparent: TRACEPARENT }), runId: 'd-resumed:1' });
    const waiting = await store.get('d-resumed:1');
    expect(waiting).toMatchObject({ status: 'waiting_for_approval', traceparent: TRACEPARENT });
    seen.clear();

    await handler({ resume: 'd-resumed:1', approvalId: waiting?.pendingApproval?.approvalId, decision: 'approve' });
    expect(seen.get('d-resumed')).toBe(TRACEPARENT);
    expect(await store.get('d-resumed:1')).toMatchObject({ status: 'completed' });
  });
});
