import { manualAttestation, type ManualAttestation, type ManualAttestationBody } from '../dispatch/manual.js';
import type { DispatchState } from '../dispatch/state.js';
import { manuallyBlocked, manualResultAttested } from '../dispatch/transitions/manual.js';
import type { LedgerStore, StoredState } from '../ledger/port.js';
import { writeOnce } from '../ledger/repository.js';

/** What recording a person's attestation came to (CONTRACT §13 `POST /dispatches/{id}/manual`). */
export type ManualOutcome =
  /** Stored now (and, for a result or a block, the dispatch moved by its named transition). */
  | { readonly kind: 'recorded'; readonly attestation: ManualAttestation; readonly state: DispatchState }
  /** The same attestation again: the stored one stands (its effect made sure of). */
  | { readonly kind: 'identical'; readonly attestation: ManualAttestation; readonly state: DispatchState }
  /** The attestationId is taken with other content: the original stands. */
  | { readonly kind: 'changed'; readonly existing: ManualAttestation }
  /** The dispatch's target is not manual (by the registry): a person's word never takes a runtime receipt's place. */
  | { readonly kind: 'not_manual'; readonly target: string }
  /**
   * Not for now: a result or a block for a dispatch no longer waiting for a person (blocked, cancelled,
   * or its result already attested), the retry of one that never moved it, an attestation of an earlier
   * attempt, or a dispatch not yet recorded as waiting for a person.
   */
  | { readonly kind: 'not_waiting'; readonly state: DispatchState; readonly why: string }
  /** The dispatch changed under the write: retry (the same attestationId is safe). */
  | { readonly kind: 'conflict' };

type ManualDeps = {
  readonly store: Pick<LedgerStore, 'getStored' | 'commit' | 'getTarget' | 'putManualAttestation' | 'listManualAttestations'>;
  readonly now: () => Date;
};

/** The kinds that move the dispatch (by their named transitions); the others are records alone. */
const moves = (kind: ManualAttestation['kind']): boolean => kind === 'manual_result_attested' || kind === 'manual_blocked';

/**
 * Why this attestation may not be recorded now, or undefined when it may. Its dispatch must be recorded
 * as waiting for a person (this attempt went to the manual target). A written dispatch and a delivery
 * are records alone; a result and a block move the dispatch, so only while it waits: not once blocked,
 * cancelled, or its result attested (a block after a result is as refused as a second result).
 */
function refusal(state: DispatchState, kind: ManualAttestation['kind']): string | undefined {
  const held = state.manual?.resultAttestation;
  if (!state.manual || (moves(kind) && (state.phase !== 'accepted' || held))) {
    return `attempt ${state.attempt} does not wait for a person (${held ? `its result is attested by ${held.attestationId}` : state.phase})`;
  }
  return undefined;
}

/**
 * Records a person's attestation on a manual dispatch, once per attestationId (an item of its own,
 * never among the dispatch receipts), then — for `manual_result_attested` and `manual_blocked` — the
 * named transition it means. Manual-ness is the registry's word (the target's kind now) and the
 * dispatch's (its current attempt was recorded as waiting for a person). Each attestation belongs to
 * the attempt it was recorded for: one of an earlier attempt is never an identical retry now. The item
 * is written first: a crash between the two leaves an attestation whose identical retry makes the
 * transition. The retry of a result or block that is not the one the state names (it lost a race to
 * another) is refused like a new one; one refused is not stored.
 */
export async function recordManualAttestation(deps: ManualDeps, stored: StoredState, body: ManualAttestationBody, recordedBy: string): Promise<ManualOutcome> {
  const { state } = stored;
  if ((await deps.store.getTarget(state.target))?.kind !== 'manual') return { kind: 'not_manual', target: state.target };
  const attestation = manualAttestation(state, body, deps.now(), recordedBy);
  const why = refusal(state, attestation.kind);
  // Refused unless it is the retry of the one that moved the dispatch (or a change of it).
  const put = why === undefined ? await deps.store.putManualAttestation(attestation) : undefined;
  const existing = put ? (put.kind === 'exists' ? put.existing : undefined) : (await deps.store.listManualAttestations(state.dispatchId)).find((stored) => stored.attestationId === attestation.attestationId);
  if (existing && existing.payloadHash !== attestation.payloadHash) return { kind: 'changed', existing };
  if (existing && existing.attempt !== state.attempt) return { kind: 'not_waiting', state, why: `${existing.attestationId} is of attempt ${existing.attempt}: use a new attestationId` };
  // The same payload is the same kind: `why` holds for the stored one too, unless it is the one that moved the dispatch.
  const kept = existing ?? attestation;
  const moved = moves(kept.kind) && (kept.kind === 'manual_blocked' ? state.manual?.blockAttestation : state.manual?.resultAttestation)?.attestationId === kept.attestationId;
  if (why !== undefined && !moved) return { kind: 'not_waiting', state, why };
  let next: DispatchState = state;
  if (moves(kept.kind) && !moved) {
    const at = { attestationId: kept.attestationId, at: kept.recordedAt, note: kept.note };
    const moved = kept.kind === 'manual_blocked' ? manuallyBlocked(state, at, deps.now()) : manualResultAttested(state, at, deps.now());
    // Someone changed the dispatch first: the stored attestation makes its identical retry safe.
    const written = await writeOnce(deps.store, stored, moved);
    if (written.kind !== 'written') return { kind: 'conflict' };
    next = written.state;
  }
  return { kind: existing ? 'identical' : 'recorded', attestation: kept, state: next };
}
