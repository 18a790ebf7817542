import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startDemoAgent, type DemoAgent } from '../../local/demo-agent/server.js';
import { httpTarget, type HttpTargetOptions } from '../../shared/adapters/http-target.js';
import type { SubmitRequest, TargetPort } from '../../shared/targets/port.js';
import type { LookupOutcome } from '../../shared/dispatch/target-answers.js';
import { eventually } from '../support/eventually.js';
import { closedUrl, json, startStub, type Stub } from '../support/stub-target.js';

// The http target adapter (CONTRACT §8) against the real demo agent for the protocol, and against a
// tiny stub server for what a real target rarely does on demand: hang, babble, overflow, vanish.
// Everything listens on 127.0.0.1.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const SECRET = 'Bearer s3cr3t-t0ken-value';

let sequence = 0;
let callbackUrl: string;

beforeEach(async () => {
  // The agent's callbacks fail against this address, which is fine: the adapter is under test.
  callbackUrl = await closedUrl();
});

function submitRequestFactory(overrides: Partial<SubmitRequest> = {}): SubmitRequest {
  return {
    dispatchId: `d-http:${process.pid}.${++sequence}`,
    attempt: 1,
    origin: 'planner',
    task: { goal: 'summarise the incident', behavior: 'complete' },
    expectedEvidence: ['out/report.md'],
    callbackUrl,
    ...overrides,
  };
}

/** Request ids the adapter sends, in order, so a test can name the one it expects back. */
function requestIds(): { readonly sent: string[]; readonly next: () => string } {
  const sent: string[] = [];
  return {
    sent,
    next: () => {
      const id = `req-test-${process.pid}-${++sequence}`;
      sent.push(id);
      return id;
    },
  };
}

