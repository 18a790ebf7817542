import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createWorker, memoryStore, type Clock, type ListeningWorker, type RunFunction, type Transport } from '@dispatch-ledger/worker';
import { createLambdaWorker, memoryLambdaStore, type LambdaContextLike } from '@dispatch-ledger/worker/lambda';
import { stepFunctionsTask } from '@dispatch-ledger/worker/stepfunctions';
import { durableRun } from '@dispatch-ledger/worker/durable';
import { CallbackClient, DEFAULT_RETRY, fetchTransport, MAX_ANSWER_BYTES, retryPolicyOf } from '../../packages/worker/src/callbacks.js';
import { HeartbeatCoalescer, MAX_TIMER_MS, heartbeatIntervalMs, systemClock, timerDelayMs } from '../../packages/worker/src/heartbeat.js';
import { clipForMessage, MAX_QUOTED_CHARS } from '../../packages/worker/src/model.js';
import { MAX_TIMEOUT_SECONDS, parseSubmission } from '../../packages/worker/src/parse.js';
import { RunEngine } from '../../packages/worker/src/runs.js';
import { MAX_RESULT_BODY_DEPTH, resultOf } from '../../packages/worker/src/results.js';
import { MAX_API_BODY_DEPTH } from '../../shared/api/lifecycle-routes.js';
import { DispatchMessageSchema } from '../../shared/dispatch/message.js';
import { eventually } from '../support/eventually.js';

/**
 * Two bounds of the worker kit (review findings):
 * - A: a submission's `timeouts` above the ledger's own bound (30 days) are refused like any other
 *   invalid field, and no timer the kit sets can ask Node for more than 2^31-1 ms (a longer delay fires
 *   after 1 ms: a run calling heartbeat() in a loop would send one event per millisecond).
 * - B: untrusted text quoted in an error message (a path segment, a runId, a ledger's error code) is
 *   clipped, so every error text stays within the contract's 1 KB.
 */

const CALLBACK_URL = 'http://127.0.0.1:9';
const TIMEOUT_FIELDS = ['stallAfterSeconds', 'approvalWaitSeconds', 'deliveryGraceSeconds'] as const;
const MAX_ERROR_BYTES = 1024;
const bytes = (text: string): number => Buffer.byteLength(text, 'utf8');

const submissionFactory = (dispatchId: string, extra: Record<string, unknown> = {}) => ({ dispatchId, attempt: 1, origin: 'planner', task: {}, callbackUrl: CALLBACK_URL, ...extra });

/** Takes every callback. */
const ledgerStandIn: Transport = async (_url, init) => ({ status: init.method === 'PUT' ? 201 : 202, text: '{}' });

/** A clock whose timers never fire by themselves: it records the delay each was asked for. */
function recordingClock(): Clock & { readonly delays: number[] } {
  const delays: number[] = [];
  return { delays, now: () => 1_000_000, setTimer: (ms) => (delays.push(ms), { cancel: () => undefined }) };
}

function engineWith(run: RunFunction, options: { clock?: Clock; transport?: Transport } = {}): RunEngine {
  return new RunEngine({
    store: memoryStore(),
    log: () => undefined,
    run,
    ...(options.clock ? { clock: options.clock } : {}),
    callbacks: new CallbackClient({ log: () => undefined, stopSignal: new AbortController().signal, transport: options.transport ?? ledgerStandIn, retry: { budgetMs: 0, finalBudgetMs: 0 } }),
  });
}

