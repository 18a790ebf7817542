import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import type { DispatchView } from '../../shared/dispatch/view.js';
import { eventually, startTestPlatform, type TestPlatform } from '../support/platform.js';
import { uniqueName } from '../support/engines.js';

/** The run lifecycle on the local platform: 1 s monitor tick, second-scale timeouts, the demo agent as target. */
let t: TestPlatform;
let table: LedgerTable;

beforeAll(async () => {
  t = await startTestPlatform();
  table = new LedgerTable(DynamoDBDocumentClient.from(t.clients.dynamodb), { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
});
afterAll(() => t.stop());

const dispatch = (task: Record<string, unknown>, timeouts: Record<string, number> = { stallAfterSeconds: 2 }, overrides: Record<string, unknown> = {}) => ({
  dispatchId: uniqueName('d'),
  origin: 'planner',
  target: 'demo-agent',
  task,
  timeouts,
  ...overrides,
});

const view = (dispatchId: string, query = ''): Promise<DispatchView> => t.view(dispatchId, { query });
const viewWhen = (dispatchId: string, done: (view: DispatchView) => boolean) => t.viewWhen(dispatchId, done);

async function post(path: string, body: unknown, origin = 'planner'): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${t.platform.info.apiUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-ledger-origin': origin }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function start(message: ReturnType<typeof dispatch>): Promise<DispatchView> {
  await t.send(JSON.stringify(message));
  return viewWhen(message.dispatchId, (current) => current.phase === 'submitted');
}

interface LoggedEvent {
  readonly 'detail-type': string;
  readonly source: string;
  readonly detail: { readonly eventId: string; readonly dispatchId?: string; readonly [key: string]: unknown };
}

/** The events the local bus delivered for one dispatch, as EventBridge delivered them. */
function eventsOf(dispatchId: string): LoggedEvent[] {
  return readFileSync(t.platform.info.eventLog, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as LoggedEvent)
    .filter((event) => event.detail.dispatchId === dispatchId);
}

const eventTypesWhen = (dispatchId: string, done: (types: string[]) => boolean) =>
  eventually(`events of ${dispatchId}`, async () => {
    const types = eventsOf(dispatchId).map((event) => event['detail-type']);
    return done(types) ? types : undefined;
  });

const stats = async () => (await (await fetch(`${t.platform.demoAgent.url}/stats`)).json()) as { submissions: Record<string, number>; runs: Record<string, number> };

describe('the run lifecycle on the local platform', () => {
  it('marks a silent run unknown/stalled after looking it up, keeps what the target said, and clears the stall on a real completion', async () => {
    const message = dispatch({ behavior: 'stall' });
    const submitted = await start(message);

    const stalled = await viewWhen(message.dispatchId, (current) => current.execution.monitorStatus === 'stalled');
    expect(stalled.execution).toMatchObject({ status: 'unknown', nativeStatus: 'running', completedAt: null, result: null });
    expect(stalled.unknowns.join(' ')).toContain('stopped reporting at');
    expect(stalled.unknowns.join(' ')).toContain(`npx ledger check ${message.dispatchId} --refresh`);

    const completion = await post(`/runs/${submitted.runId}/events`, { dispatchId: message.dispatchId, seq: 50, type: 'completed', result: { summary: 'done after all' } });
    expect(completion).toEqual({ status: 202, body: { applied: true } });
    const completed = await view(message.dispatchId);
    expect(completed.execution).toMatchObject({ status: 'completed', nativeStatus: 'completed', monitorStatus: null, result: { summary: 'done after all' } });
    expect(completed.execution.completedAt).not.toBeNull();

    const types = await eventTypesWhen(message.dispatchId, (seen) => seen.includes('Result Ready'));
    expect(types.filter((type) => type === 'Run Stalled')).toHaveLength(1);
    // The completion settles the attempt (nothing expected): its result is made in the same write.
    // Accepted and submitted in one write: one Dispatch Submitted stands for both (CONTRACT §3 v2).
    expect(types).toEqual(['Dispatch Submitted', 'Run Stalled', 'Run Completed', 'Result Ready']);
    const stalledEvent = eventsOf(message.dispatchId).find((event) => event['detail-type'] === 'Run Stalled');
    expect(stalledEvent?.source).toBe('dispatch-ledger');
    expect(stalledEvent?.detail).toMatchObject({ status: 'unknown', monitorStatus: 'stalled', nativeStatus: 'running', runId: submitted.runId });
    // One eventId per state change, however the stream and the bus delivered them.
    const ids = eventsOf(message.dispatchId).map((event) => event.detail.eventId);
    expect(new Set(ids).size).toBe(types.length);
  });

  it('recovers a completion the target never reported (lose_callback) by lookup, not as a stall', async () => {
    const message = dispatch({ behavior: 'lose_callback' });
    await start(message);

    const recovered = await viewWhen(message.dispatchId, (current) => current.execution.status === 'completed');
    expect(recovered.execution.monitorStatus).toBeNull();
    expect(recovered.execution.nativeStatus).toBe('completed');
    const types = await eventTypesWhen(message.dispatchId, (seen) => seen.includes('Run Recovered'));
    expect(types).not.toContain('Run Stalled');
  });

  it('makes a vanished run and an unreachable lookup unknown (target_not_found, lookup_unavailable), never failed', async () => {
    const vanish = dispatch({ behavior: 'vanish' });
    const unavailable = dispatch({ behavior: 'lookup_unavailable' });
    await Promise.all([start(vanish), start(unavailable)]);

    const [gone, dark] = await Promise.all([
      viewWhen(vanish.dispatchId, (current) => current.execution.monitorStatus === 'target_not_found'),
      viewWhen(unavailable.dispatchId, (current) => current.execution.monitorStatus === 'lookup_unavailable'),
    ]);
    expect(gone.execution.status).toBe('unknown');
    expect(dark.execution.status).toBe('unknown');
    expect(gone.execution.nativeStatus).not.toBe('failed');
    expect(dark.execution.nativeStatus).not.toBe('failed');
    await eventTypesWhen(vanish.dispatchId, (seen) => seen.includes('Run Unobservable'));
    await eventTypesWhen(unavailable.dispatchId, (seen) => seen.includes('Run Unobservable'));
    const reasons = [vanish, unavailable].map((sent) => eventsOf(sent.dispatchId).find((event) => event['detail-type'] === 'Run Unobservable')?.detail.reason);
    expect(reasons).toEqual(['target_not_found', 'lookup_unavailable']);
    expect([...eventsOf(vanish.dispatchId), ...eventsOf(unavailable.dispatchId)].map((event) => event['detail-type'])).not.toContain('Run Failed');
  });

  it('expires an approval wait but leaves the approval pending; approve completes, cancel cancels, a wrong approvalId is 409', async () => {
    const approve = dispatch({ behavior: 'await_approval' }, { approvalWaitSeconds: 1, stallAfterSeconds: 30 });
    const cancel = dispatch({ behavior: 'await_approval' }, { approvalWaitSeconds: 30, stallAfterSeconds: 30 });
    await Promise.all([start(approve), start(cancel)]);

    const expired = await viewWhen(approve.dispatchId, (current) => current.execution.monitorStatus === 'approval_wait_expired');
    await eventTypesWhen(approve.dispatchId, (seen) => seen.includes('Approval Requested') && seen.includes('Approval Wait Expired'));
    expect(expired.execution.status).toBe('waiting_for_approval');
    const pending = expired.execution.pendingApproval;
    expect(pending?.approvalId).toBeTruthy();

    expect((await post(`/dispatches/${approve.dispatchId}/approval`, { approvalId: 'not-it', decision: 'approve' })).status).toBe(409);
    expect((await post(`/dispatches/${approve.dispatchId}/approval`, { approvalId: pending?.approvalId, decision: 'approve' })).status).toBe(200);
    const done = await viewWhen(approve.dispatchId, (current) => current.execution.status === 'completed');
    expect(done.execution.pendingApproval).toBeNull();

    const waiting = await viewWhen(cancel.dispatchId, (current) => current.execution.status === 'waiting_for_approval');
    expect((await post(`/dispatches/${cancel.dispatchId}/approval`, { approvalId: waiting.execution.pendingApproval?.approvalId, decision: 'cancel' })).status).toBe(200);
    await viewWhen(cancel.dispatchId, (current) => current.execution.status === 'cancelled');
  });

  it('answers 502 and records nothing when the target cannot be reached for an approval', async () => {
    const message = dispatch({ behavior: 'await_approval' }, { approvalWaitSeconds: 30, stallAfterSeconds: 30 });
    await start(message);
    const waiting = await viewWhen(message.dispatchId, (current) => current.execution.status === 'waiting_for_approval');
    await table.putTarget({ name: 'demo-agent', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
    try {
      const answer = await post(`/dispatches/${message.dispatchId}/approval`, { approvalId: waiting.execution.pendingApproval?.approvalId, decision: 'approve' });
      expect(answer.status).toBe(502);
      expect((await view(message.dispatchId)).execution.pendingApproval).toEqual(waiting.execution.pendingApproval);
    } finally {
      await table.putTarget({ name: 'demo-agent', kind: 'http', baseUrl: t.platform.demoAgent.url });
    }
  });

  it('never marks a slow run with steady heartbeats as stalled', async () => {
    const message = dispatch({ behavior: 'slow', seconds: 5 }, { stallAfterSeconds: 2 });
    await start(message);
    const seen = new Set<string | null>();
    const done = await viewWhen(message.dispatchId, (current) => {
      seen.add(current.execution.monitorStatus);
      return current.execution.status === 'completed';
    });
    expect(done.execution.status).toBe('completed');
    expect([...seen]).toEqual([null]);
  });

  it('refuses to redispatch a stalled run without force (409 + run handle); force supersedes, cancels, fences the old run', async () => {
    const message = dispatch({ behavior: 'stall' });
    const first = await start(message);
    await viewWhen(message.dispatchId, (current) => current.execution.monitorStatus === 'stalled');

    const refused = await post(`/dispatches/${message.dispatchId}/redispatch`, { reason: 'no news' });
    expect(refused.status).toBe(409);
    expect((refused.body.error as { details: { runId: string } }).details.runId).toBe(first.runId);

    const forced = await post(`/dispatches/${message.dispatchId}/redispatch`, { reason: 'operator: run is wedged', force: true });
    expect(forced.status).toBe(202);
    expect(forced.body).toMatchObject({ attempt: 2, supersededRunId: first.runId, cancel: 'cancelled (cancelled)' });
    const second = await view(message.dispatchId);
    expect(second.runId).not.toBe(first.runId);
    expect(second.attempt).toBe(2);

    const late = await post(`/runs/${first.runId}/events`, { dispatchId: message.dispatchId, seq: 99, type: 'completed' });
    expect(late).toEqual({ status: 200, body: { applied: false, late: true } });
    const after = await view(message.dispatchId);
    expect(after.runId).toBe(second.runId);
    expect(after.execution.status).not.toBe('completed');
    expect((await stats()).runs[message.dispatchId]).toBe(2);
    const superseded = await eventTypesWhen(message.dispatchId, (seen) => seen.includes('Run Superseded') && seen.filter((type) => type === 'Dispatch Submitted').length === 2);
    expect(superseded.filter((type) => type === 'Dispatch Submitted')).toHaveLength(2);
    expect(eventsOf(message.dispatchId).find((event) => event['detail-type'] === 'Run Superseded')?.detail.runId).toBe(first.runId);
    expect((await post(`/runs/r-not-a-run/events`, { dispatchId: message.dispatchId, seq: 1, type: 'heartbeat' })).status).toBe(404);
  });

  it('submits a blocked dispatch redispatched without force once its cause is gone', async () => {
    const message = dispatch({ behavior: 'complete' }, { stallAfterSeconds: 30 }, { target: uniqueName('later') });
    await t.send(JSON.stringify(message));
    await viewWhen(message.dispatchId, (current) => current.phase === 'blocked');
    await table.putTarget({ name: message.target, kind: 'http', baseUrl: t.platform.demoAgent.url });

    const answer = await post(`/dispatches/${message.dispatchId}/redispatch`, { reason: 'target registered now' });

    expect(answer.status).toBe(202);
    const submitted = await view(message.dispatchId);
    expect(submitted.phase).toBe('submitted');
    expect(submitted.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written', 'dispatch_blocked', 'dispatch_submitted']);
  });

  it('refuses to redispatch a dispatch blocked by its hop budget, before any target contact (regression)', async () => {
    const parent = dispatch({ behavior: 'stall' }, { stallAfterSeconds: 60 }, { maxHops: 1 });
    await start(parent);
    const child = dispatch({ behavior: 'stall' }, { stallAfterSeconds: 60 }, { parentDispatchId: parent.dispatchId });
    await start(child);
    const grandchild = dispatch({ behavior: 'complete' }, { stallAfterSeconds: 60 }, { parentDispatchId: child.dispatchId });
    await t.send(JSON.stringify(grandchild));
    await viewWhen(grandchild.dispatchId, (current) => current.phase === 'blocked');

    const answer = await post(`/dispatches/${grandchild.dispatchId}/redispatch`, { reason: 'try anyway' });

    expect(answer.status).toBe(422);
    expect((await stats()).submissions[grandchild.dispatchId]).toBeUndefined();
  });

  it('leaves the final state at the highest seq whatever the order and repetition of run events', async () => {
    const message = dispatch({ behavior: 'stall' }, { stallAfterSeconds: 60 });
    const submitted = await start(message);
    const events = `/runs/${submitted.runId}/events`;
    const send = (seq: number, type: string, extra: Record<string, unknown> = {}) => post(events, { dispatchId: message.dispatchId, seq, type, ...extra });

    expect((await send(5, 'approval_requested', { approvalId: 'a-5' })).status).toBe(202);
    expect((await send(4, 'heartbeat')).body).toEqual({ applied: false });
    expect((await send(5, 'approval_requested', { approvalId: 'a-5' })).body).toEqual({ applied: false });
    expect((await send(7, 'completed', { result: { summary: 'seven' } })).status).toBe(202);
    expect((await send(6, 'failed')).body).toEqual({ applied: false });
    expect((await send(8, 'cancelled')).body).toEqual({ applied: false }); // terminal is final

    const final = await view(message.dispatchId);
    expect(final.execution).toMatchObject({ status: 'completed', result: { summary: 'seven' }, pendingApproval: null });
    expect((await post(events, { dispatchId: message.dispatchId, seq: -1, type: 'heartbeat' })).status).toBe(422);
    expect((await post(events, { dispatchId: message.dispatchId, seq: 2 ** 53 + 2, type: 'heartbeat' })).status).toBe(422);
  });

  it("keeps a final event's own nativeStatus as the view's and the event's nativeStatus, and refuses one that is malformed or on a non-final event (CONTRACT V3 §2)", async () => {
    const message = dispatch({ behavior: 'stall' }, { stallAfterSeconds: 60 });
    const submitted = await start(message);
    const events = `/runs/${submitted.runId}/events`;
    const send = (seq: number, type: string, extra: Record<string, unknown> = {}) => post(events, { dispatchId: message.dispatchId, seq, type, ...extra });

    for (const nativeStatus of ['', 'x'.repeat(65), 'worker restarted', 'naïve', 7]) {
      const refused = await send(5, 'failed', { nativeStatus });
      expect(refused.status, JSON.stringify(nativeStatus)).toBe(422);
      expect(refused.body['error']).toMatchObject({ code: 'invalid', details: [{ field: 'nativeStatus' }] });
    }
    const onHeartbeat = await send(5, 'heartbeat', { nativeStatus: 'worker_restarted' });
    expect(onHeartbeat).toMatchObject({ status: 422, body: { error: { message: 'nativeStatus is only for a final event (completed, failed, cancelled), not heartbeat' } } });
    expect((await view(message.dispatchId)).execution.status).toBe('running');

    expect((await send(6, 'failed', { nativeStatus: 'worker_restarted', result: { summary: 'the worker restarted' } })).status).toBe(202);
    const failed = await view(message.dispatchId);
    expect(failed.execution).toMatchObject({ status: 'failed', nativeStatus: 'worker_restarted', result: { summary: 'the worker restarted' } });
    expect(failed.runs.at(-1)).toMatchObject({ status: 'failed', nativeStatus: 'worker_restarted' });
    const runFailed = await eventually('Run Failed on the bus', async () => eventsOf(message.dispatchId).find((event) => event['detail-type'] === 'Run Failed'));
    expect(runFailed.detail['nativeStatus']).toBe('worker_restarted');
  });

  it('looks the run up live on ?refresh=true and answers with the stored view when the target cannot be reached', async () => {
    const message = dispatch({ behavior: 'lose_callback' }, { stallAfterSeconds: 60 });
    await start(message);
    const live = await eventually('the lost completion to be found by refresh', async () => {
      const current = await view(message.dispatchId, '?refresh=true');
      return current.execution.status === 'completed' ? current : undefined;
    });
    expect(live.execution.nativeStatus).toBe('completed');

    const dark = dispatch({ behavior: 'lookup_unavailable' }, { stallAfterSeconds: 60 });
    await start(dark);
    const stored = await view(dark.dispatchId, '?refresh=true');
    expect(stored.execution).toMatchObject({ status: 'unknown', monitorStatus: 'lookup_unavailable' });
    // Within its activity window one failed lookup is reported, not recorded (regression: a single 503
    // on refresh persisted unknown and published Run Unobservable for a healthy run).
    expect((await table.getState(dark.dispatchId))?.execution.monitorStatus).toBeNull();
    expect(stored.unknowns.join(' ')).toContain('could not be asked');
  });

  it("brings a callback dispatch's result back to its origin once: claimed, acked twice, one Result Ready and one Result Delivered on the bus, delivery confirmed by the origin beside an operator's attestation", async () => {
    const origin = uniqueName('inbox').replace(/[^a-z0-9-]/g, '');
    const message = dispatch({ behavior: 'complete', goal: 'review the plan' }, { stallAfterSeconds: 30 }, { origin, delivery: { mode: 'callback' } });
    await t.send(JSON.stringify(message));
    await t.viewWhen(message.dispatchId, (current) => current.execution.status === 'completed', { origin });
    const claimed = await post(`/origins/${origin}/inbox/claim`, { mode: 'after_turn', waitSeconds: 10 }, origin);
    expect(claimed.status).toBe(200);
    const [result] = claimed.body.results as Array<{ resultId: string; dispatchId: string; runId: string }>;
    expect(result?.dispatchId).toBe(message.dispatchId);
    const ack = { claimToken: claimed.body.claimToken };
    const path = `/origins/${origin}/inbox/${encodeURIComponent(result?.resultId ?? '')}/ack`;
    expect((await post(path, ack, origin)).status).toBe(200);
    expect((await post(path, ack, origin)).status).toBe(200);
    // An operator may still attest delivery: shown apart, as what it is.
    const attested = await post(`/dispatches/${message.dispatchId}/receipts`, { receiptId: 'rc-delivery', runId: result?.runId, kind: 'owner_delivery', state: 'confirmed', evidenceRef: 'out/handoff.md', verifiedBy: 'ops' }, origin);
    expect(attested.status).toBe(201);
    const types = await eventTypesWhen(message.dispatchId, (seen) => seen.includes('Result Delivered') && seen.includes('Receipt Recorded'));
    expect(types.filter((type) => type === 'Result Ready')).toHaveLength(1);
    expect(types.filter((type) => type === 'Result Delivered')).toHaveLength(1);
    const seen = await t.view(message.dispatchId, { origin });
    expect(seen.ownerDelivery).toMatchObject({ state: 'confirmed', basis: 'origin_ack', receiptId: `ack:${result?.resultId ?? ''}` });
    expect(seen.originAcks).toHaveLength(1);
    expect(seen.operatorReceipts).toMatchObject([{ receiptId: 'rc-delivery', basis: 'operator_attestation' }]);
  });
});