describe('httpTarget against the demo agent', () => {
  let agent: DemoAgent;
  let target: TargetPort;

  beforeEach(async () => {
    // The callback URL in these tests is closed on purpose: give callbacks up at once.
    agent = await startDemoAgent({ callbackTries: 1 });
    target = httpTarget({ name: 'demo-agent', kind: 'http', baseUrl: `${agent.url}/` });
  });

  afterEach(async () => {
    await agent.stop();
  });

  async function acceptedRunId(request: SubmitRequest): Promise<string> {
    const outcome = await target.submit(request);
    if (outcome.kind !== 'accepted') throw new Error(`expected accepted, got ${JSON.stringify(outcome)}`);
    return outcome.runId;
  }

  function untilFound(runId: string, accept: (outcome: Extract<LookupOutcome, { kind: 'found' }>) => boolean) {
    return eventually(`run ${runId} to be seen as wanted`, async () => {
      const outcome = await target.lookup(runId);
      return outcome.kind === 'found' && accept(outcome) ? outcome : undefined;
    }, { timeoutMs: 3_000, intervalMs: 10 });
  }

  describe('submit', () => {
    it('is accepted with the runId and, as proof, the request id it sent', async () => {
      const ids = requestIds();
      const withIds = httpTarget({ name: 'demo-agent', kind: 'http', baseUrl: agent.url }, { newRequestId: ids.next });

      const request = submitRequestFactory();
      const outcome = await withIds.submit(request);

      // The demo agent is a worker-kit worker: its run id is `{dispatchId}:{attempt}` (CONTRACT §12).
      expect(outcome).toEqual({ kind: 'accepted', runId: `${request.dispatchId}:${request.attempt}`, status: 'queued', requestId: ids.sent[0] });
    });

    it('sends a fresh UUID request id by default', async () => {
      const outcome = await target.submit(submitRequestFactory());
      expect(outcome.kind === 'accepted' && outcome.requestId).toMatch(UUID);
    });

    it('gets the same run for the same dispatch attempt twice', async () => {
      const request = submitRequestFactory();
      const first = await acceptedRunId(request);
      const second = await acceptedRunId(request);

      expect(second).toBe(first);
      expect(agent.stats()).toMatchObject({
        submissions: { [request.dispatchId]: 2 },
        runs: { [request.dispatchId]: 1 },
        attempts: { [`${request.dispatchId}:${request.attempt}`]: { submissions: 2, runs: 1 } },
      });
    });

    it('is rejected with 422 and the target message when the target refuses the task (reject)', async () => {
      const outcome = await target.submit(submitRequestFactory({ task: { behavior: 'reject' } }));
      expect(outcome).toEqual({
        kind: 'rejected',
        httpStatus: 422,
        reason: 'the demo agent rejects this task (behavior: reject)',
      });
    });

    it('is unavailable on a 503 and accepted on the retry (flaky_submit)', async () => {
      const request = submitRequestFactory({ task: { behavior: 'flaky_submit' } });

      const first = await target.submit(request);
      expect(first).toEqual({ kind: 'unavailable', reason: expect.stringMatching(/^HTTP 503: first submission refused/) });
      const second = await target.submit(request);
      expect(second.kind).toBe('accepted');
      expect(agent.stats().runs[request.dispatchId]).toBe(1);
    });
  });

  describe('lookup', () => {
    it('finds a completed run with its result and evidence', async () => {
      const runId = await acceptedRunId(submitRequestFactory());

      const found = await untilFound(runId, (o) => o.run.status === 'completed');
      // The callback URL is closed, so the upload never arrived: the worker kit claims only what did.
      expect(found.run).toEqual({
        runId,
        status: 'completed',
        result: { summary: 'Completed: summarise the incident' },
      });
    });

    it('is not_found when the target forgets the run after accepting it (vanish)', async () => {
      const runId = await acceptedRunId(submitRequestFactory({ task: { behavior: 'vanish' } }));
      expect(await target.lookup(runId)).toEqual({ kind: 'not_found' });
    });

    it('is unavailable when the status endpoint answers 503 (lookup_unavailable)', async () => {
      const runId = await acceptedRunId(submitRequestFactory({ task: { behavior: 'lookup_unavailable' } }));
      expect(await target.lookup(runId)).toEqual({
        kind: 'unavailable',
        reason: 'HTTP 503: the status endpoint is down on purpose (behavior: lookup_unavailable)',
      });
    });
  });

  describe('decideApproval (await_approval)', () => {
    async function waitingRun(): Promise<{ runId: string; approvalId: string }> {
      const runId = await acceptedRunId(submitRequestFactory({ task: { behavior: 'await_approval' } }));
      const found = await untilFound(runId, (o) => o.run.status === 'waiting_for_approval');
      expect(found.run.pendingApproval?.requestedAt).toEqual(expect.any(String));
      return { runId, approvalId: found.run.pendingApproval?.approvalId ?? '' };
    }

    it('is decided for the pending approval, and the run goes on', async () => {
      const { runId, approvalId } = await waitingRun();

      expect(await target.decideApproval(runId, approvalId, 'approve')).toEqual({ kind: 'decided', approvalId, decision: 'approve' });
      await untilFound(runId, (o) => o.run.status === 'completed');
    });

    it('is a conflict for an approvalId that is not the pending one', async () => {
      const { runId } = await waitingRun();

      expect(await target.decideApproval(runId, 'a-wrong', 'approve')).toEqual({
        kind: 'conflict',
        reason: `approval a-wrong is not pending on run ${runId}`,
      });
    });

    it('is not_found for a run the target does not know', async () => {
      expect(await target.decideApproval('r-unknown', 'a-1', 'cancel')).toEqual({ kind: 'not_found' });
    });
  });

  describe('cancel', () => {
    it('cancels an active run, and reports a finished run as it ended', async () => {
      const stalled = await acceptedRunId(submitRequestFactory({ task: { behavior: 'stall' } }));
      expect(await target.cancel(stalled)).toEqual({ kind: 'cancelled', status: 'cancelled' });

      const done = await acceptedRunId(submitRequestFactory());
      await untilFound(done, (o) => o.run.status === 'completed');
      expect(await target.cancel(done)).toEqual({ kind: 'cancelled', status: 'completed' });
    });

    it('is not_found for a run the target does not know', async () => {
      expect(await target.cancel('r-unknown')).toEqual({ kind: 'not_found' });
    });
  });
});

// --- Edge cases, on a stub target ---------------------------------------------------------------------

