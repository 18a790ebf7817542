import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SignatureV4 } from '@smithy/signature-v4';
import { Hash } from '@smithy/hash-node';
import { sigv4Signer, type LogLine, type Signer } from '@dispatch-ledger/worker';
import { eventually } from '../support/eventually.js';
import { backoffMs, CallbackClient, DEFAULT_RETRY, evidenceUrl, isRetryable, type Transport } from '../../packages/worker/src/callbacks.js';
import { invocationCallbacks } from '../../packages/worker/src/invocation-callbacks.js';

type Answer = { status: number; code?: string } | 'network_error';

/** A scripted ledger: answers each try with the next answer (then 202), on a clock that only the pauses move. */
function scripted(answers: readonly Answer[]) {
  let now = 0;
  const tries: Array<{ url: string; method: string; headers: Record<string, string>; body: string | Uint8Array | undefined }> = [];
  const pauses: number[] = [];
  const transport: Transport = async (url, init) => {
    const answer = answers[tries.length] ?? { status: 202 };
    tries.push({ url, method: init.method, headers: init.headers, body: init.body });
    if (answer === 'network_error') throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED 127.0.0.1:9') });
    return { status: answer.status, text: answer.code ? JSON.stringify({ error: { code: answer.code, message: 'm' } }) : '{"applied":true}' };
  };
  const log: LogLine[] = [];
  const client = (options: { signer?: Signer; budgetMs?: number; finalBudgetMs?: number } = {}) =>
    new CallbackClient({
      log: (line) => void log.push(line),
      stopSignal: new AbortController().signal,
      transport,
      now: () => now,
      sleep: async (ms) => {
        pauses.push(ms);
        now += ms;
      },
      retry: { ...(options.budgetMs === undefined ? {} : { budgetMs: options.budgetMs }), ...(options.finalBudgetMs === undefined ? {} : { finalBudgetMs: options.finalBudgetMs }) },
      ...(options.signer ? { signer: options.signer } : {}),
    });
  return { client, tries, pauses, log, now: () => now, advance: (ms: number) => void (now += ms) };
}

const heartbeat = { dispatchId: 'd-1', seq: 1, type: 'heartbeat' as const };
const completed = { dispatchId: 'd-1', seq: 2, type: 'completed' as const, result: { summary: 'done' } };

