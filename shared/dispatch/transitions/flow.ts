import { isTerminal, type DispatchState, type WaitingFor, type NextState, type ResultBodyRef } from '../state.js';
import type { CancelOutcome, LookupOutcome } from '../target-answers.js';
import { clip, printable } from '../../text.js';
import type { RetryPolicy } from '../retry.js';
import { IllegalTransitionError } from './legal.js';
import { advance, bounded, cancelPending, finished, givenReason, plus, rescheduled } from './core.js';
import { reconcileLookup, stallDeadline } from './run.js';

/**
 * Flow control (CONTRACT §11) and cancel (CONTRACT §2 v2): waits, admissions, cancels asked and answered, slots freed by hand.
 */

/**
 * Not submitted yet: every slot of its target is held (the wait index holds it, by priority — the
 * freeing write or the monitor admits it), or its `notBefore` is still ahead (due then).
 */
export function waiting(state: DispatchState, why: WaitingFor, now: Date): NextState {
  return advance(state, 'waiting', now, { waitingFor: why, dueAt: why === 'not_before' ? (state.notBefore ?? now.toISOString()) : null });
}

/**
 * Admitted: one slot of shard `shard` taken for this attempt, in the same write that claims the
 * dispatch for its submission (the store conditions the slot counter on the cap it holds). The
 * submitter holds it while it calls the target; if it dies, the monitor finds the claim lapsed and
 * submits again with the slot it still holds — a slot taken is never lost with the process.
 */
export function admitted(state: DispatchState, shard: number, now: Date, claimSeconds: number): NextState {
  return advance(state, 'claimed', now, { slot: { shard, at: now.toISOString() }, waitingFor: undefined, dueAt: plus(now, claimSeconds) });
}

export interface CancelAsk {
  readonly reason: string;
  /** The caller's principal (or the origin locally). */
  readonly by: string;
}

/** Cancelled before any submission: never submitted, its slot (if one was held for a retry) given back. */
export function cancelledBeforeSubmission(state: DispatchState, ask: CancelAsk, now: Date): NextState {
  const at = now.toISOString();
  return advance(state, 'dispatch_cancelled', now, {
    phase: 'cancelled',
    submission: { ...state.submission, nextRetryAt: null },
    dueAt: null,
    // A cancel recorded while a submission was under way keeps its own time and asker.
    cancel: { ...(state.cancel ?? { requestedAt: at, reason: givenReason(ask.reason), by: clip(printable(ask.by), 200), asks: 0 }), nextAskAt: null, answer: 'cancelled before submission' },
  });
}

/**
 * A cancel asked of a submitted run — or of one whose submission is under way (its submitter carries it
 * into the submitted state) —: recorded first, then asked of the target (now, and again while it cannot be reached).
 * `askerHoldsSeconds`: the writer asks the target itself right after this write (the API, for a submitted
 * run), so the monitor asks only if no answer is recorded by then — not at once beside it, which asked the
 * target twice for one request.
 */
export function cancelRequested(state: DispatchState, ask: CancelAsk, now: Date, askerHoldsSeconds = 0): NextState {
  const at = now.toISOString();
  return advance(state, 'cancel_requested', now, {
    cancel: { requestedAt: at, reason: givenReason(ask.reason), by: clip(printable(ask.by), 200), asks: 0, nextAskAt: plus(now, askerHoldsSeconds), answer: null },
  });
}

/**
 * What the target answered to the cancel. Its word that the run is over (a final status) is recorded
 * like a reported one; a run it still runs stays as it is until its own event or a lookup says more;
 * unreachable → asked again with the retry policy's backoff.
 */
export function cancelAnswered(state: DispatchState, outcome: CancelOutcome, policy: RetryPolicy, now: Date): NextState {
  const cancel = state.cancel;
  if (!cancel || !cancelPending(state)) throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['cancel_answered']);
  const asks = cancel.asks + 1;
  if (outcome.kind === 'cancelled' && isTerminal(outcome.status)) {
    return finished({ ...state, cancel: { ...cancel, asks, nextAskAt: null, answer: `the target says ${outcome.status}` } }, outcome.status, undefined, now);
  }
  const answered = (answer: string, nextAskAt: string | null) => advance(state, 'cancel_answered', now, { cancel: { ...cancel, asks, nextAskAt, answer: bounded(answer) } });
  if (outcome.kind === 'cancelled') return answered(`accepted by the target; the run is ${outcome.status}`, null);
  if (outcome.kind === 'requested') return answered(outcome.how, null);
  if (outcome.kind === 'not_found') return answered('the target does not know the run', null);
  // Asked again with the submission retries' backoff (it never gives up: only the target's word ends a run).
  const delays = policy.delaysSeconds;
  return answered(`the target could not be reached: ${outcome.reason}`, plus(now, delays[Math.min(asks - 1, delays.length - 1)] ?? 60));
}

/**
 * What a lookup that follows an answered cancel found (see `cancelLookAt`): the run's own final status
 * is recorded as the target's word — a stop that took effect as the cancel's answer (`Run Cancelled`,
 * as if the target had said so when asked), an end reached another way as found by lookup (`Run
 * Recovered`). A run still going, or a lookup that could not be made or found nothing, concludes
 * nothing inside the stall window: it is looked at again (regression: a 503 made the run `unknown`).
 */
export function cancelLookedUp(state: DispatchState, lookup: LookupOutcome, now: Date, body?: ResultBodyRef): NextState {
  const cancel = state.cancel;
  if (!cancel || lookup.kind !== 'found' || !isTerminal(lookup.run.status)) return rescheduled(state, now, new Date(stallDeadline(state)));
  const { run } = lookup;
  // Ended another way: recorded as any end a lookup finds.
  if (run.status !== 'cancelled') return reconcileLookup(state, lookup, now, false, body) ?? rescheduled(state, now, new Date(stallDeadline(state)));
  return finished({ ...state, cancel: { ...cancel, nextAskAt: null, answer: 'the target says cancelled' } }, run.status, run.result?.summary, now, 'cancelled', body, run.nativeStatus);
}

/**
 * An operator freed the slot of a run its target answers 404 for (CONTRACT §2 slots/release): the run
 * stays `unknown` — the ledger still does not know it is over — but no longer holds its target's capacity.
 */
export function slotReleased(state: DispatchState, release: { readonly by: string; readonly reason: string }, now: Date): NextState {
  if (!state.slot || state.phase !== 'submitted') throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['slot_released']);
  return advance(state, 'slot_released', now, {
    slot: undefined,
    slotRelease: { at: now.toISOString(), by: clip(printable(release.by), 200), reason: givenReason(release.reason), runId: state.runId ?? '' },
  });
}
