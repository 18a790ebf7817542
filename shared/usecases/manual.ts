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
  /** The dispatch changed under the write: retry (the same attestationId is safe). */
  | { readonly kind: 'conflict' };

type ManualDeps = {
  readonly store: Pick<LedgerStore, 'commit' | 'putManualAttestation' | 'listManualAttestations'>;
  readonly now: () => Date;
};

/**
 * Why this attestation may not move the dispatch now, or undefined when it may. Only a result and a
 * block change the state (their named transitions); a written dispatch and a delivery are records alone.
 */
function refusal(state: DispatchState, kind: ManualAttestation['kind']): string | undefined {
  if (kind !== 'manual_result_attested' && kind !== 'manual_blocked') return undefined;
  if (state.phase !== 'accepted') return `the dispatch is ${state.phase}: it no longer waits for a person`;
  const held = state.manual?.resultAttestation;
  return kind === 'manual_result_attested' && held ? `its result is already attested by ${held.attestationId}` : undefined;
}

/**
 * Records a person's attestation on a manual dispatch, once per attestationId (an item of its own,
 * never among the dispatch receipts), then — for `manual_result_attested` and `manual_blocked` — the
 * named transition it means. The item is written first: a crash between the two leaves an attestation
 * whose identical retry makes the transition (an identical retry always makes sure of its effect).
 * A result or a block for a dispatch that no longer waits for a person is refused and not stored.
 */
export async function recordManualAttestation(deps: ManualDeps, state: DispatchState, body: ManualAttestationBody, recordedBy: string): Promise<ManualOutcome> {
  if (!state.manual) return { kind: 'not_manual', target: state.target };
  const attestation = manualAttestation(state, body, deps.now(), recordedBy);
  const why = refusal(state, attestation.kind);
  // Refused unless it is the retry of the one that moved the dispatch (or a change of it).
  const put = why === undefined ? await deps.store.putManualAttestation(attestation) : undefined;
  const existing = put ? (put.kind === 'exists' ? put.existing : undefined) : (await deps.store.listManualAttestations(state.dispatchId)).find((stored) => stored.attestationId === attestation.attestationId);
  if (existing && existing.payloadHash !== attestation.payloadHash) return { kind: 'changed', existing };
  if (why !== undefined && !existing) return { kind: 'not_waiting', state, why };
  const kept = existing ?? attestation;
  // Moved already, or no longer movable (cancelled meanwhile, say): the attestation stands as a record.
  let next = state;
  if (refusal(state, kept.kind) === undefined && (kept.kind === 'manual_result_attested' || kept.kind === 'manual_blocked')) {
    next = kept.kind === 'manual_blocked' ? manuallyBlocked(state, kept.note, deps.now()) : manualResultAttested(state, { attestationId: kept.attestationId, at: kept.recordedAt }, deps.now());
    // Someone changed the dispatch first: the stored attestation makes its identical retry safe.
    if ((await deps.store.commit(state, next)).kind !== 'committed') return { kind: 'conflict' };
  }
  return { kind: existing ? 'identical' : 'recorded', attestation: kept, state: next };
}
