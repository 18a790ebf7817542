import type { DispatchState, NextState } from '../state.js';
import { IllegalTransitionError } from './legal.js';
import { advance, blocked } from './core.js';

/**
 * Manual mode (CONTRACT §13): work a person does and attests.
 */

/**
 * Its target is manual: recorded, never submitted anywhere — no call, no slot, no retry, no lookup and
 * no stall clock (nothing is due, so the monitor never looks at it). It waits for a person, whose
 * attestations say what happened (`POST /dispatches/{id}/manual`).
 */
export function awaitingPerson(state: DispatchState, now: Date): NextState {
  return advance(state, 'waiting', now, {
    waitingFor: 'person',
    submission: { ...state.submission, nextRetryAt: null },
    dueAt: null,
    manual: { since: now.toISOString() },
  });
}

/**
 * A person attested the result of the manual work (`manual_result_attested`): the wait for a person
 * ends. It stays `accepted` — nothing was ever submitted — and no runtime receipt is written: the gate
 * reads this attestation, and says it rests on a person's word.
 */
export function manualResultAttested(state: DispatchState, attestation: { readonly attestationId: string; readonly at: string }, now: Date): NextState {
  if (state.phase !== 'accepted' || !state.manual) throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['manual_result_attested']);
  return advance(state, 'manual_result_attested', now, {
    waitingFor: undefined,
    manual: { ...state.manual, resultAttestation: { attestationId: attestation.attestationId, at: attestation.at } },
    dueAt: null,
  });
}

/**
 * A person attested the manual work cannot be done (`manual_blocked`): blocked with their note as the
 * reason, like any block, naming the attestation that did it.
 */
export const manuallyBlocked = (state: DispatchState, attestation: { readonly attestationId: string; readonly at: string; readonly note: string }, now: Date): NextState => ({
  ...blocked(state, 'manual_blocked', attestation.note, now),
  manual: state.manual && { ...state.manual, blockAttestation: { attestationId: attestation.attestationId, at: attestation.at } },
});