describe('the worker kit: submission timeouts are bounded like the ledger bounds them (30 days)', () => {
  it('keeps its bound equal to the ledger message schema (shared/dispatch/message.ts MAX_SECONDS): the maximum is taken, one second more refused', () => {
    expect(MAX_TIMEOUT_SECONDS).toBe(30 * 24 * 3600);
    const message = (timeouts: Record<string, number>) => ({ dispatchId: 'd-1', origin: 'planner', target: 'demo-agent', task: {}, timeouts });
    for (const field of TIMEOUT_FIELDS) {
      expect(DispatchMessageSchema.safeParse(message({ [field]: MAX_TIMEOUT_SECONDS })).success, field).toBe(true);
      expect(DispatchMessageSchema.safeParse(message({ [field]: MAX_TIMEOUT_SECONDS + 1 })).success, field).toBe(false);
    }
  });

  it('parseSubmission refuses each timeout above the bound with a problem naming the field and the bound', () => {
    for (const field of TIMEOUT_FIELDS) {
      for (const seconds of [MAX_TIMEOUT_SECONDS + 1, 10_737_419, Number.MAX_SAFE_INTEGER, 1e300]) {
        const parsed = parseSubmission(submissionFactory('d-over', { timeouts: { [field]: seconds } }));
        expect(parsed, `${field} = ${seconds}`).toEqual({ ok: false, problem: `timeouts.${field}: at most ${MAX_TIMEOUT_SECONDS} seconds (30 days)` });
      }
    }
  });

  it('parseSubmission keeps timeouts at the bound exactly', () => {
    const timeouts = { stallAfterSeconds: MAX_TIMEOUT_SECONDS, approvalWaitSeconds: MAX_TIMEOUT_SECONDS, deliveryGraceSeconds: MAX_TIMEOUT_SECONDS };
    const parsed = parseSubmission(submissionFactory('d-max', { timeouts }));
    expect(parsed.ok && parsed.value.timeouts).toEqual(timeouts);
  });

  it('the engine refuses an over-bound stallAfterSeconds with 400 invalid_submission, and creates no run', async () => {
    let calls = 0;
    const engine = engineWith(async () => void (calls += 1));
    const outcome = await engine.submit('d-overflow:1', submissionFactory('d-overflow', { timeouts: { stallAfterSeconds: 10_737_419 } }));
    expect(outcome).toEqual({ kind: 'refused', httpStatus: 400, code: 'invalid_submission', message: `timeouts.stallAfterSeconds: at most ${MAX_TIMEOUT_SECONDS} seconds (30 days)` });
    expect(await engine.lookup('d-overflow:1')).toBeUndefined();
    expect(calls).toBe(0);
    await engine.close();
  });

  it('the engine runs a submission at the bound, and its heartbeat window (a fifth of 30 days) is asked of the clock unclamped', async () => {
    const clock = recordingClock();
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const decisions: string[] = [];
    const engine = engineWith(
      async (_task, ctx) => {
        decisions.push(ctx.heartbeat(), ctx.heartbeat());
        await released;
        return { summary: 'done' };
      },
      { clock },
    );
    const timeouts = { stallAfterSeconds: MAX_TIMEOUT_SECONDS, approvalWaitSeconds: MAX_TIMEOUT_SECONDS, deliveryGraceSeconds: MAX_TIMEOUT_SECONDS };
    expect(await engine.submit('d-max:1', submissionFactory('d-max', { timeouts }))).toEqual({ kind: 'created', run: { runId: 'd-max:1', status: 'queued' } });
    await eventually('the run called heartbeat()', () => (decisions.length === 2 ? decisions : undefined));
    // The start's heartbeat was sent; both calls fall in its window: one trailing heartbeat, 518 400 000 ms
    // on — asked of the clock at once, or once the start's heartbeat has arrived if it was still on its way.
    expect(['deferred', 'coalesced']).toContain(decisions[0]);
    expect(decisions[1]).toBe('coalesced');
    await eventually('the trailing heartbeat asked of the clock', () => (clock.delays.length > 0 ? clock.delays : undefined));
    expect(clock.delays).toEqual([518_400_000]);
    release();
    await eventually('the run completed', () => engine.lookup('d-max:1'), { until: (view) => view?.status === 'completed' });
    await engine.close();
  });

  it('POST /runs answers 400 invalid_submission for an over-bound timeout and 201 for one at the bound', async () => {
    const listening = await createWorker({ name: 'bounded-timeouts', run: async () => undefined, store: memoryStore(), transport: ledgerStandIn, log: () => undefined }).listen(0, '127.0.0.1');
    try {
      const post = async (dispatchId: string, timeouts: Record<string, number>) => {
        const response = await fetch(`${listening.url}/runs`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': `${dispatchId}:1` },
          body: JSON.stringify(submissionFactory(dispatchId, { timeouts })),
        });
        return { status: response.status, body: (await response.json()) as unknown };
      };
      expect(await post('d-http-over', { approvalWaitSeconds: MAX_TIMEOUT_SECONDS + 1 })).toEqual({
        status: 400,
        body: { error: { code: 'invalid_submission', message: `timeouts.approvalWaitSeconds: at most ${MAX_TIMEOUT_SECONDS} seconds (30 days)` } },
      });
      expect(await post('d-http-max', { stallAfterSeconds: MAX_TIMEOUT_SECONDS })).toMatchObject({ status: 201, body: { runId: 'd-http-max:1' } });
    } finally {
      await listening.close();
    }
  });

  it('the Lambda handler refuses an over-bound timeout as not a submission, and writes no item', async () => {
    const store = memoryLambdaStore();
    const lambda = createLambdaWorker({ name: 'bounded-lambda', run: async () => undefined, store, transport: ledgerStandIn, log: () => undefined });
    const context: LambdaContextLike = { awsRequestId: 'req-1', getRemainingTimeInMillis: () => 60_000 };
    await expect(lambda({ ...submissionFactory('d-lambda-over', { timeouts: { stallAfterSeconds: 10_737_419 } }), runId: 'd-lambda-over:1' }, context)).rejects.toThrow(
      `not a Dispatch Ledger submission: timeouts.stallAfterSeconds: at most ${MAX_TIMEOUT_SECONDS} seconds (30 days)`,
    );
    expect(await store.get('d-lambda-over:1')).toBeUndefined();
  });
});

