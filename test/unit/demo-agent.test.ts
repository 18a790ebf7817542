import { createServer, type Server } from 'node:http';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { planFor } from '../../local/demo-agent/model.js';
import { startDemoAgent, type DemoAgent, type LogLine } from '../../local/demo-agent/server.js';
import { eventually } from '../support/eventually.js';

// The demo agent is a real HTTP target (CONTRACT §8). Each test talks to it over HTTP and watches
// what it calls back with a tiny recorder standing in for the ledger API.

interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly runIdParam: string | null;
  readonly body: string;
}

interface RecordedEvent {
  readonly dispatchId: string;
  readonly seq: number;
  readonly type: string;
  readonly approvalId?: string;
  readonly result?: { readonly summary: string };
  readonly evidence?: readonly string[];
}

interface Recorder {
  readonly url: string;
  readonly requests: RecordedRequest[];
  events(runId: string): RecordedEvent[];
  uploads(runId: string): RecordedRequest[];
  close(): Promise<void>;
}

async function startRecorder(): Promise<Recorder> {
  const requests: RecordedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://recorder');
      requests.push({
        method: req.method ?? '',
        path: url.pathname,
        runIdParam: url.searchParams.get('runId'),
        body: Buffer.concat(chunks).toString('utf8'),
      });
      res.writeHead(req.method === 'PUT' ? 201 : 202, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ applied: true }));
    });
  });
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1' }, resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('recorder is not on TCP');
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests,
    events: (runId) =>
      requests
        .filter((r) => r.method === 'POST' && r.path === `/runs/${encodeURIComponent(runId)}/events`)
        .map((r) => JSON.parse(r.body) as RecordedEvent),
    uploads: (runId) => requests.filter((r) => r.method === 'PUT' && r.runIdParam === runId),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The demo agent's clocks are milliseconds: poll often, give up after seconds. */
const poll = (timeoutMs = 3_000) => ({ timeoutMs, intervalMs: 10 });

let sequence = 0;
const newDispatchId = (): string => `d-test:${process.pid}.${++sequence}`;

interface SubmissionBody {
  dispatchId: string;
  attempt: number;
  origin: string;
  task: Record<string, unknown>;
  expectedEvidence: string[];
  callbackUrl: string;
}

let agent: DemoAgent;
let recorder: Recorder;
let logLines: LogLine[];

beforeEach(async () => {
  logLines = [];
  recorder = await startRecorder();
  agent = await startDemoAgent({ log: (line) => logLines.push(line) });
});

afterEach(async () => {
  await agent.stop();
  await recorder.close();
});

function submissionFactory(overrides: Partial<SubmissionBody> = {}): SubmissionBody {
  return {
    dispatchId: newDispatchId(),
    attempt: 1,
    origin: 'planner',
    task: { goal: 'summarise the incident', behavior: 'complete' },
    expectedEvidence: [],
    callbackUrl: recorder.url,
    ...overrides,
  };
}

