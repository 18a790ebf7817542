import { manualAttestation, type ManualAttestation, type ManualAttestationBody } from '../dispatch/manual.js';
import type { DispatchState } from '../dispatch/state.js';
import { manuallyBlocked, manualResultAttested } from '../dispatch/transitions.js';
import type { LedgerStore } from '../ledger/port.js';

/** What recording a person's attestation came to (CONTRACT §13 `POST /dispatches/{id}/manual`). */
export type ManualOutcome =
  /** Stored now (and, for a result or a block, the dispatch moved by its named transition). */
  | { readonly kind: 'recorded'; readonly attestation: ManualAttestation; readonly state: DispatchState }
  /** The same attestation again: the stored one stands (its effect made sure of). */
  | { readonly kind: 'identical'; readonly attestation: ManualAttestation; readonly state: DispatchState }
  /** The attestationId is taken with other content: the original stands. */
  | { readonly kind: 'changed'; readonly existing: ManualAttestation }
  /** The dispatch's target is not manual: a person's word never takes a runtime receipt's place. */
  | { readonly kind: 'not_manual'; readonly target: string }
  /** A result or a block for a dispatch no longer waiting for a person (blocked, cancelled, or its result already attested). */
  | { readonly kind: 'not_waiting'; readonly state: DispatchState; readonly why: string }
  /** The dispatch kept changing under the write: nothing more to do than retry. */
  | { readonly kind: 'conflict' };

type ManualDeps = {
  readonly store: Pick<LedgerStore, 'getState' | 'commit' | 'putManualAttestation' | 'listManualAttestations'>;
  readonly now: () => Date;
};

const ROUNDS = 3;

/**
 * Why this attestation may not move the dispatch now, or undefined when it may. Only a result and a
 * block change the state (their named transitions); a written dispatch and a delivery are records alone.
 */
function refusal(state: DispatchState, kind: ManualAttestation['kind']): string | undefined {
  if (kind !== 'manual_result_attested' && kind !== 'manual_blocked') return undefined;
  if (state.phase !== 'accepted') return `the dispatch is ${state.phase}${state.blockedReason ? ` (${state.blockedReason})` : ''}: it no longer waits for a person`;
  const held = state.manual?.resultAttestation;
  if (kind === 'manual_result_attested' && held) return `its result is already attested by ${held.attestationId}`;
  return undefined;
}

/** The attestation's effect is in the state. */
function applied(state: DispatchState, attestation: ManualAttestation): boolean {
  if (attestation.kind === 'manual_result_attested') return state.manual?.resultAttestation?.attestationId === attestation.attestationId;
  if (attestation.kind === 'manual_blocked') return state.phase === 'blocked' && state.blockedCode === 'manual_blocked';
  return true;
}

/**
 * Records a person's attestation on a manual dispatch, once per attestationId (an item of its own,
 * never among the dispatch receipts), then — for `manual_result_attested` and `manual_blocked` — the
 * named transition it means. The item is written first: a crash between the two leaves an attestation
 * whose identical retry makes the transition (an identical retry always makes sure of its effect).
 * A result or a block for a dispatch that no longer waits for a person is refused and not stored.
 */
export async function recordManualAttestation(deps: ManualDeps, first: DispatchState, body: ManualAttestationBody, recordedBy: string): Promise<ManualOutcome> {
  if (!first.manual) return { kind: 'not_manual', target: first.target };
  const attestation = manualAttestation(first, body, deps.now(), recordedBy);
  const why = refusal(first, attestation.kind);
  if (why !== undefined) {
    // Refused unless it is the retry of the one that moved the dispatch (or a change of it).
    const existing = (await deps.store.listManualAttestations(first.dispatchId)).find((stored) => stored.attestationId === attestation.attestationId);
    if (!existing) return { kind: 'not_waiting', state: first, why };
    return existing.payloadHash === attestation.payloadHash ? { kind: 'identical', attestation: existing, state: first } : { kind: 'changed', existing };
  }
  const put = await deps.store.putManualAttestation(attestation);
  if (put.kind === 'exists' && put.existing.payloadHash !== attestation.payloadHash) return { kind: 'changed', existing: put.existing };
  const kept = put.kind === 'exists' ? put.existing : attestation;
  const state = await applyAttestation(deps, first, kept);
  if (!state) return { kind: 'conflict' };
  return { kind: put.kind === 'exists' ? 'identical' : 'recorded', attestation: kept, state };
}

/** Makes sure the state carries the attestation's effect, re-reading on a concurrent change; undefined when it kept changing. */
async function applyAttestation(deps: ManualDeps, first: DispatchState, attestation: ManualAttestation): Promise<DispatchState | undefined> {
  let state = first;
  for (let round = 0; round < ROUNDS; round += 1) {
    // Moved already, or no longer movable (cancelled meanwhile, say): the attestation stands as a record.
    if (applied(state, attestation) || refusal(state, attestation.kind) !== undefined) return state;
    const now = deps.now();
    const next =
      attestation.kind === 'manual_result_attested'
        ? manualResultAttested(state, { attestationId: attestation.attestationId, at: attestation.recordedAt }, now)
        : manuallyBlocked(state, attestation.note, now);
    if ((await deps.store.commit(state, next)).kind === 'committed') return next;
    const reread = await deps.store.getState(state.dispatchId);
    if (!reread) return undefined;
    state = reread;
  }
  return undefined;
}
