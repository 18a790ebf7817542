import { describe, expect, it } from 'vitest';
import { ManualAttestationBody, manualAttestation, type ManualAttestation, type ManualAttestationBody as Body } from '../../shared/dispatch/manual.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { stateOnly, type DispatchState, type NextState } from '../../shared/dispatch/state.js';
import { awaitingPerson, manuallyBlocked, manualResultAttested } from '../../shared/dispatch/transitions/manual.js';
import { accepted, redispatched, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { assertLegal, IllegalTransitionError } from '../../shared/dispatch/transitions/legal.js';
import { dispatchView, type DispatchView } from '../../shared/dispatch/view.js';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { CorruptItemError } from '../../shared/adapters/ledger-items.js';
import { expiryOf } from '../../shared/adapters/item-codec.js';
import { manualAttestationOf } from '../../shared/adapters/ledger-table.js';
import { manualAttestationPut } from '../../shared/adapters/ledger-commands.js';
import { commandsFor } from '../../ui/page/words.js';
import { proxyDecision } from '../../ui/routes.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

// Manual mode (CONTRACT §13, VALP): a person's attestations are shown apart from runtime proof, and the
// gate accepts manual_result_attested only for a manual target.

const LATER = new Date(NOW.getTime() + 60_000);

/** A dispatch to a manual target as the submission path leaves it: stored, waiting for a person. */
const waitingState = (): DispatchState => stateOnly(awaitingPerson(accepted(newDispatchFactory({ target: 'desk' }), NOW), NOW));

function attestationFactory(kind: Body['kind'], overrides: Partial<Body> = {}, state: DispatchState = waitingState()): ManualAttestation {
  return manualAttestation(state, { attestationId: `ma-${kind}`, kind, note: 'done by hand at the desk', ...overrides }, LATER, 'local:planner');
}

const resultAttestedState = (attestation: ManualAttestation): NextState =>
  manualResultAttested(waitingState(), { attestationId: attestation.attestationId, at: attestation.recordedAt }, LATER);

describe('manual dispatch transitions', () => {
  it('records a dispatch to a manual target as waiting for a person with nothing due', () => {
    const state = awaitingPerson(accepted(newDispatchFactory({ target: 'desk' }), NOW), NOW);
    expect(state).toMatchObject({ phase: 'accepted', waitingFor: 'person', dueAt: null, runId: null, manual: { since: NOW.toISOString() } });
    expect(state.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written']);
  });

  it('ends the wait on manual_result_attested without writing any dispatch receipt', () => {
    const next = resultAttestedState(attestationFactory('manual_result_attested'));
    expect(() => assertLegal(waitingState(), next)).not.toThrow();
    expect(next).toMatchObject({ phase: 'accepted', waitingFor: undefined, dueAt: null, manual: { resultAttestation: { attestationId: 'ma-manual_result_attested' } } });
    expect(next.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written']);
  });

  it('blocks with the person\'s reason on manual_blocked', () => {
    const next = manuallyBlocked(waitingState(), { attestationId: 'ma-block', at: LATER.toISOString(), note: 'no access to the archive' }, LATER);
    expect(next).toMatchObject({ phase: 'blocked', blockedCode: 'manual_blocked', blockedReason: 'manual_blocked: no access to the archive', manual: { blockAttestation: { attestationId: 'ma-block' } } });
  });

  it('starts a new attempt when a manual dispatch is redispatched, and forgets that it was manual until the submission path says so again', () => {
    const blocked = stateOnly(manuallyBlocked(waitingState(), { attestationId: 'ma-block', at: LATER.toISOString(), note: 'no access' }, LATER));
    const next = redispatched(blocked, { reason: 'access granted', supersede: false, claimSeconds: 30 }, LATER);
    expect(() => assertLegal(blocked, next)).not.toThrow();
    expect(next).toMatchObject({ phase: 'accepted', attempt: 2 });
    expect(next.manual).toBeUndefined();
    const resultAttested = stateOnly(resultAttestedState(attestationFactory('manual_result_attested')));
    expect(redispatched(resultAttested, { reason: 'do it again', supersede: false, claimSeconds: 30 }, LATER)).toMatchObject({ attempt: 2, manual: undefined });
  });

  it('refuses a manual result for a dispatch whose target is not manual', () => {
    const http: DispatchState = stateOnly(accepted(newDispatchFactory(), NOW));
    expect(() => manualResultAttested(http, { attestationId: 'ma-1', at: LATER.toISOString() }, LATER)).toThrow(IllegalTransitionError);
  });
});

describe('the attestation body', () => {
  it('refuses an unsafe evidence ref, a blank note and an unknown kind', () => {
    const body = { attestationId: 'ma-1', kind: 'manual_result_attested', note: 'filed' };
    expect(ManualAttestationBody().safeParse({ ...body, evidenceRef: 'out/report.md' }).success).toBe(true);
    for (const evidenceRef of ['../secret', '/etc/passwd', 'a//b', 'a\\b', '%2e%2e/x', '']) {
      expect(ManualAttestationBody().safeParse({ ...body, evidenceRef }).success, evidenceRef).toBe(false);
    }
    expect(ManualAttestationBody().safeParse({ ...body, note: '   ' }).success).toBe(false);
    expect(ManualAttestationBody().safeParse({ ...body, kind: 'dispatch_completed' }).success).toBe(false);
  });
});

describe('dispatchView of a manual dispatch', () => {
  it('says it waits for a person and which command records what they did; the gate is not satisfied', () => {
    const view = dispatchView(waitingState(), undefined);
    expect(view.submission.waitingFor).toBe('person');
    expect(view.unknowns.join(' ')).toMatch(/waits for a person.*npx ledger manual d-2026-0001 --kind/);
    expect(view.gate).toEqual({ satisfied: false, reasons: ['manual target: waiting for a person, no manual_result_attested'] });
  });

  it('satisfies the gate on the manual_result_attested that ended the wait, its reason naming a person\'s attestation', () => {
    const attestation = attestationFactory('manual_result_attested', { evidenceRef: 'out/report.md' });
    const view = dispatchView(resultAttestedState(attestation), undefined, undefined, [], [], [], [attestation]);
    expect(view.gate.satisfied).toBe(true);
    expect(view.gate.reasons).toHaveLength(1);
    expect(view.gate.reasons[0]).toContain("rests on a person's attestation, not runtime proof");
    expect(view.gate.reasons[0]).toContain('local:planner');
  });

  it('keeps attestations apart: listed with their basis, never among receipts nor as dispatch_submitted or dispatch_completed', () => {
    const result = attestationFactory('manual_result_attested');
    const written = attestationFactory('manual_dispatch_written');
    const view = dispatchView(resultAttestedState(result), undefined, undefined, [], [], [], [result, written]);
    expect(view.manualAttestations.map((attestation) => attestation.basis)).toEqual(['manual_attestation', 'manual_attestation']);
    expect(view.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written']);
    expect(view.operatorReceipts).toEqual([]);
    expect(view.artifactAcceptance).toEqual({ state: 'unverified', receiptId: null, basis: null });
  });

  it('confirms owner delivery on manual_delivery_attested with basis manual_attestation, and nothing else', () => {
    const delivery = attestationFactory('manual_delivery_attested');
    const view = dispatchView(waitingState(), undefined, undefined, [], [], [], [delivery]);
    expect(view.ownerDelivery).toMatchObject({ state: 'confirmed', receiptId: 'ma-manual_delivery_attested', basis: 'manual_attestation' });
    expect(view.gate.satisfied).toBe(false);
    expect(view.artifactAcceptance.state).toBe('unverified');
  });

  it('reports a tampered attestation as an audit failure and is not satisfied by it', () => {
    const attestation = attestationFactory('manual_result_attested');
    const tampered = { ...attestation, note: 'someone else did it' };
    const view = dispatchView(resultAttestedState(attestation), undefined, undefined, [], [], [], [tampered]);
    expect(view.gate.satisfied).toBe(false);
    expect(view.gate.reasons.some((reason) => reason.startsWith('audit_failure: manual attestation ma-manual_result_attested'))).toBe(true);
  });

  it('holds the gate on an attested result only while the dispatch is neither cancelled nor blocked', () => {
    const attestation = attestationFactory('manual_result_attested');
    const cancelled: DispatchState = { ...resultAttestedState(attestation), phase: 'cancelled' };
    const view = dispatchView(cancelled, undefined, undefined, [], [], [], [attestation]);
    expect(view.gate.satisfied).toBe(false);
  });

  it('after a redispatch, counts only the new attempt\'s attestations: an earlier delivery no longer confirms it', () => {
    const delivery = attestationFactory('manual_delivery_attested');
    const blocked = stateOnly(manuallyBlocked(waitingState(), { attestationId: 'ma-block', at: LATER.toISOString(), note: 'no access' }, LATER));
    const again = awaitingPerson(stateOnly(redispatched(blocked, { reason: 'access granted', supersede: false, claimSeconds: 30 }, LATER)), LATER);
    const view = dispatchView(again, undefined, undefined, [], [], [], [delivery]);
    expect(view.ownerDelivery.state).toBe('unconfirmed');
    expect(view.manualAttestations).toEqual([delivery]);
  });

  it('does not count an attestation of another attempt', () => {
    const attestation = { ...attestationFactory('manual_result_attested') };
    const other = manualAttestation({ ...waitingState(), attempt: 2 }, { attestationId: attestation.attestationId, kind: 'manual_result_attested', note: attestation.note }, LATER, 'local:planner');
    const view = dispatchView(resultAttestedState(attestation), undefined, undefined, [], [], [], [other]);
    expect(view.gate.satisfied).toBe(false);
  });
});

describe('dispatchView of any other target kind', () => {
  const submittedState = (): DispatchState =>
    submitted(stateOnly(accepted(newDispatchFactory(), NOW)), { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'req-1' }, DEFAULT_RETRY_POLICY, NOW);

  it('never lets a manual attestation take a runtime receipt\'s place: gate and delivery as without it', () => {
    const state = submittedState();
    const result = manualAttestation(state, { attestationId: 'ma-r', kind: 'manual_result_attested', note: 'it is done, trust me' }, LATER, 'local:planner');
    const delivery = manualAttestation(state, { attestationId: 'ma-d', kind: 'manual_delivery_attested', note: 'delivered' }, LATER, 'local:planner');
    const without = dispatchView(state, undefined);
    const withThem = dispatchView(state, undefined, undefined, [], [], [], [result, delivery]);
    expect(withThem.gate).toEqual(without.gate);
    expect(withThem.gate.satisfied).toBe(false);
    expect(withThem.ownerDelivery).toEqual(without.ownerDelivery);
    expect(withThem.receipts).toEqual(without.receipts);
  });
});

describe('the manual attestation item', () => {
  const attestation = attestationFactory('manual_result_attested', { evidenceRef: 'out/report.md' });
  const item = (): Record<string, unknown> => ({ ...(manualAttestationPut('ledger', attestation, 86_400).Item ?? {}) });

  it('decodes through the stored schema, and a tampered or malformed item is a corrupt item, never cast', () => {
    expect(manualAttestationOf(item())).toEqual(attestation);
    const bare = attestationFactory('manual_dispatch_written');
    const bareItem = { ...(manualAttestationPut('ledger', bare, 86_400).Item ?? {}) };
    expect(bareItem).not.toHaveProperty('evidenceRef');
    expect(manualAttestationOf(bareItem)).toEqual({ ...bare, evidenceRef: null });
    expect(() => manualAttestationOf({ ...item(), note: 'someone else did it' })).toThrow(CorruptItemError);
    expect(() => manualAttestationOf({ ...item(), kind: 'dispatch_completed' })).toThrow(CorruptItemError);
    expect(() => manualAttestationOf({ ...item(), attempt: 'one' })).toThrow(CorruptItemError);
  });

  it('expires with the records that outlive the state (twice the retention), not after the retention alone', () => {
    expect(item().expiresAt).toBe(expiryOf(attestation.recordedAt, 2 * 86_400));
  });
});

describe('the status page\'s commands for a manual dispatch', () => {
  const commands = (view: DispatchView) => commandsFor(view, [], false).map((command) => command.line);

  it('offers `ledger manual` first while it waits for a person, and never superseding a run it does not have', () => {
    const lines = commands(dispatchView(waitingState(), undefined));
    expect(lines[0]).toMatch(/^npx ledger manual d-2026-0001 --kind \S+ --note /);
    expect(lines.some((line) => line.includes('--force'))).toBe(false);
  });

  it('offers no cancel once its result is attested (it is over)', () => {
    const attestation = attestationFactory('manual_result_attested');
    const lines = commands(dispatchView(resultAttestedState(attestation), undefined, undefined, [], [], [], [attestation]));
    expect(lines.some((line) => line.startsWith('npx ledger cancel'))).toBe(false);
    expect(lines.some((line) => line.startsWith('npx ledger manual'))).toBe(false);
  });
});

describe('the status page\'s commands for a manual dispatch whose result attestation lost its race', () => {
  it('still offers `ledger manual` and cancel while the dispatch waits for a person, though the attestation is listed', () => {
    const attestation = attestationFactory('manual_result_attested');
    const lines = commandsFor(dispatchView(waitingState(), undefined, undefined, [], [], [], [attestation]), [], false).map((command) => command.line);
    expect(lines[0]).toMatch(/^npx ledger manual /);
    expect(lines.some((line) => line.startsWith('npx ledger cancel'))).toBe(true);
  });
});

describe('the status page\'s read allowlist', () => {
  it('relays the paged manual attestations like the other lists of a dispatch', () => {
    expect(proxyDecision('/api/dispatches/d-1/manual-attestations', new URLSearchParams('cursor=c'))).toMatchObject({ kind: 'proxy', route: 'listManualAttestations', path: '/dispatches/d-1/manual-attestations?cursor=c' });
  });
});

describe('LEDGER_REGISTRY with a manual target', () => {
  it('reads a manual target with nothing to call, and refuses one given a base URL or a limit', () => {
    const registry = (target: Record<string, unknown>) => JSON.stringify({ principals: [], targets: [{ name: 'desk', kind: 'manual', ...target }] });
    expect(parseStaticRegistry(registry({})).targets.get('desk')).toEqual({ name: 'desk', kind: 'manual' });
    expect(() => parseStaticRegistry(registry({ baseUrl: 'https://desk.example.com' }))).toThrow(/manual target desk takes only a name/);
    expect(() => parseStaticRegistry(registry({ maxConcurrentRuns: 2 }))).toThrow(/manual target desk takes only a name/);
  });
});