async function postJson(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${agent.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

function submit(body: SubmissionBody, key = `${body.dispatchId}:${body.attempt}`): Promise<Response> {
  return postJson('/runs', body, { 'idempotency-key': key });
}

/** Submits and expects acceptance; returns the runId. */
async function accepted(body: SubmissionBody): Promise<string> {
  const response = await submit(body);
  expect(response.status).toBe(200);
  const run = (await response.json()) as { runId: string; status: string };
  expect(run.status).toBe('queued');
  return run.runId;
}

interface LookupAnswer {
  readonly status: number;
  readonly body: {
    runId?: string;
    status?: string;
    result?: { summary: string };
    evidence?: string[];
    pendingApproval?: { approvalId: string; requestedAt: string };
    error?: { code: string; message: string };
  };
}

async function lookup(runId: string): Promise<LookupAnswer> {
  const response = await fetch(`${agent.url}/runs/${encodeURIComponent(runId)}`);
  return { status: response.status, body: (await response.json()) as LookupAnswer['body'] };
}

function untilStatus(runId: string, status: string, timeoutMs?: number): Promise<LookupAnswer> {
  return eventually(`run ${runId} to be ${status}`, () => lookup(runId), { ...poll(timeoutMs), until: (answer) => answer.body.status === status });
}

function untilEvent(runId: string, type: string): Promise<RecordedEvent> {
  return eventually(`a ${type} event from run ${runId}`, () => recorder.events(runId).find((e) => e.type === type), poll());
}

async function errorCode(response: Response): Promise<string | undefined> {
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  const body = (await response.json()) as { error?: { code?: string } };
  return body.error?.code;
}

describe('demo agent submission', () => {
  it('returns the same run for the same Idempotency-Key and creates it once', async () => {
    const body = submissionFactory();
    const first = (await (await submit(body)).json()) as { runId: string };
    const second = (await (await submit(body)).json()) as { runId: string };

    expect(second.runId).toBe(first.runId);
    expect(agent.stats()).toEqual({
      submissions: { [body.dispatchId]: 2 },
      runs: { [body.dispatchId]: 1 },
      attempts: { [`${body.dispatchId}:1`]: { submissions: 2, runs: 1 } },
      open: expect.any(Number) as number,
      maxOpen: { 'demo-agent': 1 },
    });
    // The route serves the same figures (`open` aside: the run may end between the two reads on a busy machine).
    const stats = (await (await fetch(`${agent.url}/stats`)).json()) as Record<string, unknown>;
    expect({ ...stats, open: 0 }).toEqual({ ...agent.stats(), open: 0 });
  });

  it('creates a new run for the next attempt of the same dispatch', async () => {
    const body = submissionFactory();
    const first = await accepted(body);
    const second = await accepted({ ...body, attempt: 2 });

    expect(second).not.toBe(first);
    expect(agent.stats().runs[body.dispatchId]).toBe(2);
  });

  it('answers 400 when the Idempotency-Key is missing or does not match the body', async () => {
    const body = submissionFactory();
    const missing = await postJson('/runs', body);
    expect(missing.status).toBe(400);
    expect(await errorCode(missing)).toBe('missing_idempotency_key');

    const mismatched = await submit(body, `${body.dispatchId}:9`);
    expect(mismatched.status).toBe(400);
    expect(await errorCode(mismatched)).toBe('idempotency_key_mismatch');
    // The mismatched request is counted under the attempt its body names; the key-less one too.
    expect(agent.stats()).toEqual({
      submissions: { [body.dispatchId]: 2 },
      runs: {},
      attempts: { [`${body.dispatchId}:1`]: { submissions: 2, runs: 0 } },
      open: 0,
      maxOpen: { 'demo-agent': 0 },
    });
  });

  it('answers 400 when the body is not JSON or not a submission', async () => {
    const notJson = await postJson('/runs', '{nope', { 'idempotency-key': 'd-1:1' });
    expect(notJson.status).toBe(400);
    expect(await errorCode(notJson)).toBe('malformed_json');

    const noCallback = await submit({ ...submissionFactory(), callbackUrl: 'not a url' });
    expect(noCallback.status).toBe(400);
    expect(await errorCode(noCallback)).toBe('invalid_submission');
  });

  it('answers 413 when the body exceeds 1 MB', async () => {
    const response = await postJson('/runs', { padding: 'x'.repeat(1024 * 1024 + 1) }, { 'idempotency-key': 'd-1:1' });
    expect(response.status).toBe(413);
    expect(await errorCode(response)).toBe('payload_too_large');
  });

  it('answers 422 unknown_behavior when task.behavior is not a known behaviour', async () => {
    const response = await submit(submissionFactory({ task: { behavior: 'dance' } }));
    expect(response.status).toBe(422);
    expect(await errorCode(response)).toBe('unknown_behavior');
  });

  it('answers 422 when the submission is rejected (reject)', async () => {
    const body = submissionFactory({ task: { behavior: 'reject' } });
    const response = await submit(body);

    expect(response.status).toBe(422);
    expect(await errorCode(response)).toBe('submission_rejected');
    expect(agent.stats()).toEqual({
      submissions: { [body.dispatchId]: 1 },
      runs: {},
      attempts: { [`${body.dispatchId}:1`]: { submissions: 1, runs: 0 } },
      open: 0,
      maxOpen: { 'demo-agent': 0 },
    });
  });

  it('answers 503 to the first submission of a dispatch and accepts the retry (flaky_submit)', async () => {
    const body = submissionFactory({ task: { behavior: 'flaky_submit' } });
    const first = await submit(body);
    expect(first.status).toBe(503);
    expect(await errorCode(first)).toBe('temporarily_unavailable');

    const runId = await accepted(body);
    await untilEvent(runId, 'completed');
    expect(agent.stats()).toEqual({
      submissions: { [body.dispatchId]: 2 },
      runs: { [body.dispatchId]: 1 },
      attempts: { [`${body.dispatchId}:1`]: { submissions: 2, runs: 1 } },
      open: 0,
      maxOpen: { 'demo-agent': 1 },
    });
  });

  it('answers JSON 404 for an unknown route and an unknown run', async () => {
    const route = await fetch(`${agent.url}/nowhere`);
    expect(route.status).toBe(404);
    expect(await errorCode(route)).toBe('not_found');

    const run = await lookup('r-unknown');
    expect(run.status).toBe(404);
    expect(run.body.error?.code).toBe('run_not_found');
  });
});

describe('demo agent stats', () => {
  const cancel = (runId: string): Promise<Response> => postJson(`/runs/${runId}/cancel`, {});
  const open = (): number => agent.stats().open;

  it('counts a same-key repeat as a submission of its attempt, not a run, and a second attempt apart', async () => {
    const body = submissionFactory({ task: { behavior: 'stall' } });
    const first = await accepted(body);
    expect((await (await submit(body)).json()) as { runId: string }).toMatchObject({ runId: first });
    await accepted({ ...body, attempt: 2 }); // a redispatch: the same dispatch, a new attempt

    const stats = agent.stats();
    expect(stats.submissions).toEqual({ [body.dispatchId]: 3 });
    expect(stats.runs).toEqual({ [body.dispatchId]: 2 });
    expect(stats.attempts).toEqual({
      [`${body.dispatchId}:1`]: { submissions: 2, runs: 1 },
      [`${body.dispatchId}:2`]: { submissions: 1, runs: 1 },
    });
    expect((await (await fetch(`${agent.url}/stats`)).json()) as unknown).toEqual(agent.stats());
  });

  it('counts refused submissions under the attempt their body names, and none without an attempt', async () => {
    const rejected = submissionFactory({ task: { behavior: 'reject' } });
    expect((await submit(rejected)).status).toBe(422);
    expect((await submit(rejected)).status).toBe(422);
    const attemptless = submissionFactory();
    const { attempt: _omitted, ...withoutAttempt } = attemptless;
    expect((await postJson('/runs', withoutAttempt, { 'idempotency-key': `${attemptless.dispatchId}:1` })).status).toBe(400);

    const stats = agent.stats();
    expect(stats.attempts).toEqual({ [`${rejected.dispatchId}:1`]: { submissions: 2, runs: 0 } });
    expect(stats.submissions).toEqual({ [rejected.dispatchId]: 2, [attemptless.dispatchId]: 1 });
  });

  it('counts runs open until they end or are cancelled, and keeps the highest count as maxOpen', async () => {
    expect(agent.stats()).toMatchObject({ open: 0, maxOpen: { 'demo-agent': 0 } });

    const stalledA = await accepted(submissionFactory({ task: { behavior: 'stall' } }));
    const stalledB = await accepted(submissionFactory({ task: { behavior: 'stall' } }));
    expect(agent.stats()).toMatchObject({ open: 2, maxOpen: { 'demo-agent': 2 } });

    await cancel(stalledA);
    expect(agent.stats()).toMatchObject({ open: 1, maxOpen: { 'demo-agent': 2 } });
    await cancel(stalledA); // cancelling a cancelled run again frees nothing more
    expect(open()).toBe(1);

    // A failing run ends as soon as its callback is through: whether it is still open when the test looks
    // depends on the machine (a clean clone's .ci/run saw 1, not 2), so only its end is checked.
    const failing = await accepted(submissionFactory({ task: { behavior: 'fail' } }));
    await untilStatus(failing, 'failed');
    expect(open()).toBe(1);

    const completing = await accepted(submissionFactory());
    await untilStatus(completing, 'completed');
    expect(open()).toBe(1);

    const waiting = await accepted(submissionFactory({ task: { behavior: 'await_approval' } }));
    const { approvalId } = await untilEvent(waiting, 'approval_requested');
    const stalledC = await accepted(submissionFactory({ task: { behavior: 'stall' } }));
    expect(agent.stats()).toMatchObject({ open: 3, maxOpen: { 'demo-agent': 3 } });

    await postJson(`/runs/${waiting}/approval`, { approvalId, decision: 'cancel' });
    await cancel(stalledB);
    await cancel(stalledC);
    expect(agent.stats()).toMatchObject({ open: 0, maxOpen: { 'demo-agent': 3 } });
  });

  it('keys maxOpen by the targetName it was started with', async () => {
    const named = await startDemoAgent({ targetName: 'census-agent' });
    try {
      const body = submissionFactory({ task: { behavior: 'stall' } });
      const response = await fetch(`${named.url}/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': `${body.dispatchId}:1` },
        body: JSON.stringify(body),
      });
      expect(response.status).toBe(200);
      expect(named.stats()).toMatchObject({ open: 1, maxOpen: { 'census-agent': 1 } });
      expect(Object.keys(named.stats().maxOpen)).toEqual(['census-agent']);
    } finally {
      await named.stop();
    }
  });

  it('keeps maxOpen per target name, each further target on a base path of its own (CONTRACT V3 §8)', async () => {
    const shared = await startDemoAgent({ moreTargets: ['demo-agent-limited'] });
    try {
      const submit = async (base: string) => {
        const body = submissionFactory({ task: { behavior: 'stall' } });
        return fetch(`${base}/runs`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': `${body.dispatchId}:1` }, body: JSON.stringify(body) });
      };
      expect(shared.urlOf('demo-agent')).toBe(shared.url);
      expect(shared.urlOf('demo-agent-limited')).toBe(`${shared.url}/targets/demo-agent-limited`);
      for (const base of [shared.urlOf('demo-agent-limited'), shared.urlOf('demo-agent-limited'), shared.url]) expect((await submit(base)).status).toBe(200);
      expect((await submit(`${shared.url}/targets/someone-else`)).status).toBe(404);
      const stats = (await (await fetch(`${shared.url}/stats`)).json()) as { open: number; maxOpen: Record<string, number> };
      expect(stats).toMatchObject({ open: 3, maxOpen: { 'demo-agent': 1, 'demo-agent-limited': 2 } });
    } finally {
      await shared.stop();
    }
  });

  it('reports no fault fired when started without a fault schedule', async () => {
    const runId = await accepted(submissionFactory({ task: { behavior: 'stall' } }));
    expect((await lookup(runId)).status).toBe(200);
    expect(agent.faultsFired()).toEqual({ submit_unavailable: 0, submit_hang: 0, lookup_outage: 0 });
  });
});

describe('demo agent behaviours', () => {
  it('reports a heartbeat, uploads every expected file, then completes (complete)', async () => {
    // A dispatch id as the protocol allows it (CONTRACT §1), ':' and all: encoded whole in the upload path.
    const body = submissionFactory({ dispatchId: `d-test:enc.${process.pid}`, expectedEvidence: ['out/report.md', 'out/my notes.txt'] });
    const runId = await accepted(body);

    const completed = await untilEvent(runId, 'completed');
    const events = recorder.events(runId);
    expect(events.map((e) => [e.seq, e.type])).toEqual([
      [1, 'heartbeat'],
      [2, 'completed'],
    ]);
    expect(events.every((e) => e.dispatchId === body.dispatchId)).toBe(true);
    expect(completed.evidence).toEqual(body.expectedEvidence);
    expect(completed.result?.summary).toContain('summarise the incident');

    const uploads = recorder.uploads(runId);
    expect(uploads.map((u) => u.path)).toEqual([
      `/dispatches/d-test%3Aenc.${process.pid}/evidence/out/report.md`,
      `/dispatches/d-test%3Aenc.${process.pid}/evidence/out/my%20notes.txt`,
    ]);
    expect(uploads.every((u) => u.body.length > 0)).toBe(true);
    // Evidence is in place before the completion is reported.
    const lastUpload = recorder.requests.lastIndexOf(uploads[1]!);
    const completion = recorder.requests.findIndex((r) => r.method === 'POST' && r.body.includes('"completed"'));
    expect(lastUpload).toBeLessThan(completion);

    const view = await lookup(runId);
    expect(view).toEqual({
      status: 200,
      body: { runId, status: 'completed', result: completed.result, evidence: body.expectedEvidence },
    });
  });

  it('claims the expected refs but uploads nothing (complete_without_evidence)', async () => {
    const body = submissionFactory({
      task: { behavior: 'complete_without_evidence' },
      expectedEvidence: ['out/report.md'],
    });
    const runId = await accepted(body);

    const completed = await untilEvent(runId, 'completed');
    expect(completed.evidence).toEqual(['out/report.md']);
    expect(recorder.uploads(runId)).toEqual([]);
  });

  it('completes natively without reporting it (lose_callback)', async () => {
    const body = submissionFactory({ task: { behavior: 'lose_callback' }, expectedEvidence: ['out/report.md'] });
    const runId = await accepted(body);

    const view = await untilStatus(runId, 'completed');
    expect(view.body.result?.summary).toBeTruthy();
    expect(view.body.evidence).toEqual(['out/report.md']);
    // The run's last step sets the status, so nothing can follow the lookup above.
    expect(recorder.events(runId).map((e) => e.type)).not.toContain('completed');
  });

  it('answers 404 to lookups after accepting the run (vanish)', async () => {
    const runId = await accepted(submissionFactory({ task: { behavior: 'vanish' } }));

    expect((await lookup(runId)).status).toBe(404);
    expect((await postJson(`/runs/${runId}/cancel`, {})).status).toBe(404);
  });

  it('answers 503 to lookups (lookup_unavailable)', async () => {
    const runId = await accepted(submissionFactory({ task: { behavior: 'lookup_unavailable' } }));

    const answer = await lookup(runId);
    expect(answer.status).toBe(503);
    expect(answer.body.error?.code).toBe('lookup_unavailable');
  });

  it('reports a heartbeat then fails (fail)', async () => {
    const runId = await accepted(submissionFactory({ task: { behavior: 'fail' } }));

    await untilEvent(runId, 'failed');
    expect(recorder.events(runId).map((e) => [e.seq, e.type])).toEqual([
      [1, 'heartbeat'],
      [2, 'failed'],
    ]);
    expect((await lookup(runId)).body.status).toBe('failed');
  });

  it('sends one heartbeat then stays silent while lookups say running (stall)', async () => {
    const runId = await accepted(submissionFactory({ task: { behavior: 'stall' } }));

    await untilEvent(runId, 'heartbeat');
    // A stall is an absence, so this one wait is a deliberate fixed interval.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(recorder.events(runId).map((e) => e.type)).toEqual(['heartbeat']);
    expect((await lookup(runId)).body.status).toBe('running');
  });

  it('completes after task.resumeAfterSeconds (stall with resume)', async () => {
    const body = submissionFactory({
      task: { behavior: 'stall', resumeAfterSeconds: 1 },
      expectedEvidence: ['out/report.md'],
    });
    const runId = await accepted(body);

    await untilEvent(runId, 'heartbeat');
    expect((await lookup(runId)).body.status).toBe('running');
    await untilEvent(runId, 'completed');
    expect(recorder.events(runId).map((e) => [e.seq, e.type])).toEqual([
      [1, 'heartbeat'],
      [2, 'completed'],
    ]);
    expect(recorder.uploads(runId)).toHaveLength(1);
  });

  it('sends a heartbeat every second, then completes (slow)', async () => {
    const runId = await accepted(submissionFactory({ task: { behavior: 'slow', seconds: 1.5 } }));

    await untilEvent(runId, 'completed');
    expect(recorder.events(runId).map((e) => e.type)).toEqual(['heartbeat', 'heartbeat', 'completed']);
  });

  it('answers 422 invalid_task when a behaviour parameter is out of range', async () => {
    const response = await submit(submissionFactory({ task: { behavior: 'slow', seconds: -1 } }));
    expect(response.status).toBe(422);
    expect(await errorCode(response)).toBe('invalid_task');
  });

  it('cancels an active run on request and keeps a finished one as it was', async () => {
    const stalled = await accepted(submissionFactory({ task: { behavior: 'stall' } }));
    await untilEvent(stalled, 'heartbeat');
    const cancel = await postJson(`/runs/${stalled}/cancel`, {});
    expect(await cancel.json()).toEqual({ runId: stalled, status: 'cancelled' });
    await untilEvent(stalled, 'cancelled');
    expect(recorder.events(stalled).map((e) => e.seq)).toEqual([1, 2]);

    const failed = await accepted(submissionFactory({ task: { behavior: 'fail' } }));
    await untilStatus(failed, 'failed');
    const late = await postJson(`/runs/${failed}/cancel`, {});
    expect(await late.json()).toEqual({ runId: failed, status: 'failed' });
  });

  it('retries, then logs callback failures and carries on when the ledger is unreachable', async () => {
    const closed = await startRecorder();
    await closed.close();
    // The worker kit retries by time (5 minutes by default); callbackTries holds it to 5 tries.
    await agent.stop();
    agent = await startDemoAgent({ callbackTries: 5, log: (line) => logLines.push(line) });
    const runId = await accepted(submissionFactory({ callbackUrl: closed.url, expectedEvidence: ['out/report.md'] }));

    // Each of the three callbacks is tried 5 times (1.5 s of backoff) before it is given up.
    await untilStatus(runId, 'completed', 10_000);
    const failures = await eventually('three given-up callbacks', () => logLines.filter((line) => line['msg'] === 'callback_gave_up' && line['runId'] === runId), {
      ...poll(10_000),
      until: (given) => given.length === 3,
    });
    // The heartbeat and the upload are retried side by side (the kit sends uploads beside the events).
    expect(failures.map((line) => line['callback']).sort()).toEqual(['event', 'event', 'evidence']);
    expect(failures.every((line) => line['tries'] === 5)).toBe(true);
    expect((await fetch(`${agent.url}/stats`)).status).toBe(200);
  }, 15_000);
});

describe('demo agent approval (await_approval)', () => {
  async function awaitingApproval(expectedEvidence: string[] = []): Promise<{ runId: string; approvalId: string }> {
    const runId = await accepted(submissionFactory({ task: { behavior: 'await_approval' }, expectedEvidence }));
    const requested = await untilEvent(runId, 'approval_requested');
    // The worker kit's first heartbeat, sent as every run starts, is seq 1.
    expect(requested.seq).toBe(2);
    expect(requested.approvalId).toMatch(/^a-/);
    return { runId, approvalId: requested.approvalId ?? '' };
  }

  it('shows the pending approval on lookup', async () => {
    const { runId, approvalId } = await awaitingApproval();

    const view = await lookup(runId);
    expect(view.body.status).toBe('waiting_for_approval');
    expect(view.body.pendingApproval?.approvalId).toBe(approvalId);
    expect(Number.isNaN(Date.parse(view.body.pendingApproval?.requestedAt ?? ''))).toBe(false);
  });

  it('completes with evidence when approved', async () => {
    const { runId, approvalId } = await awaitingApproval(['out/report.md']);

    const response = await postJson(`/runs/${runId}/approval`, { approvalId, decision: 'approve' });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ approvalId, decision: 'approve' });

    await untilEvent(runId, 'completed');
    expect(recorder.events(runId).map((e) => [e.seq, e.type])).toEqual([
      [1, 'heartbeat'],
      [2, 'approval_requested'],
      [3, 'completed'],
    ]);
    expect(recorder.uploads(runId)).toHaveLength(1);
    const view = await lookup(runId);
    expect(view.body.status).toBe('completed');
    expect(view.body.pendingApproval).toBeUndefined();
  });

  it('cancels when the decision is cancel', async () => {
    const { runId, approvalId } = await awaitingApproval();

    const response = await postJson(`/runs/${runId}/approval`, { approvalId, decision: 'cancel' });
    expect(await response.json()).toEqual({ approvalId, decision: 'cancel' });

    await untilEvent(runId, 'cancelled');
    expect(recorder.events(runId).map((e) => [e.seq, e.type])).toEqual([
      [1, 'heartbeat'],
      [2, 'approval_requested'],
      [3, 'cancelled'],
    ]);
    expect((await lookup(runId)).body.status).toBe('cancelled');
  });

  it('answers 409 when the approvalId is not the pending one', async () => {
    const { runId, approvalId } = await awaitingApproval();

    const wrong = await postJson(`/runs/${runId}/approval`, { approvalId: 'a-wrong', decision: 'approve' });
    expect(wrong.status).toBe(409);
    expect(await errorCode(wrong)).toBe('approval_not_pending');
    expect((await lookup(runId)).body.pendingApproval?.approvalId).toBe(approvalId);
  });

  it('answers a repeated decision again but 409 to a different one', async () => {
    const { runId, approvalId } = await awaitingApproval();
    await postJson(`/runs/${runId}/approval`, { approvalId, decision: 'approve' });

    const repeated = await postJson(`/runs/${runId}/approval`, { approvalId, decision: 'approve' });
    expect(repeated.status).toBe(200);
    const changed = await postJson(`/runs/${runId}/approval`, { approvalId, decision: 'cancel' });
    expect(changed.status).toBe(409);
  });

  it('answers 400 to a decision that is neither approve nor cancel', async () => {
    const { runId, approvalId } = await awaitingApproval();

    const response = await postJson(`/runs/${runId}/approval`, { approvalId, decision: 'maybe' });
    expect(response.status).toBe(400);
    expect(await errorCode(response)).toBe('invalid_decision');
  });
});

describe('demo agent request ids', () => {
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

  it('echoes a well-formed x-request-id on every answer and mints a UUID when there is none or it is unsafe', async () => {
    const echoed = await postJson('/runs', submissionFactory(), { 'idempotency-key': 'd-x:1', 'x-request-id': 'req-1.a:B_2' });
    expect(echoed.status).toBe(400);
    expect(echoed.headers.get('x-request-id')).toBe('req-1.a:B_2');

    const accepted = await submit(submissionFactory());
    expect(accepted.headers.get('x-request-id')).toMatch(UUID);

    const tooLong = await fetch(`${agent.url}/nowhere`, { headers: { 'x-request-id': 'a'.repeat(129) } });
    expect(tooLong.status).toBe(404);
    expect(tooLong.headers.get('x-request-id')).toMatch(UUID);

    const unsafe = await fetch(`${agent.url}/stats`, { headers: { 'x-request-id': 'a b<script>' } });
    expect(unsafe.headers.get('x-request-id')).toMatch(UUID);
  });
});

describe('planFor', () => {
  it('defaults a task without behavior to complete', () => {
    expect(planFor({ goal: 'x' })).toEqual({ kind: 'plan', plan: { behavior: 'complete' } });
  });

  it('defaults slow to three seconds', () => {
    expect(planFor({ behavior: 'slow' })).toEqual({ kind: 'plan', plan: { behavior: 'slow', seconds: 3 } });
  });
});