describe('the worker kit: a result body the ledger would refuse for its depth fails the run, said why', () => {
  /** `levels` nested arrays around a leaf (the outermost is level 1), built without recursion. */
  const nested = (levels: number): unknown => {
    let value: unknown = 1;
    for (let level = 0; level < levels; level += 1) value = [value];
    return value;
  };

  it('holds result.body to the depth the ledger takes: its API body bound, less the two levels of the event around the body', () => {
    expect(MAX_RESULT_BODY_DEPTH).toBe(MAX_API_BODY_DEPTH - 2);
  });

  it('takes a body of exactly that depth and refuses one level more as result_too_deep (was: sent, refused 422 and dropped, the origin got no body)', () => {
    expect(resultOf({ summary: 'deep', body: nested(MAX_RESULT_BODY_DEPTH) }).ok).toBe(true);
    const refused = resultOf({ summary: 'deeper', body: nested(MAX_RESULT_BODY_DEPTH + 1) });
    expect(refused.ok).toBe(false);
    expect(refused.ok ? '' : refused.error.message).toContain('result_too_deep');
    // Far deeper than JSON.stringify can write: refused the same way, not a stack overflow.
    const deepest = resultOf({ summary: 'deepest', body: nested(50_000) });
    expect(deepest.ok ? '' : deepest.error.message).toContain('result_too_deep');
  });
});

describe('the worker kit: a submission\'s expected refs are held to the rule the ledger applies at intake (CONTRACT §6)', () => {
  const submission = (expectedEvidence: unknown) => ({ dispatchId: 'd-1', attempt: 1, origin: 'planner', task: {}, expectedEvidence, callbackUrl: 'http://127.0.0.1:9/' });

  it.each([
    ['a dot segment', ['out/../secret']],
    ['an absolute path', ['/etc/passwd']],
    ['a ref over 512 bytes', ['x'.repeat(10_000)]],
  ])('refuses %s, naming the ref by its index only (was: taken as sent)', (_name, refs) => {
    const parsed = parseSubmission(submission(refs));
    expect(parsed.ok).toBe(false);
    expect(parsed.ok ? '' : parsed.problem).toMatch(/^expectedEvidence\[0\]: not a safe ref \(\w+\)$/);
  });

  it('takes safe refs as sent', () => {
    const parsed = parseSubmission(submission(['out/report.md', 'logs/run 1.txt']));
    expect(parsed.ok ? parsed.value.expectedEvidence : []).toEqual(['out/report.md', 'logs/run 1.txt']);
  });
});

