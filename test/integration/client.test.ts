import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLedgerClient, isLedgerApiError, isLedgerConfigError, isLedgerNetworkError, isLedgerProtocolError, isLedgerValidationError, type LedgerClient } from '@dispatch-ledger/client';
import { projectRoot } from '../../local/paths.js';
import { ROUTES, type RouteName } from '@dispatch-ledger/protocol';
import { clientRoundTrip, roundTripped, stateDirOf } from '../support/client-script.js';
import { startRouteRecorder, type RouteRecorder } from '../support/route-recorder.js';
import { startFakeLedger, type FakeLedger, type PlannedAnswer } from '../support/fake-ledger.js';
import { engineClients, testEngines, uniqueName } from '../support/engines.js';
import { CreateQueueCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { eventually } from '../support/eventually.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * `@dispatch-ledger/client` (docs/protocol.md §15) against the local platform: a plain `node` ESM script
 * importing the built package (no tsx) finds the platform with `local: true` — plain, and under `--sigv4`
 * with the credentials from the state directory — and `inbox.deliver`'s settlement order, each way it can end.
 */

describe('the client on the local platform, through a recorder of the routes it calls', () => {
  let t: TestPlatform;
  let recorder: RouteRecorder;
  beforeAll(async () => {
    t = await startTestPlatform();
    recorder = await startRouteRecorder(t.platform.info.apiUrl);
  });
  afterAll(async () => {
    await recorder.stop();
    await t.stop();
  });

  // One platform per file: a second in-process platform started after the first stopped sent its
  // dispatches to the first one's demo agent (see the closing note of issue 30).
  it('from a plain node ESM script (no tsx), local: true: dispatches, checks until handled, delivers through the inbox (origin_ack), and reads a 404 as a LedgerApiError', async () => {
    const { dispatchId, printed } = await clientRoundTrip(t);
    expect(printed).toEqual(roundTripped(dispatchId));
  });

  /** A client speaking for an origin of its own (each test its own inbox), or as the operator (no origin), through the recorder. */
  const clientFor = (origin?: string): LedgerClient =>
    createLedgerClient({ ...(origin ? { origin } : {}), local: { apiUrl: recorder.url, dispatchQueueUrl: t.platform.info.dispatchQueueUrl, sqsEndpoint: t.platform.info.sqsEndpoint } });

  /** A dispatch of `ledger`'s origin whose inject result waits in its inbox. */
  async function finished(ledger: LedgerClient): Promise<string> {
    const dispatchId = uniqueName('d-deliver');
    await ledger.dispatch({ dispatchId, target: 'demo-agent', task: { behavior: 'complete' }, resultDelivery: 'inject' });
    await eventually(`the result of ${dispatchId}`, () => ledger.check(dispatchId), { until: (view) => view.result?.state === 'pending' });
    return dispatchId;
  }

  // inbox.deliver: the settlement order (seed 004).
  it('acks once, after the handler resolved', async () => {
    const ledger = clientFor(uniqueName('o'));
    const dispatchId = await finished(ledger);
    let handled = 0;
    expect(await ledger.inbox.deliver({ mode: 'inject' }, async (results) => void (handled += results.length))).toEqual({ claimed: 1, acked: 1, leaseLost: false, notAcked: [] });
    expect(handled).toBe(1);
    const view = await ledger.check(dispatchId);
    expect(view.ownerDelivery).toMatchObject({ state: 'confirmed', basis: 'origin_ack' });
    expect((view as { originAcks?: unknown[] }).originAcks).toHaveLength(1);
    expect((await ledger.inbox.claim({ mode: 'inject' })).results).toEqual([]);
  });

  it('releases every result with the error’s message when the handler throws, and rethrows it', async () => {
    const ledger = clientFor(uniqueName('o'));
    const dispatchId = await finished(ledger);
    await expect(ledger.inbox.deliver({ mode: 'inject' }, async () => Promise.reject(new Error('the transcript store is down')))).rejects.toThrow('the transcript store is down');
    expect((await ledger.check(dispatchId)).result).toMatchObject({ state: 'pending', deliveryAttempts: 1 });
    const again = await ledger.inbox.claim({ mode: 'inject' });
    expect(again.results.map((result) => result.dispatchId)).toEqual([dispatchId]);
    await ledger.inbox.ack(again.results[0]?.resultId ?? '', again.claimToken ?? '');
  });

  it('releases with any error: a blank message is sent as no reason, a long one clipped to the bound', async () => {
    // A reason, when given, is 1..500 characters and not blank, as every reason is; the client sends an
    // error's message as one only when it is a reason.
    const ledger = clientFor(uniqueName('o'));
    const dispatchId = await finished(ledger);
    await expect(ledger.inbox.deliver({ mode: 'inject' }, async () => Promise.reject(new Error('   ')))).rejects.toThrow();
    expect((await ledger.check(dispatchId)).result).toMatchObject({ state: 'pending', deliveryAttempts: 1 });
    await expect(ledger.inbox.deliver({ mode: 'inject' }, async () => Promise.reject(new Error(`down ${'\u{1f600}'.repeat(400)}`)))).rejects.toThrow();
    expect((await ledger.check(dispatchId)).result).toMatchObject({ state: 'pending', deliveryAttempts: 2 });
  });

  /** A plain node script speaking for `origin` through `local: true` (another process: it can stall or die on its own). */
  function script(origin: string, body: string) {
    const stateDir = stateDirOf(t);
    const child = spawn(process.execPath, ['--input-type=module', '--eval', `
      import { createLedgerClient } from '@dispatch-ledger/client';
      const ledger = createLedgerClient({ origin: ${JSON.stringify(origin)}, local: true });
      ${body}
    `], { cwd: projectRoot, env: { PATH: process.env['PATH'] ?? '', LEDGER_STATE_DIR: stateDir }, stdio: ['ignore', 'pipe', 'inherit'] });
    let printed = '';
    child.stdout.on('data', (chunk: Buffer) => void (printed += chunk.toString()));
    return new Promise<{ printed: string; signal: string | null }>((resolve) =>
      child.on('exit', (_code, signal) => {
        rmSync(stateDir, { recursive: true, force: true });
        resolve({ printed, signal });
      }),
    );
  }

  it('aborts the handler and acks nothing when the lease is lost; the result is claimed again', async () => {
    const origin = uniqueName('o');
    const ledger = clientFor(origin);
    const dispatchId = await finished(ledger);
    // The delivering process stalls past its 5 s lease (no renewal can run) while another claimer takes the result over.
    const delivering = script(origin, `
      let aborted = false;
      const outcome = await ledger.inbox.deliver({ mode: 'inject', leaseSeconds: 5 }, async (results, { signal }) => {
        const until = Date.now() + 8_000;
        while (Date.now() < until);
        await new Promise((resolve) => { signal.addEventListener('abort', () => { aborted = true; resolve(); }, { once: true }); setTimeout(resolve, 15_000); });
      });
      console.log(JSON.stringify({ outcome, aborted }));
    `);
    await eventually('the delivering process holds the result', () => ledger.check(dispatchId), { until: (view) => view.result?.state === 'claimed' });
    const takenOver = await eventually('the result taken over once its lease ran out', () => ledger.inbox.claim({ mode: 'inject' }), { until: (claim) => claim.results.length > 0 });
    expect(takenOver.results.map((result) => result.dispatchId)).toEqual([dispatchId]);
    const { printed } = await delivering;
    expect(JSON.parse(printed)).toEqual({ outcome: { claimed: 1, acked: 0, leaseLost: true, notAcked: [expect.any(String)] }, aborted: true });
    expect((await ledger.check(dispatchId)).ownerDelivery.state).toBe('unconfirmed');
    await ledger.inbox.ack(takenOver.results[0]?.resultId ?? '', takenOver.claimToken ?? '');
    expect((await ledger.check(dispatchId)).ownerDelivery).toMatchObject({ state: 'confirmed', basis: 'origin_ack' });
  });

  it('gives a result to the next claim exactly once when the process dies between the handler and the ack', async () => {
    const origin = uniqueName('o');
    const ledger = clientFor(origin);
    const dispatchId = await finished(ledger);
    const { printed, signal } = await script(origin, `
      await ledger.inbox.deliver({ mode: 'inject', leaseSeconds: 5 }, async (results) => {
        console.log(JSON.stringify(results.map((result) => result.dispatchId)));
        process.kill(process.pid, 'SIGKILL');
      });
    `);
    expect(signal).toBe('SIGKILL');
    expect(JSON.parse(printed)).toEqual([dispatchId]);

    const next = await eventually('the result claimable again', () => ledger.inbox.claim({ mode: 'inject' }), { until: (claim) => claim.results.length > 0 });
    expect(next.results.map((result) => result.dispatchId)).toEqual([dispatchId]);
    await ledger.inbox.ack(next.results[0]?.resultId ?? '', next.claimToken ?? '');
    expect((await ledger.inbox.claim({ mode: 'inject' })).results).toEqual([]);
    expect((await ledger.check(dispatchId)).ownerDelivery).toMatchObject({ state: 'confirmed', basis: 'origin_ack' });
  });

  it('reads and acts through every origin route: lists, approval, receipts, evidence marks, cancel, redispatch, manual attestations', async () => {
    const ledger = clientFor(uniqueName('o'));
    const handled = uniqueName('d-all');
    await ledger.dispatch({ dispatchId: handled, target: 'demo-agent', task: { behavior: 'large_result', resultBytes: 2_000 }, expectedEvidence: ['out/report.md'], resultDelivery: 'inject' });
    const done = await eventually(`${handled} handled`, () => ledger.check(handled), { until: (view) => view.evidence.outcome === 'handled' && view.result?.state === 'pending' });
    const runId = done.runId ?? '';

    const history: string[] = [];
    for await (const entry of ledger.history({ limit: 1 })) history.push(entry.dispatchId);
    expect(history).toEqual([handled]);
    expect((await ledger.history.page({ status: 'completed' })).items.map((entry) => entry.dispatchId)).toEqual([handled]);
    expect((await ledger.inbox.list.page({ state: 'pending' })).items.map((entry) => entry.resultId)).toHaveLength(1);
    const claim = await ledger.inbox.claim({ mode: 'inject' });
    const resultId = claim.results[0]?.resultId ?? '';
    expect(await ledger.inbox.renew(resultId, claim.claimToken ?? '', 30)).toMatchObject({ resultId, state: 'claimed' });
    expect(await ledger.inbox.body(resultId)).toBeDefined();
    expect(await ledger.inbox.release(resultId, claim.claimToken ?? '', 'read it later')).toMatchObject({ resultId, state: 'pending', deliveryAttempts: 1 });

    const runs: unknown[] = [];
    for await (const run of ledger.runs(handled)) runs.push(run);
    expect(runs.length).toBeGreaterThanOrEqual(1);
    expect((await ledger.receipts.list.page(handled)).items.length).toBeGreaterThanOrEqual(2);
    expect(await ledger.receipts.record(handled, { receiptId: 'rc-1', runId, kind: 'artifact_acceptance', state: 'accepted', verifiedBy: 'alice' })).toMatchObject({ receiptId: 'rc-1' });
    expect((await ledger.receipts.operator.page(handled)).items).toEqual([expect.objectContaining({ receiptId: 'rc-1' })]);
    expect(await ledger.markEvidence(handled, { ref: 'out/report.md', status: 'rejected', reason: 'the figures are wrong' })).toMatchObject({ ref: 'out/report.md', status: 'rejected' });
    const again = await ledger.redispatch(handled, { reason: 'the figures were wrong' });
    expect(again).toMatchObject({ attempt: 2 });

    const waiting = uniqueName('d-approve');
    await ledger.dispatch({ dispatchId: waiting, target: 'demo-agent', task: { behavior: 'await_approval' } });
    const pending = await eventually(`${waiting} waiting for approval`, () => ledger.check(waiting), { until: (view) => typeof (view.execution as { pendingApproval?: { approvalId?: string } }).pendingApproval?.approvalId === 'string' });
    const approvalId = (pending.execution as { pendingApproval?: { approvalId?: string } }).pendingApproval?.approvalId ?? '';
    expect(await ledger.decide(waiting, { approvalId, decision: 'approve' })).toEqual({ approvalId, decision: 'approve' });

    const slow = uniqueName('d-cancel');
    await ledger.dispatch({ dispatchId: slow, target: 'demo-agent', task: { behavior: 'slow', seconds: 60 } });
    await eventually(`${slow} running`, () => ledger.check(slow), { until: (view) => view.execution.status === 'running' });
    expect(await ledger.cancel(slow, { reason: 'no longer needed' })).toMatchObject({ dispatchId: slow });

    const desk = uniqueName('d-desk');
    await ledger.dispatch({ dispatchId: desk, target: 'desk', task: { write: 'the quarterly report' } });
    await eventually(`${desk} recorded`, () => ledger.check(desk), { until: (view) => view.dispatchId === desk });
    expect(await ledger.manual.attest(desk, { attestationId: 'ma-1', kind: 'manual_dispatch_written', note: 'Alice has the brief' })).toMatchObject({ attestationId: 'ma-1' });
    expect((await ledger.manual.list.page(desk)).items).toEqual([expect.objectContaining({ attestationId: 'ma-1' })]);
    expect((await ledger.rejections.page()).items).toEqual([]);
  });

  it('reads and acts through every operator route', async () => {
    const operator = clientFor();
    expect(await operator.operator.counts()).toMatchObject({ total: expect.any(Number) });
    expect((await operator.operator.list.page({ limit: 5 })).items.length).toBeGreaterThan(0);
    expect(Array.isArray((await operator.operator.attention.page({ limit: 5 })).items)).toBe(true);
    expect(Array.isArray((await operator.operator.rejections.page({ limit: 5 })).items)).toBe(true);
    const error = await operator.operator.releaseSlot('demo-agent', { runId: 'no-such-run', reason: 'drill' }).catch((thrown: unknown) => thrown);
    expect(isLedgerApiError(error) && [404, 409, 422].includes(error.status), String(error)).toBe(true);
  });

  it('called every entry of the route table that an origin or the operator calls (the target routes are the worker kit’s)', () => {
    const expected = (Object.keys(ROUTES) as RouteName[]).filter((name) => ROUTES[name].who.some((who) => who !== 'target'));
    expect(expected.filter((name) => !recorder.called.has(name))).toEqual([]);
    expect(expected).toHaveLength(24);
  });
});

describe('the message text on a real queue (fauxqs)', () => {
  it('sends a task with an emoji, U+FFFF and CJK as the same JSON value, in a text the queue takes (was: the local queue refused the emoji and SQS refuses U+FFFF, each a LedgerNetworkError)', async () => {
    const { sqs } = engineClients();
    const queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('client-text') }))).QueueUrl ?? '';
    const origin = createLedgerClient({ origin: 'planner', local: { apiUrl: 'http://127.0.0.1:9', dispatchQueueUrl: queueUrl, sqsEndpoint: testEngines().sqsEndpoint } });
    const task = { note: 'launch 🚀 at 東京', odd: 'x\uffffy\ufffe' };
    await origin.dispatch({ dispatchId: 'd-text', target: 't', task });
    const received = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, WaitTimeSeconds: 1 }));
    const body = received.Messages?.[0]?.Body ?? '';
    expect((JSON.parse(body) as { task: unknown }).task).toEqual(task);
    expect(body).not.toMatch(/[\ud800-\udfff\ufffe\uffff]/);
    sqs.destroy();
  });

  it('says a queue that refused the message refused it, and that sending it again as it is will not help (was: a LedgerNetworkError, "may have reached the queue")', async () => {
    const queueUrl = `${testEngines().sqsEndpoint}/000000000000/${uniqueName('no-such-queue')}`;
    const origin = createLedgerClient({ origin: 'planner', local: { apiUrl: 'http://127.0.0.1:9', dispatchQueueUrl: queueUrl, sqsEndpoint: testEngines().sqsEndpoint } });
    const error = await origin.dispatch({ dispatchId: 'd-refused', target: 't', task: {} }).catch((thrown: unknown) => thrown);
    expect(isLedgerNetworkError(error), String(error)).toBe(false);
    expect(isLedgerApiError(error) && { status: error.status, code: error.code, retryable: error.retryable }, String(error)).toEqual({ status: 400, code: 'queue_refused', retryable: false });
    expect(String(error)).toMatch(/the dispatch queue refused the message: \w*QueueDoesNotExist/);
  });
});

