import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { manualAttestationPut } from '../../shared/adapters/ledger-commands.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { manualAttestation } from '../../shared/dispatch/manual.js';
import type { DispatchView } from '../../shared/dispatch/view.js';
import { MANUAL_DESK_TARGET } from '../../local/platform.js';
import { uniqueName } from '../support/engines.js';
import { eventually, startTestPlatform, type TestPlatform } from '../support/platform.js';

/** Manual mode (CONTRACT §13) on the local platform: the `desk` target, the attestation route, the gate. */
let t: TestPlatform;
let table: LedgerTable;

beforeAll(async () => {
  t = await startTestPlatform();
  table = new LedgerTable(DynamoDBDocumentClient.from(t.clients.dynamodb), { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
});
afterAll(() => t.stop());

/** POST as an origin (X-Ledger-Origin), or as the local operator (no header). */
async function post(path: string, body: unknown, origin: string | null = 'planner'): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${t.platform.info.apiUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(origin ? { 'x-ledger-origin': origin } : {}) },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}
const attest = (dispatchId: string, body: unknown, origin: string | null = 'planner') => post(`/dispatches/${dispatchId}/manual`, body, origin);

async function stats(): Promise<{ submissions: Record<string, number>; runs: Record<string, number> }> {
  return (await (await fetch(`${t.platform.info.demoAgentUrl}/stats`)).json()) as { submissions: Record<string, number>; runs: Record<string, number> };
}

/** A dispatch to the manual `desk`, once the ledger has recorded it waiting for a person. */
async function manualDispatch(extra: Record<string, unknown> = {}, target = MANUAL_DESK_TARGET): Promise<DispatchView> {
  const dispatchId = uniqueName('d-man');
  await t.send(JSON.stringify({ dispatchId, origin: 'planner', target, task: { goal: 'file the quarterly report by hand' }, ...extra }));
  return t.viewWhen(dispatchId, (view) => view.submission.waitingFor === 'person');
}

describe('manual mode on the local platform', () => {
  it('records a dispatch to a manual target and never submits it: no target call, nothing due, no stall across several monitor ticks', async () => {
    const waiting = await manualDispatch({ timeouts: { stallAfterSeconds: 1 } });
    const ticks = t.platform.scheduler.ticks;
    await eventually('four more monitor ticks', async () => (t.platform.scheduler.ticks >= ticks + 4 ? true : undefined));

    const after = await t.view(waiting.dispatchId);
    expect(after).toMatchObject({ phase: 'accepted', runId: null, submission: { attempts: 0, waitingFor: 'person' }, execution: { status: null, monitorStatus: null } });
    expect(after.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written']);
    expect(after.unknowns.join(' ')).toContain('waits for a person');
    expect(after.unknowns.join(' ')).toContain(`npx ledger manual ${waiting.dispatchId}`);
    expect(after.gate.satisfied).toBe(false);
    // Not in the due index at all: the monitor has nothing to look at.
    expect((await table.getState(waiting.dispatchId))?.dueAt).toBeNull();
    const seen = await stats();
    expect(seen.submissions[waiting.dispatchId]).toBeUndefined();
    expect(seen.runs[waiting.dispatchId]).toBeUndefined();
  });

  it('answers 201 new, 200 identical retry, 409 changed, 422 unsafe ref, 404 for another origin, and lets the operator attest', async () => {
    const { dispatchId } = await manualDispatch();
    const body = { attestationId: 'ma-written', kind: 'manual_dispatch_written', note: 'handed to Alice at the desk', evidenceRef: 'notes/handover.md' };

    const first = await attest(dispatchId, body);
    const retry = await attest(dispatchId, body);
    const changed = await attest(dispatchId, { ...body, note: 'handed to Bob' });
    const unsafe = await attest(dispatchId, { ...body, attestationId: 'ma-unsafe', evidenceRef: '../etc/passwd' });
    const stranger = await attest(dispatchId, { ...body, attestationId: 'ma-other' }, 'someone-else');
    const operator = await attest(dispatchId, { attestationId: 'ma-op', kind: 'manual_delivery_attested', note: 'Alice confirmed she got it' }, null);

    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ attestationId: 'ma-written', dispatchId, origin: 'planner', attempt: 1, kind: 'manual_dispatch_written', basis: 'manual_attestation', recordedBy: 'local:planner', evidenceRef: 'notes/handover.md' });
    expect(retry).toEqual({ status: 200, body: first.body });
    expect(changed.status).toBe(409);
    expect(unsafe.status).toBe(422);
    expect(stranger.status).toBe(404);
    expect(operator.status).toBe(201);
    expect(operator.body).toMatchObject({ recordedBy: 'local:operator', basis: 'manual_attestation' });

    const view = await t.view(dispatchId);
    expect(view.manualAttestations.map((attestation) => [attestation.attestationId, attestation.basis])).toEqual([
      ['ma-written', 'manual_attestation'],
      ['ma-op', 'manual_attestation'],
    ]);
    // Delivery attested by a person: confirmed on that basis; never a receipt, never acceptance.
    expect(view.ownerDelivery).toMatchObject({ state: 'confirmed', receiptId: 'ma-op', basis: 'manual_attestation' });
    expect(view.artifactAcceptance.state).toBe('unverified');
    expect(view.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written']);
    expect(view.gate.satisfied).toBe(false);
  });

  it('satisfies the gate of a manual dispatch on manual_result_attested, saying it rests on a person, with no runtime receipt written', async () => {
    const { dispatchId } = await manualDispatch();
    const recorded = await attest(dispatchId, { attestationId: 'ma-result', kind: 'manual_result_attested', note: 'report filed by hand', evidenceRef: 'out/report.md' });
    expect(recorded.status).toBe(201);

    const view = await t.view(dispatchId);
    expect(view.gate.satisfied).toBe(true);
    expect(view.gate.reasons.join(' ')).toContain("rests on a person's attestation");
    expect(view.phase).toBe('accepted');
    expect(view.submission.waitingFor).toBeNull();
    expect(view.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written']);
    expect(view.unknowns.join(' ')).not.toContain('waits for a person');
    // A second result under another id is refused: the first stands.
    expect((await attest(dispatchId, { attestationId: 'ma-result-2', kind: 'manual_result_attested', note: 'again' })).status).toBe(409);
    expect((await stats()).submissions[dispatchId]).toBeUndefined();
  });

  it('ends a manual dispatch blocked with the person\'s reason on manual_blocked', async () => {
    const { dispatchId } = await manualDispatch();
    expect((await attest(dispatchId, { attestationId: 'ma-block', kind: 'manual_blocked', note: 'the desk has no access to the archive' })).status).toBe(201);
    const view = await t.view(dispatchId);
    expect(view.phase).toBe('blocked');
    expect(view.blockedReason).toBe('manual_blocked: the desk has no access to the archive');
    expect(view.gate.satisfied).toBe(false);
    // Its identical retry still answers 200 with the stored attestation.
    expect((await attest(dispatchId, { attestationId: 'ma-block', kind: 'manual_blocked', note: 'the desk has no access to the archive' })).status).toBe(200);
  });

  it('refuses an attestation for an http target with 422 and leaves its gate as it was', async () => {
    const dispatchId = uniqueName('d-man-http');
    await t.send(JSON.stringify({ dispatchId, origin: 'planner', target: 'demo-agent', task: { behavior: 'await_approval' } }));
    const before = await t.viewWhen(dispatchId, (view) => view.execution.pendingApproval !== null);
    const refused = await attest(dispatchId, { attestationId: 'ma-http', kind: 'manual_result_attested', note: 'it is done, trust me' });
    expect(refused.status).toBe(422);
    const after = await t.view(dispatchId);
    expect(after.gate).toEqual(before.gate);
    expect(after.gate.satisfied).toBe(false);
    expect(after.manualAttestations).toEqual([]);
    expect(await table.listManualAttestations(dispatchId)).toEqual([]);
  });

  it('answers 409 to a cancel once the result is attested (it is over), and its gate stays as the attestation left it', async () => {
    const { dispatchId } = await manualDispatch();
    expect((await attest(dispatchId, { attestationId: 'ma-done', kind: 'manual_result_attested', note: 'filed by hand' })).status).toBe(201);
    const cancel = await post(`/dispatches/${dispatchId}/cancel`, { reason: 'changed my mind' });
    expect(cancel.status).toBe(409);
    const view = await t.view(dispatchId);
    expect(view.phase).toBe('accepted');
    expect(view.gate.satisfied).toBe(true);
  });

  it('refuses a manual_blocked once the result is attested', async () => {
    const { dispatchId } = await manualDispatch();
    expect((await attest(dispatchId, { attestationId: 'ma-done', kind: 'manual_result_attested', note: 'filed by hand' })).status).toBe(201);
    expect((await attest(dispatchId, { attestationId: 'ma-late-block', kind: 'manual_blocked', note: 'cannot after all' })).status).toBe(409);
    expect((await t.view(dispatchId)).phase).toBe('accepted');
    expect((await table.listManualAttestations(dispatchId)).map((stored) => stored.attestationId)).toEqual(['ma-done']);
  });

  it('ties attestations to the round: after manual_blocked and a redispatch, the old ones neither confirm delivery nor block again', async () => {
    const { dispatchId } = await manualDispatch();
    const block = { attestationId: 'ma-block-1', kind: 'manual_blocked', note: 'no access to the archive' };
    expect((await attest(dispatchId, { attestationId: 'ma-delivered-1', kind: 'manual_delivery_attested', note: 'Alice has it' })).status).toBe(201);
    expect((await attest(dispatchId, block)).status).toBe(201);
    expect((await post(`/dispatches/${dispatchId}/redispatch`, { reason: 'access granted' })).status).toBe(202);
    const again = await t.viewWhen(dispatchId, (view) => view.submission.waitingFor === 'person');
    expect(again.attempt).toBe(2);
    expect(again.ownerDelivery.state).toBe('unconfirmed');
    expect(again.manualAttestations.map((attestation) => [attestation.attestationId, attestation.attempt])).toEqual([
      ['ma-delivered-1', 1],
      ['ma-block-1', 1],
    ]);
    // The identical retry of the first round's block does not block the second round.
    expect((await attest(dispatchId, block)).status).toBe(409);
    expect((await t.view(dispatchId)).phase).toBe('accepted');
    // This round's own attestations count.
    expect((await attest(dispatchId, { attestationId: 'ma-delivered-2', kind: 'manual_delivery_attested', note: 'Alice has it again' })).status).toBe(201);
    expect((await t.view(dispatchId)).ownerDelivery).toMatchObject({ state: 'confirmed', receiptId: 'ma-delivered-2' });
  });

  it('decides manual-ness from the registry: a target re-registered as http takes no attestation after the redispatch, and its gate is an http gate', async () => {
    const target = uniqueName('desk');
    await table.putTarget({ name: target, kind: 'manual' });
    const { dispatchId } = await manualDispatch({}, target);
    expect((await attest(dispatchId, { attestationId: 'ma-block', kind: 'manual_blocked', note: 'this needs the agent after all' })).status).toBe(201);
    await table.putTarget({ name: target, kind: 'http', baseUrl: t.platform.info.demoAgentUrl });
    expect((await post(`/dispatches/${dispatchId}/redispatch`, { reason: 'the agent does it now' })).status).toBe(202);
    const submitted = await t.viewWhen(dispatchId, (view) => view.runId !== null);
    expect((await table.getState(dispatchId))?.manual).toBeUndefined();
    expect(submitted.submission.waitingFor).toBeNull();
    const refused = await attest(dispatchId, { attestationId: 'ma-delivered', kind: 'manual_delivery_attested', note: 'Alice has it' });
    expect(refused.status).toBe(422);
    const view = await t.view(dispatchId);
    expect(view.ownerDelivery.basis).not.toBe('manual_attestation');
    expect(view.gate.reasons.join(' ')).not.toMatch(/manual_result_attested|waiting for a person/);
  });

  it('answers 409 to the retry of a result attestation that lost the race, though its item is stored', async () => {
    const { dispatchId } = await manualDispatch();
    const state = await table.getState(dispatchId);
    if (!state) throw new Error('no state');
    // The loser of two result attestations at once: its item was stored, its transition was not.
    const loser = { attestationId: 'ma-loser', kind: 'manual_result_attested' as const, note: 'I did it' };
    expect((await table.putManualAttestation(manualAttestation(state, loser, new Date(), 'local:planner'))).kind).toBe('written');
    expect((await attest(dispatchId, { attestationId: 'ma-winner', kind: 'manual_result_attested', note: 'no, I did' })).status).toBe(201);
    const retry = await attest(dispatchId, loser);
    expect(retry.status).toBe(409);
    expect(retry.body).toMatchObject({ error: { code: 'conflict' } });
    expect((await t.view(dispatchId)).gate.reasons.join(' ')).toContain('ma-winner');
  });

  it('pages the attestations like the other lists: the newest 50 in the view, the rest behind a cursor', async () => {
    const { dispatchId } = await manualDispatch();
    for (let index = 0; index < 52; index += 1) {
      expect((await attest(dispatchId, { attestationId: `ma-${String(index).padStart(2, '0')}`, kind: 'manual_dispatch_written', note: `handover ${index}` })).status).toBe(201);
    }
    const view = (await t.get(`/dispatches/${dispatchId}`, 'planner')).body as DispatchView & { more: Record<string, string | null> };
    expect(view.manualAttestations).toHaveLength(50);
    expect(typeof view.more.manualAttestations).toBe('string');
    const older = await t.get(`/dispatches/${dispatchId}/manual-attestations?cursor=${view.more.manualAttestations ?? ''}`, 'planner');
    expect(older.status).toBe(200);
    expect((older.body as { items: Array<{ attestationId: string }>; cursor: string | null }).items).toHaveLength(2);
    expect((older.body as { cursor: string | null }).cursor).toBeNull();
    expect((await t.get(`/dispatches/${dispatchId}/manual-attestations?cursor=bogus`, 'planner')).status).toBe(400);
    expect((await t.get(`/dispatches/${dispatchId}/manual-attestations`, 'someone-else')).status).toBe(404);
  });

  it('reports an attestation item that fails its schema as an audit failure, on read and on retry', async () => {
    const { dispatchId } = await manualDispatch();
    const state = await table.getState(dispatchId);
    if (!state) throw new Error('no state');
    const body = { attestationId: 'ma-tampered', kind: 'manual_result_attested' as const, note: 'filed by hand' };
    const put = manualAttestationPut(t.platform.resources.ledgerTable, manualAttestation(state, body, new Date(), 'local:planner'), 86_400);
    await DynamoDBDocumentClient.from(t.clients.dynamodb).send(new PutCommand({ TableName: put.TableName, Item: { ...put.Item, kind: 'manual_delivery_attested' } }));
    const read = await t.get(`/dispatches/${dispatchId}`, 'planner');
    expect(read.status).toBe(500);
    expect(read.body).toMatchObject({ error: { code: 'audit_failure' } });
    const retry = await attest(dispatchId, body);
    expect(retry.body).toMatchObject({ error: { code: 'audit_failure' } });
    expect((await table.getState(dispatchId))?.phase).toBe('accepted');
    expect((await table.getState(dispatchId))?.manual?.resultAttestation).toBeUndefined();
  });

  it('validates the history status filter against the execution statuses and phases', async () => {
    expect((await t.get('/origins/planner/dispatches?status=bogus', 'planner')).status).toBe(400);
    expect((await t.get('/origins/planner/dispatches?status=blocked', 'planner')).status).toBe(200);
    expect((await t.get('/origins/planner/dispatches?status=unknown&limit=5', 'planner')).status).toBe(200);
  });
});