describe('the worker kit: no timer asks Node for more than 2^31-1 ms', () => {
  it('timerDelayMs clamps a delay into 0..2^31-1', () => {
    expect(MAX_TIMER_MS).toBe(2 ** 31 - 1);
    expect(timerDelayMs(120_000)).toBe(120_000);
    expect(timerDelayMs(MAX_TIMER_MS)).toBe(MAX_TIMER_MS);
    expect(timerDelayMs(MAX_TIMER_MS + 1)).toBe(MAX_TIMER_MS);
    expect(timerDelayMs(10_737_419 * 1000)).toBe(MAX_TIMER_MS);
    expect(timerDelayMs(Number.POSITIVE_INFINITY)).toBe(MAX_TIMER_MS);
    expect(timerDelayMs(-5)).toBe(0);
    expect(timerDelayMs(Number.NaN)).toBe(0);
  });

  it('heartbeatIntervalMs never exceeds the timer bound (a stall hint of any size)', () => {
    expect(heartbeatIntervalMs(MAX_TIMEOUT_SECONDS)).toBe(518_400_000);
    expect(heartbeatIntervalMs(10_737_419)).toBe(MAX_TIMER_MS);
    expect(heartbeatIntervalMs(1e12)).toBe(MAX_TIMER_MS);
  });

  it('the coalescer asks its clock for a trailing timer of at most 2^31-1 ms, whatever its window', () => {
    const clock = recordingClock();
    const coalescer = new HeartbeatCoalescer(1e12, () => undefined, clock);
    expect(coalescer.request()).toBe('sent');
    expect(coalescer.request()).toBe('deferred');
    expect(clock.delays).toEqual([MAX_TIMER_MS]);
  });

  it('the system clock hands setTimeout at most 2^31-1 ms', () => {
    const spy = vi.spyOn(globalThis, 'setTimeout');
    try {
      const timer = systemClock.setTimer(1e12, () => undefined);
      timer.cancel();
      expect(spy).toHaveBeenCalledTimes(1);
      expect(spy.mock.calls[0]?.[1]).toBe(MAX_TIMER_MS);
    } finally {
      spy.mockRestore();
    }
  });

  it('a callback pause is clamped, and a try timeout above 2^32 ms is asked of Node as 2^31-1 ms (unclamped, Node fires it after 1 ms and aborts every try)', async () => {
    const pauses: number[] = [];
    let tries = 0;
    const stop = new AbortController();
    // The delay each try's timeout signal is made with: what Node's timer is asked for.
    const timeouts = vi.spyOn(AbortSignal, 'timeout');
    try {
      const client = new CallbackClient({
        log: () => undefined,
        stopSignal: stop.signal,
        retry: { budgetMs: 1e15, finalBudgetMs: 1e15, firstPauseMs: 1e13, maxPauseMs: 1e13, tryTimeoutMs: 2 ** 32 },
        // Three pauses at most: past that, the callback ends as stopped (a sleep that never waits must not spin).
        sleep: async (ms) => {
          pauses.push(ms);
          if (pauses.length >= 3) throw new Error('enough');
        },
        transport: async () => ((tries += 1) === 1 ? { status: 503, text: '{}' } : { status: 202, text: '{}' }),
      });
      const outcome = await client.postEvent(CALLBACK_URL, 'd-1:1', { dispatchId: 'd-1', seq: 1, type: 'heartbeat' });
      expect(outcome).toMatchObject({ kind: 'delivered', tries: 2 });
      expect(pauses).toEqual([MAX_TIMER_MS]);
      expect(timeouts.mock.calls.map(([ms]) => ms)).toEqual([MAX_TIMER_MS, MAX_TIMER_MS]);
    } finally {
      timeouts.mockRestore();
    }
  });
});