describe('answers and messages at the edge', () => {
  let fake: FakeLedger;
  let answer: unknown;
  let client: LedgerClient;
  /** Per test, when set: the answer to each request by its path (and a delay), as a ledger that misbehaves on purpose would give it. */
  let respond: ((path: string) => PlannedAnswer) | undefined;
  beforeAll(async () => {
    fake = await startFakeLedger((path) => respond?.(path) ?? { status: 200, body: answer });
    client = fake.client;
  });
  afterAll(() => fake.stop());

  const view = { dispatchId: 'd-1', origin: 'planner', target: 't', phase: 'submitted', attempt: 1, runId: 'r-1', execution: { status: 'running' }, evidence: { outcome: 'pending' }, ownerDelivery: { state: 'unconfirmed' }, receipts: [] };

  it('parses a newer ledger’s answer: an unknown field and an unknown enum value pass through', async () => {
    answer = { ...view, phase: 'paused_by_a_future_version', execution: { status: 'hibernating', since: 'later' }, newField: { nested: true } };
    const read = await client.check('d-1');
    expect(read).toMatchObject({ phase: 'paused_by_a_future_version', execution: { status: 'hibernating', since: 'later' }, newField: { nested: true } });
  });

  it('refuses an answer without a field every version has, as a LedgerProtocolError', async () => {
    const { dispatchId: _gone, ...rest } = view;
    answer = rest;
    const error = await client.check('d-1').catch((thrown: unknown) => thrown);
    expect(isLedgerProtocolError(error)).toBe(true);
    expect(isLedgerApiError(error)).toBe(false);
  });

  it('never sends a message the ledger would refuse', async () => {
    for (const bad of [{ dispatchId: 'has space', target: 't', task: {} }, { dispatchId: 'd-2', target: 't', task: {}, expectedEvidence: ['../secret'] }, { dispatchId: 'd-3', target: 't', task: {}, priority: 10 }]) {
      const error = await client.dispatch(bad).catch((thrown: unknown) => thrown);
      expect(isLedgerValidationError(error), JSON.stringify(bad)).toBe(true);
    }
  });

  it('checks the text it would send with the ledger’s own reader: what JSON would change or the intake would block never leaves', async () => {
    // The bug it pins: the client checked the object, then sent JSON.stringify of it — Infinity and NaN
    // went as null (another task, accepted), a "__proto__" key or a lone surrogate passed the check and
    // was blocked at the intake, and a task 20,000 levels deep threw a raw RangeError from JSON.stringify.
    let deep: Record<string, unknown> = {};
    for (let level = 0; level < 20_000; level += 1) deep = { d: deep };
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ['Infinity', { a: Number.POSITIVE_INFINITY }, /task\.a: .*not finite/],
      ['NaN', { list: [1, Number.NaN] }, /task\.list\.1: .*not finite/],
      ['a BigInt', { n: 10n }, /task\.n: .*BigInt/],
      ['a "__proto__" key', JSON.parse('{"a":1,"__proto__":{"admin":true}}') as Record<string, unknown>, /__proto__/],
      ['a lone surrogate', { text: 'broken \ud800 here' }, /lone_surrogate/],
      ['a task 20,000 levels deep', deep, /task: nests deeper than 64 levels/],
    ];
    const before = fake.seen.length;
    for (const [name, task, why] of cases) {
      const error = await client.dispatch({ dispatchId: 'd-edge', target: 't', task }).catch((thrown: unknown) => thrown);
      expect(isLedgerValidationError(error), name).toBe(true);
      expect(String(error), name).toMatch(why);
    }
    expect(fake.seen.length).toBe(before);
  });

  it('refuses a notBefore more than 30 days ahead before sending it, in the intake’s words (was: sent, then blocked invalid_fields on arrival)', async () => {
    const before = fake.seen.length;
    const far = new Date(Date.now() + 45 * 86_400_000).toISOString();
    const error = await client.dispatch({ dispatchId: 'd-later', target: 't', task: {}, notBefore: far }).catch((thrown: unknown) => thrown);
    expect(isLedgerValidationError(error)).toBe(true);
    expect(String(error)).toMatch(/notBefore: more than 30 days ahead of now \(too_far_ahead\)/);
    expect(fake.seen.length).toBe(before);
  });

  it('never sends a request the ledger would refuse, and says why in the API’s words', async () => {
    const before = fake.seen.length;
    const refusals = [
      () => client.cancel('d-1', { reason: '   ' }),
      () => client.inbox.claim({ max: 51 }),
      () => client.receipts.record('d-1', { receiptId: 'rc-1', runId: 'r-1', kind: 'owner_delivery', state: 'confirmed', verifiedBy: 'alice' }),
      () => client.history.page({ status: 'sleeping' as 'running' }),
      () => client.decide('d-1', { approvalId: 'a-1', decision: 'maybe' as 'approve' }),
    ];
    const messages: string[] = [];
    for (const refuse of refusals) {
      const error = await refuse().catch((thrown: unknown) => thrown);
      expect(isLedgerValidationError(error), String(error)).toBe(true);
      messages.push((error as Error).message);
    }
    expect(fake.seen.length).toBe(before);
    expect(messages).toEqual([
      'the ledger would refuse this body: reason: too small: at least 1 characters',
      'the ledger would refuse this body: max: too big: at most 50',
      'the ledger would refuse this body: evidenceRef: a confirmed delivery needs a non-blank evidenceRef',
      expect.stringMatching(/^the ledger would refuse this query: status: expected one of "queued", /),
      'the ledger would refuse this body: decision: expected one of "approve", "cancel"',
    ]);
  });

  it('takes no query as an empty one: raw() of a list with nothing to filter is sent', async () => {
    answer = { items: [], cursor: null };
    const before = fake.seen.length;
    expect(await client.raw('listDispatches', { as: 'operator' })).toMatchObject({ status: 200, body: { items: [] } });
    expect(await client.raw('history', { params: { origin: 'planner' } })).toMatchObject({ status: 200 });
    expect(fake.seen.length - before).toBe(2);
  });

  it('ends a call the ledger never answers after its timeout, as a LedgerNetworkError', async () => {
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const apiUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      const impatient = createLedgerClient({ origin: 'planner', timeoutMs: 200, local: { apiUrl, dispatchQueueUrl: `${apiUrl}/queue`, sqsEndpoint: apiUrl } });
      const error = await impatient.check('d-1').catch((thrown: unknown) => thrown);
      expect(isLedgerNetworkError(error), String(error)).toBe(true);
      expect(String(error)).toMatch(/timeout/i);
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it('waits out a long poll however short its timeout: a claim the ledger answers at the end of its wait reaches the caller (was: cut at timeoutMs, its results held by nobody until the lease ended)', async () => {
    const apiUrl = fake.apiUrl;
    const impatient = createLedgerClient({ origin: 'planner', timeoutMs: 200, local: { apiUrl, dispatchQueueUrl: `${apiUrl}/queue`, sqsEndpoint: apiUrl } });
    const claimed = { claimToken: 'ct-1', leaseExpiresAt: new Date(Date.now() + 60_000).toISOString(), results: [{ resultId: 'r-1', dispatchId: 'd-1', attempt: 1, deliveryAttempts: 0, execution: { status: 'completed' } }] };
    respond = () => ({ status: 200, body: claimed, delayMs: 600 });
    try {
      expect((await impatient.inbox.claim({ mode: 'inject', waitSeconds: 1 })).results).toHaveLength(1);
      expect(await impatient.raw('inboxClaim', { params: { origin: 'planner' }, body: { mode: 'inject', waitSeconds: 1 } })).toMatchObject({ status: 200 });
      // A call that waits for nothing keeps its own timeout.
      expect(isLedgerNetworkError(await impatient.inbox.claim({ mode: 'inject' }).catch((thrown: unknown) => thrown))).toBe(true);
    } finally {
      respond = undefined;
    }
  });

  it('rejects, never throws, a call that needs an origin on a client without one; reads a dispatch as the operator', async () => {
    const apiUrl = fake.apiUrl;
    const operator = createLedgerClient({ local: { apiUrl, dispatchQueueUrl: `${apiUrl}/queue`, sqsEndpoint: apiUrl } });
    let pending: Promise<unknown> | undefined;
    expect(() => {
      pending = operator.inbox.ack('r-1', 'ct-1');
    }).not.toThrow();
    expect(isLedgerConfigError(await pending?.catch((error: unknown) => error))).toBe(true);
  });

  it('takes the request id a Lambda function URL gives (x-amzn-requestid) when the ledger gives none', async () => {
    respond = () => ({ status: 404, body: { error: { code: 'not_found', message: 'no dispatch d-1' } }, headers: { 'x-amzn-requestid': 'req-lambda-1' } });
    try {
      const error = await client.check('d-1').catch((thrown: unknown) => thrown);
      expect(isLedgerApiError(error) && error.requestId).toBe('req-lambda-1');
    } finally {
      respond = undefined;
    }
  });

  it('tries the connection again after it failed: a client made before the local platform was up works once it is', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ledger-client-state-'));
    vi.stubEnv('LEDGER_STATE_DIR', dir);
    try {
      const early = createLedgerClient({ origin: 'planner', local: true });
      expect(isLedgerConfigError(await early.check('d-1').catch((error: unknown) => error))).toBe(true);
      const apiUrl = fake.apiUrl;
      writeFileSync(join(dir, 'state.json'), JSON.stringify({ status: 'ready', info: { region: 'us-east-1', apiUrl, dispatchQueueUrl: `${apiUrl}/queue`, sqsEndpoint: apiUrl } }));
      answer = { dispatchId: 'd-1', origin: 'planner', target: 't', phase: 'submitted', attempt: 1, runId: 'r-1', execution: { status: 'running' }, evidence: { outcome: 'pending' }, ownerDelivery: { state: 'unconfirmed' }, receipts: [] };
      expect((await early.check('d-1')).dispatchId).toBe('d-1');
    } finally {
      vi.unstubAllEnvs();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
