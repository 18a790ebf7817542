import type { DispatchState, ResultBodyRef, ResultDropReason, ResultRecord, NextState } from '../state.js';
import { clip, printable } from '../../text.js';
import { IllegalTransitionError } from './legal.js';
import { advance, droppedResult, isClaimable, isLive, leaseLapsed, plus, rescheduled } from './core.js';

/**
 * The result back to the origin (CONTRACT §10): claims, renewals, releases, acks and drops are named transitions like any other.
 */

/** The origin claimed the result: held for `leaseSeconds` under `claimToken`. A lapsed lease taken over counts as a release. */
export function resultClaimed(state: DispatchState, claim: { readonly claimToken: string; readonly leaseSeconds: number }, now: Date): NextState {
  const result = state.result;
  if (!isClaimable(result, now)) throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['result_claimed']);
  return advance(state, 'result_claimed', now, {
    result: {
      ...result,
      state: 'claimed',
      deliveryAttempts: result.state === 'claimed' ? result.deliveryAttempts + 1 : result.deliveryAttempts,
      claimToken: claim.claimToken,
      leaseUntil: plus(now, claim.leaseSeconds),
    },
  });
}

/**
 * The target's own final report came after the ledger had recorded the final status (a lookup, or
 * the submission's answer): its result body is attached to the result still out, nothing else changes.
 */
export function resultBodyAttached(state: DispatchState, seq: number, body: ResultBodyRef, now: Date): NextState {
  return advance(state, 'observed', now, { lastSeq: seq, execution: { ...state.execution, result: { ...state.execution.result, body } } });
}

/** The holder extends its lease. */
export function resultRenewed(state: DispatchState, leaseSeconds: number, now: Date): NextState {
  const result = state.result;
  if (result?.state !== 'claimed' || leaseLapsed(result, now)) throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['result_renewed']);
  return advance(state, 'result_renewed', now, { result: { ...result, leaseUntil: plus(now, leaseSeconds) } });
}

/**
 * Back to pending (released, or found with its lease lapsed), one delivery attempt more; at
 * `maxDeliveryAttempts` dropped instead, its payload kept.
 */
export function resultReleased(state: DispatchState, maxDeliveryAttempts: number, now: Date): NextState {
  const result = state.result;
  if (result?.state !== 'claimed') throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['result_released']);
  const deliveryAttempts = result.deliveryAttempts + 1;
  if (deliveryAttempts >= maxDeliveryAttempts) return resultDropped({ ...state, result: { ...result, deliveryAttempts } }, 'attempts', now);
  return advance(state, 'result_released', now, { result: { ...result, state: 'pending', deliveryAttempts, claimToken: null, leaseUntil: null } });
}

/** The origin acknowledged the result: owner delivery proven by the origin itself (`basis: origin_ack`). */
export function resultDelivered(state: DispatchState, by: string, now: Date): NextState {
  const result = state.result;
  if (result?.state !== 'claimed') throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['result_delivered']);
  return advance(state, 'result_delivered', now, {
    result: { ...result, state: 'delivered', leaseUntil: null, deliveredAt: now.toISOString(), deliveredBy: clip(printable(by), 128) },
    dueAt: null,
  });
}

/** Never delivered: too many attempts, or older than the origin's result TTL. Listed in attention. */
export function resultDropped(state: DispatchState, reason: Exclude<ResultDropReason, 'superseded'>, now: Date): NextState {
  const result = state.result;
  if (!isLive(result)) throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['result_dropped']);
  return advance(state, 'result_dropped', now, { result: droppedResult(result, reason, now), dueAt: null });
}

/** The result a redispatch ends with its attempt: a live one is dropped (`superseded`), a delivered one stays delivered. */
export function endedResult(state: DispatchState, now: Date): ResultRecord | null {
  const result = state.result ?? null;
  return isLive(result) ? droppedResult(result, 'superseded', now) : result;
}

/**
 * A settled dispatch whose result is still out came due: dropped once older than the origin's TTL
 * (a lapsed lease counts as pending), else looked at again at its expiry (or when a live lease ends).
 */
export function resultWatch(state: DispatchState, settings: { readonly ttlSeconds: number; readonly maxDeliveryAttempts: number }, now: Date): NextState {
  const result = state.result;
  if (!isLive(result)) return rescheduled(state, now, null);
  const expiresAt = Date.parse(result.readyAt) + settings.ttlSeconds * 1000;
  // A lease that lapsed counts as a release (one delivery attempt more; at the cap, dropped), claimed again or not.
  if (leaseLapsed(result, now)) {
    const released = resultReleased(state, settings.maxDeliveryAttempts, now);
    return released.result?.state === 'pending' && now.getTime() >= expiresAt ? resultDropped(released, 'expired', now) : released;
  }
  if (result.state === 'pending' && now.getTime() >= expiresAt) return resultDropped(state, 'expired', now);
  // Looked at again when the lease ends, or at the expiry, whichever comes first — of those still
  // ahead: a held result past its TTL is not dropped while its lease lives, so its next look is the
  // lease's end (a look in the past had every tick rewrite it until then).
  const leaseEnd = result.state === 'claimed' ? Date.parse(result.leaseUntil ?? '') : Number.NaN;
  const next = Math.min(...[expiresAt, leaseEnd].filter((at) => at > now.getTime()));
  return rescheduled(state, now, new Date(next));
}