describe('the worker kit: untrusted text in error messages is clipped (CONTRACT: error texts ≤ 1 KB)', () => {
  const LONG = 'a'.repeat(10_000);
  const CLIPPED = `${'a'.repeat(MAX_QUOTED_CHARS)}… (10000 chars)`;

  it('clipForMessage keeps short text, and cuts long text to 128 characters with an ellipsis and the original length', () => {
    expect(MAX_QUOTED_CHARS).toBe(128);
    expect(clipForMessage('d-1:1')).toBe('d-1:1');
    expect(clipForMessage('b'.repeat(128))).toBe('b'.repeat(128));
    expect(clipForMessage('b'.repeat(129))).toBe(`${'b'.repeat(128)}… (129 chars)`);
    expect(clipForMessage(LONG)).toBe(CLIPPED);
    // A surrogate pair at the cut is dropped whole, never halved.
    const emoji = `${'c'.repeat(127)}😀${'c'.repeat(10)}`;
    expect(clipForMessage(emoji)).toBe(`${'c'.repeat(127)}… (139 chars)`);
  });

  describe('over HTTP', () => {
    let listening: ListeningWorker | undefined;
    afterEach(async () => {
      await listening?.close();
      listening = undefined;
    });

    async function request(path: string, init: RequestInit = {}): Promise<{ status: number; code: unknown; message: string }> {
      listening ??= await createWorker({ name: 'bounded-errors', run: async () => undefined, store: memoryStore(), transport: ledgerStandIn, log: () => undefined }).listen(0, '127.0.0.1');
      const response = await fetch(`${listening.url}${path}`, init);
      const body = (await response.json()) as { error: { code: unknown; message: unknown } };
      expect(bytes(JSON.stringify(body))).toBeLessThanOrEqual(MAX_ERROR_BYTES);
      return { status: response.status, code: body.error.code, message: String(body.error.message) };
    }

    it('GET /runs/{runId} of an unknown long runId: 404 run_not_found, the runId clipped', async () => {
      expect(await request(`/runs/${LONG}`)).toEqual({ status: 404, code: 'run_not_found', message: `no run ${CLIPPED}` });
      expect(await request('/runs/d-none:1')).toEqual({ status: 404, code: 'run_not_found', message: 'no run d-none:1' });
    });

    it('POST /runs/{runId}/cancel and /approval of an unknown long runId: 404 run_not_found, the runId clipped', async () => {
      expect(await request(`/runs/${LONG}/cancel`, { method: 'POST' })).toEqual({ status: 404, code: 'run_not_found', message: `no run ${CLIPPED}` });
      const decision = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ approvalId: 'a-1', decision: 'approve' }) };
      expect(await request(`/runs/${LONG}/approval`, decision)).toEqual({ status: 404, code: 'run_not_found', message: `no run ${CLIPPED}` });
    });

    it('an unknown long path: 404 not_found, the path clipped', async () => {
      expect(await request(`/${LONG}`)).toEqual({ status: 404, code: 'not_found', message: `no route for GET /${'a'.repeat(MAX_QUOTED_CHARS - 1)}… (10001 chars)` });
      expect(await request('/nowhere')).toEqual({ status: 404, code: 'not_found', message: 'no route for GET /nowhere' });
    });
  });

  it('the engine clips the runId of an unknown run in cancel and decide', async () => {
    const engine = engineWith(async () => undefined);
    expect(await engine.cancel(LONG)).toEqual({ kind: 'refused', httpStatus: 404, code: 'run_not_found', message: `no run ${CLIPPED}` });
    expect(await engine.decide(LONG, { approvalId: 'a-1', decision: 'approve' })).toEqual({ kind: 'refused', httpStatus: 404, code: 'run_not_found', message: `no run ${CLIPPED}` });
    await engine.close();
  });

  it('a ledger error code quoted in a callback error is clipped (refused, and given up on)', async () => {
    const code = 'x'.repeat(10_000);
    const messages: string[] = [];
    const transport: Transport = async (_url, init) => {
      if (init.method === 'PUT') return { status: 400, text: JSON.stringify({ error: { code, message: 'no' } }) };
      return { status: 202, text: '{}' };
    };
    const engine = engineWith(
      async (_task, ctx) => {
        await ctx.putEvidence('out/a.md', 'a').catch((error: unknown) => void messages.push(error instanceof Error ? error.message : String(error)));
        return { summary: 'done' };
      },
      { transport },
    );
    await engine.submit('d-code:1', submissionFactory('d-code'));
    await eventually('the run completed', () => engine.lookup('d-code:1'), { until: (view) => view?.status === 'completed' });
    expect(messages).toEqual([`uploading out/a.md: the ledger refused it (HTTP 400 ${'x'.repeat(MAX_QUOTED_CHARS)}… (10000 chars))`]);
    await engine.close();

    const client = new CallbackClient({
      log: () => undefined,
      stopSignal: new AbortController().signal,
      retry: { budgetMs: 0 },
      transport: async () => ({ status: 503, text: JSON.stringify({ error: { code } }) }),
    });
    const outcome = await client.postEvent(CALLBACK_URL, 'd-1:1', { dispatchId: 'd-1', seq: 1, type: 'heartbeat' });
    expect(outcome).toEqual({ kind: 'gave_up', last: `HTTP 503 ${'x'.repeat(MAX_QUOTED_CHARS)}… (10000 chars)`, tries: 1 });
  });
});

