import { submissionInFlight } from '../dispatch/transitions/lifecycle.js';
import type { DispatchWorkDeps, StoredState } from '../ledger/port.js';

/**
 * Where a runtime's own message (Lambda's on-failure record, a state machine's approval request or
 * status change) finds the dispatch it names, before anything else is read: a module of its own, so
 * a function that only takes such messages reaches no other read of the ledger (its role is held to
 * what its code can call).
 */

/** A dispatch's target as a runtime's message finds it, and whether one of its attempts is in a submission call now. */
export interface DispatchAsFound {
  /** From its state, or — its first submission's answer not written yet — from its accepted message; undefined: none of the ledger's. */
  readonly target: string | undefined;
  /**
   * A submitter is in the target's call right now, its run not written yet: with a state, a claim held
   * (not a wait or a retry's backoff); without one, the intake's claim on the message still holding. A
   * runtime that reports in this window (a function that failed at once, an execution that ended) is
   * retried, not dropped: the run is written when the call returns.
   */
  readonly submitting: boolean;
}

/** `read`: the dispatch's state as read (undefined: none stored). The accepted message is read only without one. */
export async function dispatchAsFound(deps: Pick<DispatchWorkDeps, 'store' | 'now'>, dispatchId: string, read: StoredState | undefined): Promise<DispatchAsFound> {
  if (read) return { target: read.state.target, submitting: submissionInFlight(read.state, deps.now()) };
  const message = await deps.store.getAcceptedMessage(dispatchId);
  if (!message?.content.valid) return { target: undefined, submitting: false };
  return { target: message.content.target, submitting: Date.parse(message.claimUntil) > deps.now().getTime() };
}