describe('httpTarget edge cases', () => {
  let stub: Stub;

  beforeEach(async () => {
    stub = await startStub();
  });

  afterEach(async () => {
    await stub.close();
  });

  function stubTarget(options: HttpTargetOptions = {}, path = '/'): TargetPort {
    return httpTarget({ name: 'stub', kind: 'http', baseUrl: `${stub.url}${path}` }, options);
  }

  it('sends the contract headers and body under the base path, trailing slash or not', async () => {
    stub.answer((_request, res) => json(res, 201, { runId: 'r-1', status: 'running', extra: 'ignored' }));
    const ids = requestIds();
    const request = submitRequestFactory({ attempt: 3, timeouts: { stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 } });

    const withSlash = await stubTarget({ newRequestId: ids.next, authHeader: async () => SECRET }, '/agent/v1//').submit(request);
    await stubTarget({}, '/agent/v1').lookup('r-1/x y');

    expect(withSlash).toEqual({ kind: 'accepted', runId: 'r-1', status: 'running', requestId: ids.sent[0] });
    const [submitted, lookedUp] = stub.requests;
    expect(submitted).toMatchObject({
      method: 'POST',
      path: '/agent/v1/runs',
      headers: {
        'content-type': 'application/json',
        'idempotency-key': `${request.dispatchId}:3`,
        'x-request-id': ids.sent[0],
        authorization: SECRET,
      },
    });
    expect(JSON.parse(submitted?.body ?? '')).toEqual({
      dispatchId: request.dispatchId,
      attempt: 3,
      origin: 'planner',
      task: request.task,
      expectedEvidence: request.expectedEvidence,
      callbackUrl: request.callbackUrl,
      // CONTRACT §8 v2: the dispatch's clocks travel with the submission.
      timeouts: { stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 },
    });
    expect(lookedUp).toMatchObject({ method: 'GET', path: '/agent/v1/runs/r-1%2Fx%20y' });
    expect(lookedUp?.headers.authorization).toBeUndefined();
  });

  it("takes the target's own well-formed x-request-id as the proof, and ignores a malformed one", async () => {
    stub.answer((_request, res) => json(res, 200, { runId: 'r-1', status: 'queued' }, { 'x-request-id': 'target-req-9' }));
    expect(await stubTarget().submit(submitRequestFactory())).toMatchObject({ kind: 'accepted', requestId: 'target-req-9' });

    stub.answer((_request, res) => json(res, 200, { runId: 'r-1', status: 'queued' }, { 'x-request-id': 'x'.repeat(200) }));
    const ids = requestIds();
    expect(await stubTarget({ newRequestId: ids.next }).submit(submitRequestFactory())).toMatchObject({ requestId: ids.sent[0] });
  });

  it('is unavailable when the target does not answer within timeoutMs, and drops the connection itself', async () => {
    // Seen at the target, not timed (it had asserted "within 2 s" of the call): the one request stays
    // unanswered, and its connection is closed from the adapter's side while the target still holds it.
    let droppedByAdapter = 0;
    stub.answer((_request, res) => {
      res.on('close', () => {
        if (!res.writableEnded) droppedByAdapter += 1;
      });
    }); // never answers

    // 1 s, not 100 ms: the stub must have read the whole request before the adapter gives up, or its
    // handler (which counts the drop) never runs — a pause of this busy process could outlast 100 ms.
    expect(await stubTarget({ timeoutMs: 1_000 }).submit(submitRequestFactory())).toEqual({
      kind: 'unavailable',
      reason: 'no answer within 1000 ms',
    });
    await eventually('the adapter to drop the unanswered connection', () => droppedByAdapter || undefined);
    expect(droppedByAdapter).toBe(1);
    expect(stub.requests).toHaveLength(1);
  });

  it('is unavailable when the answer body stalls past timeoutMs', async () => {
    stub.answer((_request, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"runId":"r-1",');
    });

    // The headers must arrive before the timeout for this reason: 1 s leaves a busy process room.
    expect(await stubTarget({ timeoutMs: 1_000 }).lookup('r-1')).toEqual({
      kind: 'unavailable',
      reason: 'HTTP 200: answer body unreadable: no answer within 1000 ms',
    });
  });

  it('is unavailable when a 2xx body is not a valid answer', async () => {
    const target = stubTarget();
    for (const body of ['not json', { runId: '', status: 'queued' }, { runId: 'r-1', status: 'done' }, { runId: '..', status: 'queued' }]) {
      stub.answer((_request, res) => json(res, 200, body));
      expect(await target.submit(submitRequestFactory())).toEqual({
        kind: 'unavailable',
        reason: 'HTTP 200: answer body is not a valid { runId, status }',
      });
    }
    stub.answer((_request, res) => json(res, 200, { runId: 'r-other', status: 'running' }));
    expect(await target.lookup('r-1')).toEqual({ kind: 'unavailable', reason: 'the target answered for another run' });
    stub.answer((_request, res) => json(res, 200, { runId: 'r-1', status: 'completed', evidence: Array.from({ length: 33 }, (_, i) => `f${i}`) }));
    expect(await target.lookup('r-1')).toEqual({ kind: 'unavailable', reason: 'HTTP 200: answer body is not a valid run view' });
  });

  it('is unavailable when a 2xx body is over 64 KB, valid JSON or not', async () => {
    const huge = { runId: 'r-1', status: 'queued', padding: 'x'.repeat(70 * 1024) };
    stub.answer((_request, res) => json(res, 200, huge));
    const reason = `HTTP 200: answer body over ${64 * 1024} bytes, not read`;

    expect(await stubTarget().submit(submitRequestFactory())).toEqual({ kind: 'unavailable', reason });
    expect(await stubTarget().lookup('r-1')).toEqual({ kind: 'unavailable', reason });
  });

  it('bounds the summary to 1,000 characters and reads null as absent', async () => {
    stub.answer((_request, res) =>
      json(res, 200, { runId: 'r-1', status: 'completed', result: { summary: 's'.repeat(5_000) }, evidence: null, pendingApproval: null }),
    );

    expect(await stubTarget().lookup('r-1')).toEqual({
      kind: 'found',
      run: { runId: 'r-1', status: 'completed', result: { summary: 's'.repeat(1_000) } },
    });
  });

  it("reads a final run's result body as JSON text, and no body of a run not over (regression: the lookup kept the summary alone, so a lost final event lost the body)", async () => {
    stub.answer((_request, res) => json(res, 200, { runId: 'r-1', status: 'completed', result: { summary: 'done', body: { verdict: 'ok', scores: [1, 2] } } }));
    expect(await stubTarget().lookup('r-1')).toEqual({ kind: 'found', run: { runId: 'r-1', status: 'completed', result: { summary: 'done', bodyJson: '{"verdict":"ok","scores":[1,2]}' } } });
    stub.answer((_request, res) => json(res, 200, { runId: 'r-1', status: 'failed', result: { body: null } }));
    expect(await stubTarget().lookup('r-1')).toEqual({ kind: 'found', run: { runId: 'r-1', status: 'failed', result: { bodyJson: 'null' } } });
    stub.answer((_request, res) => json(res, 200, { runId: 'r-1', status: 'running', result: { summary: 'half way', body: { early: true } } }));
    expect(await stubTarget().lookup('r-1')).toEqual({ kind: 'found', run: { runId: 'r-1', status: 'running', result: { summary: 'half way' } } });
    // Nested deeper than JSON.stringify can write again (JSON.parse takes it): left out, never a lookup that fails each time.
    stub.answer((_request, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"runId":"r-1","status":"completed","result":{"summary":"done","body":${'['.repeat(20_000)}${']'.repeat(20_000)}}}`);
    });
    expect(await stubTarget().lookup('r-1')).toEqual({ kind: 'found', run: { runId: 'r-1', status: 'completed', result: { summary: 'done' } } });
  });

  it('is unavailable on 408, 429, 5xx and an unfollowed redirect; rejected on other 4xx', async () => {
    const target = stubTarget();
    for (const status of [408, 429, 500, 502]) {
      stub.answer((_request, res) => json(res, status, { error: { code: 'busy', message: 'try later' } }));
      expect(await target.submit(submitRequestFactory())).toEqual({ kind: 'unavailable', reason: `HTTP ${status}: try later` });
    }
    stub.answer((_request, res) => json(res, 307, '', { location: `${stub.url}/elsewhere` }));
    expect(await target.submit(submitRequestFactory())).toEqual({ kind: 'unavailable', reason: 'HTTP 307' });
    expect(stub.requests.map((r) => r.path)).not.toContain('/elsewhere');

    stub.answer((_request, res) => json(res, 403, 'plain <b>forbidden</b>'));
    expect(await target.submit(submitRequestFactory())).toEqual({ kind: 'rejected', httpStatus: 403, reason: 'plain <b>forbidden</b>' });
  });

  it('bounds a reason to 200 characters without control characters', async () => {
    stub.answer((_request, res) => json(res, 400, { error: { message: `bad\u0000\r\n\u202eeol${'x'.repeat(1_000)}` } }));

    const outcome = await stubTarget().submit(submitRequestFactory());
    const reason = outcome.kind === 'rejected' ? outcome.reason : '';
    expect(reason).toMatch(/^bad eolx+…$/);
    expect(reason).toHaveLength(200);
  });

  it('maps approval answers: 2xx decided, 409 and 422 conflict, 404 not_found, 5xx unavailable', async () => {
    const target = stubTarget();
    const answers: [number, unknown][] = [
      [200, { approvalId: 'a-1', decision: 'cancel' }],
      [409, { error: { message: 'not pending' } }],
      [422, { error: { message: 'run is not waiting' } }],
      [404, { error: { message: 'no run' } }],
      [500, ''],
    ];
    const outcomes = [];
    for (const [status, body] of answers) {
      stub.answer((_request, res) => json(res, status, body));
      outcomes.push(await target.decideApproval('r-1', 'a-1', 'cancel'));
    }

    expect(outcomes).toEqual([
      { kind: 'decided', approvalId: 'a-1', decision: 'cancel' },
      { kind: 'conflict', reason: 'not pending' },
      { kind: 'conflict', reason: 'run is not waiting' },
      { kind: 'not_found' },
      { kind: 'unavailable', reason: 'HTTP 500' },
    ]);
    expect(stub.requests[0]).toMatchObject({ method: 'POST', path: '/runs/r-1/approval' });
    expect(JSON.parse(stub.requests[0]?.body ?? '')).toEqual({ approvalId: 'a-1', decision: 'cancel' });
  });

  it("reads cancel's status when the target gives one, and assumes cancelled otherwise", async () => {
    const target = stubTarget();
    stub.answer((_request, res) => json(res, 200, { runId: 'r-1', status: 'failed' }));
    expect(await target.cancel('r-1')).toEqual({ kind: 'cancelled', status: 'failed' });
    stub.answer((_request, res) => json(res, 202, 'accepted, somehow'));
    expect(await target.cancel('r-1')).toEqual({ kind: 'cancelled', status: 'cancelled' });
    expect(stub.requests[0]).toMatchObject({ method: 'POST', path: '/runs/r-1/cancel' });
  });

  it('is unavailable on every call when nothing listens on the port', async () => {
    const target = httpTarget({ name: 'gone', kind: 'http', baseUrl: await closedUrl() });
    const outcomes = [
      await target.submit(submitRequestFactory()),
      await target.lookup('r-1'),
      await target.decideApproval('r-1', 'a-1', 'approve'),
      await target.cancel('r-1'),
    ];

    for (const outcome of outcomes) {
      expect(outcome).toEqual({ kind: 'unavailable', reason: expect.stringMatching(/^could not reach the target: .*ECONNREFUSED/) });
    }
  });

  it('throws for a base URL or a runId that is a programming error, not a target answer', async () => {
    const register = (baseUrl: string) => () => httpTarget({ name: 'bad', kind: 'http', baseUrl });
    expect(register('ftp://127.0.0.1/')).toThrow(TypeError);
    expect(register('http://user:pw@127.0.0.1/')).toThrow(/credentials/);
    expect(register('http://127.0.0.1/?x=1')).toThrow(TypeError);
    expect(register('not a url')).toThrow(TypeError);
    expect(() => httpTarget({ name: 'bad', kind: 'http', baseUrl: stub.url }, { timeoutMs: 0 })).toThrow(RangeError);

    await expect(stubTarget().lookup('..')).rejects.toThrow(RangeError);
    await expect(stubTarget().cancel('')).rejects.toThrow(RangeError);
    expect(stub.requests).toHaveLength(0);
  });
});