describe('the worker kit: a retry policy is checked where the worker is made', () => {
  // Regression (a review of the kit): `retry` was spread over the defaults unchecked. `{ budgetMs: undefined }`
  // (an unset config value) made the give-up time NaN, never reached: a callback retried forever, past a
  // Lambda invocation's end too; a pause of 0 or undefined retried without pausing.
  const run: RunFunction = async () => undefined;
  const makers = [
    ['createWorker', (retry: object) => createWorker({ name: 'w', run, store: memoryStore(), retry })],
    ['createLambdaWorker', (retry: object) => createLambdaWorker({ name: 'w', run, store: memoryLambdaStore(), retry })],
    ['stepFunctionsTask', (retry: object) => stepFunctionsTask(async () => undefined, { name: 'w', store: memoryLambdaStore(), retry })],
    ['durableRun', (retry: object) => durableRun(async () => undefined, { name: 'w', retry })],
  ] as const;

  it('reads a field given as undefined as its default', () => {
    expect(retryPolicyOf({ budgetMs: undefined, firstPauseMs: 20 })).toEqual({ ...DEFAULT_RETRY, firstPauseMs: 20 });
    for (const [name, make] of makers) expect(() => make({ budgetMs: undefined }), name).not.toThrow();
  });

  it('refuses a budget that is no number of milliseconds, a pause or a try timeout of 0, and a field that is no retry option, naming it', () => {
    const refused: Array<[object, RegExp]> = [
      [{ budgetMs: Number.NaN }, /retry\.budgetMs must be a number of milliseconds ≥ 0, got NaN/],
      [{ finalBudgetMs: -1 }, /retry\.finalBudgetMs must be a number of milliseconds ≥ 0, got -1/],
      [{ firstPauseMs: 0 }, /retry\.firstPauseMs must be a number of milliseconds ≥ 1, got 0/],
      [{ maxPauseMs: Number.POSITIVE_INFINITY }, /retry\.maxPauseMs must be a number of milliseconds ≥ 1, got Infinity/],
      [{ tryTimeoutMs: '5000' }, /retry\.tryTimeoutMs must be a number of milliseconds ≥ 1, got 5000/],
      [{ budget: 1_000 }, /retry\.budget is no retry option/],
    ];
    for (const [retry, message] of refused) {
      expect(() => retryPolicyOf(retry), JSON.stringify(retry)).toThrow(message);
      for (const [name, make] of makers) expect(() => make(retry), `${name} ${JSON.stringify(retry)}`).toThrow(message);
    }
  });
});

describe('the worker kit: an answer a callback reads is bounded', () => {
  // Regression (a review of the kit): fetchTransport read any answer whole (`response.text()`): a proxy's
  // page of any size, in memory, for each try.
  it('reads an answer up to MAX_ANSWER_BYTES, refuses a larger one without holding it, declared or streamed, and keeps the start of a large error page', async () => {
    const big = 'x'.repeat(MAX_ANSWER_BYTES + 1);
    const server = createServer((request, response) => {
      if (request.url?.includes('refused')) {
        response.writeHead(403, { 'content-length': String(Buffer.byteLength(big) + 31) });
        response.end(`{"error":{"code":"forbidden"}}${' '.repeat(1)}${big}`);
        return;
      }
      if (request.url?.includes('declared')) response.writeHead(200, { 'content-length': String(Buffer.byteLength(big)) });
      else response.writeHead(200, { 'transfer-encoding': 'chunked' });
      response.end(request.url?.includes('fits') ? 'x'.repeat(MAX_ANSWER_BYTES) : big);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const read = (path: string) => fetchTransport(`${base}/${path}`, { method: 'GET', headers: {}, signal: AbortSignal.timeout(10_000) });
    try {
      expect((await read('fits')).text.length).toBe(MAX_ANSWER_BYTES);
      await expect(read('declared')).rejects.toThrow(`an answer of ${MAX_ANSWER_BYTES + 1} bytes or more: over the ${MAX_ANSWER_BYTES} a callback reads`);
      await expect(read('streamed')).rejects.toThrow(/bytes or more: over the 2097152 a callback reads/);
      // A large refusal page is still the refusal it is (its start kept), not a failed try to repeat for the budget.
      const refused = await read('refused');
      expect(refused.status).toBe(403);
      expect(refused.text.startsWith('{"error":{"code":"forbidden"')).toBe(true);
      expect(Buffer.byteLength(refused.text)).toBeLessThanOrEqual(64 * 1024);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