describe('the worker kit: callbacks to the ledger', () => {
  it('retries 409 not_yet_recorded until the ledger has recorded the run', async () => {
    const ledger = scripted([{ status: 409, code: 'not_yet_recorded' }, { status: 409, code: 'not_yet_recorded' }, { status: 409, code: 'not_yet_recorded' }]);
    const outcome = await ledger.client().putEvidence('http://127.0.0.1:9', 'd-1', 'd-1:1', 'out/report.md', 'x', 'text/plain');
    expect(outcome).toMatchObject({ kind: 'delivered', status: 202, tries: 4 });
    expect(ledger.pauses).toEqual([100, 200, 400]);
  });

  it('retries 5xx, 429, 408 and no answer at all', async () => {
    const ledger = scripted([{ status: 503 }, 'network_error', { status: 429 }, { status: 408 }, { status: 500 }]);
    expect(await ledger.client().postEvent('http://127.0.0.1:9', 'd-1:1', heartbeat)).toMatchObject({ kind: 'delivered', tries: 6 });
  });

  it('gives up at once on a refusal retrying cannot change (another 409, a 404, a 413), and says so in the log', async () => {
    for (const answer of [{ status: 409, code: 'evidence_sealed' }, { status: 409, code: 'conflict' }, { status: 404, code: 'not_found' }, { status: 413, code: 'too_large' }, { status: 302 }]) {
      const ledger = scripted([answer]);
      const outcome = await ledger.client().putEvidence('http://127.0.0.1:9', 'd-1', 'd-1:1', 'out/report.md', 'x', 'text/plain');
      expect(outcome).toMatchObject({ kind: 'refused', status: answer.status, tries: 1 });
      expect(ledger.log.map((line) => line.msg)).toEqual(['callback_refused']);
    }
  });

  it('stops after its budget, never silently, and keeps a final event going longer than a heartbeat', async () => {
    const down = Array.from({ length: 1_000 }, () => ({ status: 503 }));
    const beat = scripted(down);
    const final = scripted(down);
    const heartbeatOutcome = await beat.client({ budgetMs: 10_000, finalBudgetMs: 60_000 }).postEvent('http://127.0.0.1:9', 'd-1:1', heartbeat);
    const finalOutcome = await final.client({ budgetMs: 10_000, finalBudgetMs: 60_000 }).postEvent('http://127.0.0.1:9', 'd-1:1', completed);
    expect(heartbeatOutcome.kind).toBe('gave_up');
    expect(finalOutcome.kind).toBe('gave_up');
    expect(beat.pauses.reduce((sum, ms) => sum + ms, 0)).toBeLessThanOrEqual(10_000);
    expect(final.pauses.reduce((sum, ms) => sum + ms, 0)).toBeLessThanOrEqual(60_000);
    expect(final.tries.length).toBeGreaterThan(beat.tries.length);
    expect(beat.log.filter((line) => line.level === 'error').map((line) => line.msg)).toEqual(['callback_gave_up']);
    // Capped exponential: doubling from 100 ms, never above the cap.
    expect(final.pauses.slice(0, 8)).toEqual([100, 200, 400, 800, 1600, 3200, 5000, 5000]);
  });

  it('keeps an evidence upload going as long as a final event: the proof of a completion outlasts a ledger slow to record its run (was: 5 min, then the run was orphaned though it did its work — 12 false orphans in a 10,000-dispatch census whose intake was backed up)', async () => {
    // The ledger answers not_yet_recorded for ~30 s of the clock: past the 10 s budget, within the 60 s one.
    const slow = Array.from({ length: 12 }, () => ({ status: 409, code: 'not_yet_recorded' }));
    const upload = scripted(slow);
    const beat = scripted(slow);
    const outcome = await upload.client({ budgetMs: 10_000, finalBudgetMs: 60_000 }).putEvidence('http://127.0.0.1:9', 'd-1', 'd-1:1', 'out/report.md', 'x', 'text/plain');
    expect(outcome).toMatchObject({ kind: 'delivered', status: 202, tries: 13 });
    expect(upload.now()).toBeGreaterThan(10_000);
    // A heartbeat still gives up at the shorter budget: only what a completion's claim rests on waits longer.
    expect(await beat.client({ budgetMs: 10_000, finalBudgetMs: 60_000 }).postEvent('http://127.0.0.1:9', 'd-1:1', heartbeat)).toMatchObject({ kind: 'gave_up' });
  });

  it("ends every callback by the client's deadline, however late it starts (was: a control poll's own 10 s ran a short Lambda past its timeout)", async () => {
    // The bug it pins: pollControl asks with 10 s of its own, and the invocation's cap was only its
    // remaining time when the client was made, so a poll at a later heartbeat of a 5 s function went on
    // polling a ledger answering 409 past the function's timeout.
    const down = Array.from({ length: 1_000 }, () => ({ status: 409, code: 'not_yet_recorded' }));
    const late = scripted(down);
    const client = new CallbackClient({
      log: () => undefined,
      stopSignal: new AbortController().signal,
      transport: async () => ({ status: 409, text: JSON.stringify({ error: { code: 'not_yet_recorded', message: 'm' } }) }),
      now: () => late.now(),
      sleep: async (ms) => late.advance(ms),
      deadlineAt: 3_000,
    });
    late.advance(2_500);
    expect(await client.getControl('http://127.0.0.1:9', 'd-1:1', 'd-1', 10_000)).toMatchObject({ kind: 'gave_up' });
    expect(late.now()).toBeLessThanOrEqual(3_000);
    // Past the deadline: no poll at all; but a final event still has its one try (its margin is kept for it).
    late.advance(1_000);
    expect(await client.getControl('http://127.0.0.1:9', 'd-1:1', 'd-1', 10_000)).toMatchObject({ kind: 'gave_up', tries: 0 });
    expect(await client.postEvent('http://127.0.0.1:9', 'd-1:1', completed)).toMatchObject({ kind: 'gave_up', tries: 1 });
    // A poll's own bound stays within the client's budget too.
    const short = scripted(down);
    expect(await short.client({ budgetMs: 3_000 }).getControl('http://127.0.0.1:9', 'd-1:1', 'd-1', 10_000)).toMatchObject({ kind: 'gave_up' });
    expect(short.pauses.reduce((sum, ms) => sum + ms, 0)).toBeLessThanOrEqual(3_000);
    // No deadline: the poll's own 10 s stands.
    const long = scripted(down);
    expect(await long.client({ budgetMs: 300_000 }).getControl('http://127.0.0.1:9', 'd-1:1', 'd-1', 10_000)).toMatchObject({ kind: 'gave_up' });
    const waited = long.pauses.reduce((sum, ms) => sum + ms, 0);
    expect(waited).toBeGreaterThan(3_000);
    expect(waited).toBeLessThanOrEqual(10_000);
  });

  it('ends a try that outlasts the deadline at the deadline, not at its own try timeout', async () => {
    const aborted: string[] = [];
    const client = new CallbackClient({
      log: () => undefined,
      stopSignal: new AbortController().signal,
      // A ledger that never answers: only the try's signal ends it.
      transport: (_url, init) => new Promise((_resolve, reject) => init.signal.addEventListener('abort', () => { aborted.push(String((init.signal.reason as Error | undefined)?.name)); reject(init.signal.reason); })),
      retry: { tryTimeoutMs: 600_000 },
      deadlineAt: Date.now() + 200,
    });
    // Without the deadline in the try's timeout this would wait 10 minutes (the test's own bound fails it first).
    expect(await client.getControl('http://127.0.0.1:9', 'd-1:1', 'd-1', 10_000)).toMatchObject({ kind: 'gave_up' });
    expect(aborted).toEqual(['TimeoutError']);
    // An invocation's callbacks get its end less the kit's 2 s margin as their deadline: 1 s here.
    const invocation = invocationCallbacks(
      { log: () => undefined, retry: { tryTimeoutMs: 600_000 }, transport: (_url, init) => new Promise((_resolve, reject) => init.signal.addEventListener('abort', () => reject(init.signal.reason))) },
      { awsRequestId: 'req-1', getRemainingTimeInMillis: () => 3_000 },
      new AbortController().signal,
    );
    const started = Date.now();
    expect(await invocation.getControl('http://127.0.0.1:9', 'd-1:1', 'd-1', 10_000)).toMatchObject({ kind: 'gave_up' });
    // A bound, not a timing: without the deadline the try waits its own 600 s (vitest's bound fails it first).
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('names the backoff and the retryable answers in one place', () => {
    expect([1, 2, 3, 4, 10].map((tries) => backoffMs(DEFAULT_RETRY, tries))).toEqual([100, 200, 400, 800, 5000]);
    expect(isRetryable(409, 'not_yet_recorded')).toBe(true);
    expect(isRetryable(409, 'in_progress')).toBe(true);
    expect(isRetryable(409, undefined)).toBe(false);
    expect(isRetryable(502, undefined)).toBe(true);
    expect(isRetryable(400, undefined)).toBe(false);
  });

  it('encodes each ref segment on its own, so a literal % or space arrives as the ref', () => {
    expect(evidenceUrl('http://h:1/', 'd-1', 'out/my report.md', 'd-1:1')).toBe('http://h:1/dispatches/d-1/evidence/out/my%20report.md?runId=d-1%3A1');
    expect(evidenceUrl('http://h:1', 'd-1', 'a%2541/b', 'r')).toBe('http://h:1/dispatches/d-1/evidence/a%252541/b?runId=r');
  });

  it('signs every try when a signer is set, and leaves host to the connection', async () => {
    let signed = 0;
    const signer: Signer = async (request) => {
      signed += 1;
      return { ...request.headers, host: new URL(request.url).host, authorization: `test ${signed}` };
    };
    const ledger = scripted([{ status: 409, code: 'not_yet_recorded' }]);
    await ledger.client({ signer }).postEvent('http://127.0.0.1:9', 'd-1:1', heartbeat);
    expect(ledger.tries.map((sent) => sent.headers)).toEqual([
      { 'content-type': 'application/json', authorization: 'test 1' },
      { 'content-type': 'application/json', authorization: 'test 2' },
    ]);
  });
});

describe('the worker kit: sigv4Signer', () => {
  const credentials = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };

  it('signs for service lambda by default, over host, date and the body hash, as SignatureV4 verifies it', async () => {
    const sign = sigv4Signer({ region: 'eu-west-1', credentials });
    const body = '{"dispatchId":"d-1","seq":1,"type":"heartbeat"}';
    const url = 'http://127.0.0.1:4010/runs/d-1%3A1/events';
    const headers = await sign({ method: 'POST', url, headers: { 'content-type': 'application/json' }, body });

    expect(headers['host']).toBe('127.0.0.1:4010');
    expect(headers['x-amz-content-sha256']).toBe(createHash('sha256').update(body).digest('hex'));
    const authorization = headers['authorization'] ?? '';
    expect(authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/lambda\/aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date, Signature=[0-9a-f]{64}$/);

    // A verifier computing the signature from the request as received (path as sent) gets the same one.
    const date = headers['x-amz-date'] ?? '';
    const signingDate = new Date(`${date.slice(0, 4)}-${date.slice(4, 6)}-${date.slice(6, 8)}T${date.slice(9, 11)}:${date.slice(11, 13)}:${date.slice(13, 15)}Z`);
    const verifier = new SignatureV4({ service: 'lambda', region: 'eu-west-1', credentials, sha256: Hash.bind(null, 'sha256') });
    const again = await verifier.sign(
      { method: 'POST', protocol: 'http:', hostname: '127.0.0.1', port: 4010, path: '/runs/d-1%3A1/events', query: {}, headers: { 'content-type': 'application/json', host: '127.0.0.1:4010' }, body },
      { signingDate },
    );
    expect(again.headers['authorization']).toBe(authorization);
  });

  it('signs the query (runId) and a binary upload, and carries a session token', async () => {
    const sign = sigv4Signer({ region: 'us-east-1', service: 'execute-api', credentials: async () => ({ ...credentials, sessionToken: 'TOKEN' }) });
    const bytes = new Uint8Array([0, 1, 2, 255]);
    const headers = await sign({ method: 'PUT', url: 'https://api.example.com/dispatches/d-1/evidence/out/a.bin?runId=d-1%3A1', headers: { 'content-type': 'application/octet-stream' }, body: bytes });
    expect(headers['x-amz-security-token']).toBe('TOKEN');
    expect(headers['host']).toBe('api.example.com');
    expect(headers['x-amz-content-sha256']).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(headers['authorization']).toContain('/us-east-1/execute-api/aws4_request');
    expect(headers['authorization']).toContain('x-amz-security-token');
  });
});

describe('a worker stopping while a callback pauses between tries', () => {
  it('ends the pause at once, with the real abortable sleep: no try after it', async () => {
    // The pin under the demo agent's "stops retrying at once" (which had timed stop() against 500 ms): a
    // minute's pause, far past the test's bound, that only the stop signal can end.
    const stop = new AbortController();
    let tries = 0;
    const transport: Transport = async () => {
      tries += 1;
      return { status: 503, text: '' };
    };
    const log: LogLine[] = [];
    const client = new CallbackClient({ log: (line) => void log.push(line), stopSignal: stop.signal, transport, retry: { firstPauseMs: 60_000, finalBudgetMs: 600_000 } });
    const outcome = client.postEvent('http://127.0.0.1:9', 'd-1:1', completed);
    await eventually('the first try', () => (tries === 1 ? true : undefined), { intervalMs: 1 });

    stop.abort();
    expect(await outcome).toEqual({ kind: 'stopped', tries: 1 });
    expect(tries).toBe(1);
    expect(log.map((line) => line.msg)).toEqual(['callback_retry', 'callback_stopped']);
  });
});

describe('many callbacks pausing at once on one worker', () => {
  it('warns of no listener leak: each pause listens on the stop signal only while it waits (12 in flight)', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => void warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    try {
      let tries = 0;
      // Each callback's first try finds the run not yet recorded, its second is applied: every one pauses once, all at the same time.
      const transport: Transport = async () => ((tries += 1) <= 12 ? { status: 409, text: '{"error":{"code":"not_yet_recorded","message":"m"}}' } : { status: 202, text: '{"applied":true}' });
      const client = new CallbackClient({ log: () => undefined, stopSignal: new AbortController().signal, transport, retry: { firstPauseMs: 20 } });
      const outcomes = await Promise.all(Array.from({ length: 12 }, (_, index) => client.postEvent('http://127.0.0.1:9', `d-${index}:1`, { dispatchId: `d-${index}`, seq: 1, type: 'heartbeat' })));
      expect(outcomes.map((outcome) => outcome.kind)).toEqual(Array.from({ length: 12 }, () => 'delivered'));
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((warning) => warning.startsWith('MaxListenersExceededWarning'))).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
