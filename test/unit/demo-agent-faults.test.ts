import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { startDemoAgent, type DemoAgent, type DemoAgentFaults, type SubmitFault } from '../../local/demo-agent/server.js';
import { eventually } from '../support/eventually.js';

// The census drives thousands of dispatches through the local platform while the demo agent
// misbehaves on a schedule (CONTRACT §8 "The demo agent"): these tests pin what each fault does.

/** Stands in for the ledger API: accepts every callback, so runs proceed as usual. */
async function startLedgerSink(): Promise<{ readonly url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(req.method === 'PUT' ? 201 : 202, { 'content-type': 'application/json' });
      res.end('{"applied":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1' }, resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('ledger sink is not on TCP');
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A fault schedule that records every question it is asked and answers from the test's script. */
function scriptedFaults(script: {
  submit?: (dispatchId: string, attempt: number, asked: number) => SubmitFault;
  lookupDown?: (runId: string) => boolean;
  hangMs?: number;
}): DemoAgentFaults & { readonly submitAsked: string[]; readonly lookupAsked: string[] } {
  const submitAsked: string[] = [];
  const lookupAsked: string[] = [];
  return {
    submitAsked,
    lookupAsked,
    hangMs: script.hangMs ?? 0,
    submit(dispatchId, attempt) {
      const key = `${dispatchId}:${attempt}`;
      submitAsked.push(key);
      return script.submit?.(dispatchId, attempt, submitAsked.filter((k) => k === key).length) ?? 'none';
    },
    lookupDown(runId) {
      lookupAsked.push(runId);
      return script.lookupDown?.(runId) ?? false;
    },
  };
}

let sequence = 0;
const newDispatchId = (): string => `d-fault:${process.pid}.${++sequence}`;

const started: { agent?: DemoAgent; sink?: Awaited<ReturnType<typeof startLedgerSink>> } = {};

afterEach(async () => {
  await started.agent?.stop();
  await started.sink?.close();
  started.agent = undefined;
  started.sink = undefined;
});

async function agentWith(faults: DemoAgentFaults): Promise<DemoAgent> {
  started.sink = await startLedgerSink();
  started.agent = await startDemoAgent({ faults });
  return started.agent;
}

function submissionFactory(overrides: Record<string, unknown> = {}) {
  return {
    dispatchId: newDispatchId(),
    attempt: 1,
    origin: 'census',
    task: { behavior: 'stall' },
    expectedEvidence: [],
    callbackUrl: started.sink?.url ?? 'http://127.0.0.1:9',
    ...overrides,
  };
}

type Submission = ReturnType<typeof submissionFactory>;

function submit(agent: DemoAgent, body: Submission, init: { key?: string; signal?: AbortSignal } = {}): Promise<Response> {
  return fetch(`${agent.url}/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': init.key ?? `${body.dispatchId}:${body.attempt}` },
    body: JSON.stringify(body),
    ...(init.signal && { signal: init.signal }),
  });
}

async function json<T>(response: Response): Promise<T> {
  return (await response.json()) as T;
}

describe('demo agent fault: submit unavailable', () => {
  it('answers 503 temporarily_unavailable without creating a run, counting the submission and the fault', async () => {
    const faults = scriptedFaults({ submit: (_d, _a, asked) => (asked === 1 ? 'unavailable' : 'none') });
    const agent = await agentWith(faults);
    const body = submissionFactory();

    const refused = await submit(agent, body);
    expect(refused.status).toBe(503);
    expect(await json<{ error: { code: string } }>(refused)).toMatchObject({ error: { code: 'temporarily_unavailable' } });
    expect(agent.stats()).toMatchObject({ runs: {}, open: 0, attempts: { [`${body.dispatchId}:1`]: { submissions: 1, runs: 0 } } });

    const retried = await submit(agent, body);
    expect(retried.status).toBe(200);
    expect(agent.stats()).toMatchObject({
      submissions: { [body.dispatchId]: 2 },
      runs: { [body.dispatchId]: 1 },
      attempts: { [`${body.dispatchId}:1`]: { submissions: 2, runs: 1 } },
      open: 1,
    });
    expect(faults.submitAsked).toEqual([`${body.dispatchId}:1`, `${body.dispatchId}:1`]);
    expect(agent.faultsFired()).toEqual({ submit_unavailable: 1, submit_hang: 0, lookup_outage: 0 });
  });

  it('is asked before anything else, so it answers 503 even where the request would be refused', async () => {
    const agent = await agentWith(scriptedFaults({ submit: () => 'unavailable' }));
    const body = submissionFactory();

    const mismatched = await submit(agent, body, { key: `${body.dispatchId}:9` });
    expect(mismatched.status).toBe(503);
    expect(agent.faultsFired().submit_unavailable).toBe(1);
  });
});

describe('demo agent fault: submit hang', () => {
  // Long enough that the same-key retry below is answered first even when a busy machine pauses this
  // process (it was 300 ms, which a pause could outlast).
  const hangMs = 1_500;

  it('creates the run at once but answers only after hangMs, with the runId a same-key retry gets', async () => {
    const faults = scriptedFaults({ hangMs, submit: (_d, _a, asked) => (asked === 1 ? 'hang' : 'none') });
    const agent = await agentWith(faults);
    const body = submissionFactory();

    const sentAt = Date.now();
    const order: string[] = [];
    const hung = submit(agent, body).then(async (response) => {
      order.push('hung');
      return { status: response.status, elapsedMs: Date.now() - sentAt, run: await json<{ runId: string }>(response) };
    });
    await eventually('the hang to fire', () => agent.faultsFired().submit_hang || undefined, { timeoutMs: 2_000, intervalMs: 5 });
    expect(agent.stats().runs).toEqual({ [body.dispatchId]: 1 });

    const retry = await submit(agent, body);
    order.push('retry');
    const retried = await json<{ runId: string }>(retry);
    const late = await hung;

    expect(order).toEqual(['retry', 'hung']);
    expect(late.status).toBe(200);
    expect(late.run.runId).toBe(retried.runId);
    expect(late.elapsedMs).toBeGreaterThanOrEqual(hangMs - 5); // timers may round down by a millisecond
    expect(agent.stats()).toMatchObject({
      runs: { [body.dispatchId]: 1 },
      attempts: { [`${body.dispatchId}:1`]: { submissions: 2, runs: 1 } },
    });
    expect(agent.faultsFired()).toEqual({ submit_unavailable: 0, submit_hang: 1, lookup_outage: 0 });
  });

  it('lets a caller that timed out find its run with the same Idempotency-Key', async () => {
    const agent = await agentWith(scriptedFaults({ hangMs: 60_000, submit: (_d, _a, asked) => (asked === 1 ? 'hang' : 'none') }));
    const body = submissionFactory();

    // The caller gives up once its submission is held (was: after 50 ms, which could come before the
    // agent had read it: no run, no hang).
    const caller = new AbortController();
    const first = submit(agent, body, { signal: caller.signal });
    await eventually('the hang to fire', () => agent.faultsFired().submit_hang || undefined, { timeoutMs: 2_000, intervalMs: 5 });
    caller.abort();
    await expect(first).rejects.toThrow();
    const retry = await submit(agent, body);

    expect(retry.status).toBe(200);
    expect(agent.stats()).toMatchObject({ runs: { [body.dispatchId]: 1 }, open: 1 });
    expect(agent.faultsFired().submit_hang).toBe(1);
  });

  it('drops a held answer when the agent stops instead of keeping stop() waiting', async () => {
    // Not timed (it had asserted "stop() within 1 s"): the hang is a minute, far past the test's bound, so
    // a stop() that waited for it never returns; and the held answer is dropped, never sent.
    const agent = await agentWith(scriptedFaults({ hangMs: 60_000, submit: () => 'hang' }));
    const pending = submit(agent, submissionFactory());
    const settled = pending.then(
      () => 'answered',
      () => 'dropped',
    );
    await eventually('the hang to fire', () => agent.faultsFired().submit_hang || undefined, { timeoutMs: 2_000, intervalMs: 5 });

    await agent.stop();
    expect(await settled).toBe('dropped');
  });

  it('refuses a hangMs that is not a finite, non-negative number at start', async () => {
    await expect(startDemoAgent({ faults: scriptedFaults({ hangMs: -1 }) })).rejects.toThrow(RangeError);
    await expect(startDemoAgent({ faults: scriptedFaults({ hangMs: Number.NaN }) })).rejects.toThrow(RangeError);
  });
});

describe('demo agent fault: lookup outage', () => {
  it('answers 503 lookup_unavailable while the schedule says the status endpoint is down', async () => {
    const down = new Set<string>();
    const faults = scriptedFaults({ lookupDown: (runId) => down.has(runId) || runId === 'r-unknown' });
    const agent = await agentWith(faults);
    const runId = (await json<{ runId: string }>(await submit(agent, submissionFactory()))).runId;
    const lookup = (id: string) => fetch(`${agent.url}/runs/${id}`);

    expect((await lookup(runId)).status).toBe(200);
    down.add(runId);
    const outage = await lookup(runId);
    expect(outage.status).toBe(503);
    expect(await json<{ error: { code: string } }>(outage)).toMatchObject({ error: { code: 'lookup_unavailable' } });
    // An outage is of the endpoint: it answers 503 before it knows whether the run exists.
    expect((await lookup('r-unknown')).status).toBe(503);
    down.delete(runId);
    expect((await lookup(runId)).status).toBe(200);

    expect(faults.lookupAsked).toEqual([runId, runId, 'r-unknown', runId]);
    expect(agent.faultsFired()).toEqual({ submit_unavailable: 0, submit_hang: 0, lookup_outage: 2 });
  });
});
