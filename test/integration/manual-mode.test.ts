import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { LedgerTable } from '../../shared/adapters/ledger-table.js';
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
async function manualDispatch(extra: Record<string, unknown> = {}): Promise<DispatchView> {
  const dispatchId = uniqueName('d-man');
  await t.send(JSON.stringify({ dispatchId, origin: 'planner', target: MANUAL_DESK_TARGET, task: { goal: 'file the quarterly report by hand' }, ...extra }));
  return t.viewWhen(dispatchId, (view) => view.submission.waitingFor === 'person');
}

describe('manual mode on the local platform', () => {
  it('records a dispatch to a manual target and never submits it: no target call, nothing due, no stall across several monitor ticks', async () => {
    const waiting = await manualDispatch({ timeouts: { stallAfterSeconds: 1 } });
    const ticks = t.platform.scheduler.ticks;
    await eventually('four more monitor ticks', async () => (t.platform.scheduler.ticks >= ticks + 4 ? true : undefined), { timeoutMs: 30_000 });

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
});
