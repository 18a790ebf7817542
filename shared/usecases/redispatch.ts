import type { DispatchState } from '../dispatch/state.js';
import { isTerminal } from '../dispatch/state.js';
import { FINAL_BLOCKS, lineageDerived, redispatched, withCancelAnswer } from '../dispatch/transitions/lifecycle.js';
import { givenReason } from '../dispatch/transitions/core.js';
import { endedResult } from '../dispatch/transitions/inbox.js';
import type { EndedAttempt } from '../dispatch/records.js';
import type { DispatchWorkDeps, StoredState } from '../ledger/port.js';
import { updateDispatch } from '../ledger/repository.js';
import { clip, printable } from '../text.js';
import { startAttempt } from './submit-attempt.js';

export type RedispatchOutcome =
  | {
      readonly kind: 'redispatched';
      readonly attempt: number;
      readonly state: DispatchState;
      readonly supersededRunId: string | null;
      readonly cancel: string | null;
    }
  /** The current run is not proven terminal and `force` was not given: look it up first. */
  | { readonly kind: 'run_may_be_active'; readonly runId: string | null; readonly attempt: number; readonly status: string | null; readonly redriven?: { readonly at: string; readonly count: number } }
  /** Blocked for what a new submission cannot change. */
  | { readonly kind: 'not_submittable'; readonly reason: string }
  | { readonly kind: 'target_not_registered' }
  /** Someone else changed the dispatch first. */
  | { readonly kind: 'conflict' };

/** What a redispatch decides on: while it stays the same, a write between the read and the write does not change the decision's meaning. */
const decidedOn = (state: DispatchState): string => [state.attempt, state.phase, state.runId, state.redispatch?.at, state.cancel?.requestedAt, state.execution.redriven?.count].join();

/**
 * The current run may still be working: its end is not recorded, or its runtime runs it again after it
 * was (redriven outside the ledger, CONTRACT §17) — a second writer unless forced, superseded if forced.
 */
const mayBeActive = (state: DispatchState): boolean => state.phase === 'submitted' && (!isTerminal(state.execution.status) || !!state.execution.redriven);

/** Why this state may not be redispatched as asked, if it may not. */
function refusal(state: DispatchState, force: boolean): RedispatchOutcome | undefined {
  if (mayBeActive(state) && !force) {
    return { kind: 'run_may_be_active', runId: state.runId, attempt: state.attempt, status: state.execution.status, ...(state.execution.redriven ? { redriven: state.execution.redriven } : {}) };
  }
  // A child held for its parent (CONTRACT §1 V3) has no hop derived yet: no submission may skip the wait;
  // one cancelled while held never derived it, so it is never submitted.
  const held = state.waitingFor === 'parent' || !lineageDerived(state);
  if ((state.blockedCode && FINAL_BLOCKS.has(state.blockedCode)) || state.hop > state.maxHops || held) {
    return { kind: 'not_submittable', reason: state.blockedReason ?? (held ? 'its parent was never recorded while it waited: its hop is not known' : 'hop budget exceeded') };
  }
  return undefined;
}

/**
 * A redispatch (CONTRACT §4): never a second writer by accident. While the current run may be active →
 * `run_may_be_active`. `force` + reason supersedes it: the ended attempt is archived (its run stays
 * answerable as late), the dispatch is fenced back to `accepted` (conditioned on the version read, so if
 * this request dies mid-way the monitor finds the attempt due and submits it itself), the old run is
 * asked to cancel (best effort, recorded), and the attempt is submitted.
 */
export async function redispatch(deps: DispatchWorkDeps, stored: StoredState, request: { readonly reason: string; readonly force: boolean }): Promise<RedispatchOutcome> {
  const { state } = stored;
  const refused = refusal(state, request.force);
  if (refused) return refused;
  const message = await deps.store.getAcceptedMessage(state.dispatchId);
  if (!message?.content.valid) return { kind: 'not_submittable', reason: 'this dispatch has no valid message to submit again' };
  const registration = await deps.store.getTarget(state.target);
  if (!registration) return { kind: 'target_not_registered' };

  // A write that lands between the read and this one and leaves what the operator decided on as it was
  // (the run's progress, a tick's reschedule) is decided again on what is stored now; a new run or
  // attempt, another redispatch, a cancel or a phase change is not overridden in the operator's name.
  const updated = await updateDispatch<RedispatchOutcome | undefined>(
    deps.store,
    state.dispatchId,
    (current) => {
      if (!current || decidedOn(current) !== decidedOn(state)) return { answer: { kind: 'conflict' } };
      const refusedNow = refusal(current, request.force);
      if (refusedNow) return { answer: refusedNow };
      const supersede = mayBeActive(current);
      const now = deps.now();
      // The fence and the record of what it ended, in one write: both or neither.
      return { write: redispatched(current, { reason: request.reason, supersede, claimSeconds: deps.claimSeconds }, now), ended: endedAttempt(current, request.reason, supersede, now), answer: undefined };
    },
    { first: stored },
  );
  if (updated.kind === 'lost') return { kind: 'conflict' };
  if (updated.kind === 'unchanged') return updated.answer ?? { kind: 'conflict' };
  const claimed = updated.state;
  let cancel: string | null = null;
  const supersededRunId = claimed.redispatch?.supersededRunId ?? null;
  if (supersededRunId) {
    const answer = await deps.targetFor(registration).cancel(supersededRunId);
    cancel = answer.kind === 'cancelled' ? `cancelled (${answer.status})` : answer.kind === 'not_found' ? 'not_found' : answer.kind === 'requested' ? `requested: ${clip(printable(answer.how), 80)}` : `unavailable: ${clip(printable(answer.reason), 80)}`;
  }
  // The cancel's answer rides on what is written next (the claim is ours: the same version).
  const started = await startAttempt(deps, { state: withCancelAnswer(claimed, cancel), version: updated.version }, message);
  // Someone finishing it first (the monitor after the claim lapsed) is fine: the same key, the same run.
  const current = started.kind === 'committed' ? started.state : ((await deps.store.getState(state.dispatchId)) ?? claimed);
  return { kind: 'redispatched', attempt: claimed.attempt, state: current, supersededRunId, cancel };
}

/** What a redispatch ends, kept with the fence: the attempt's run, receipts and last execution, its result and its settled check. */
function endedAttempt(state: DispatchState, reason: string, superseded: boolean, now: Date): EndedAttempt {
  return {
    dispatchId: state.dispatchId,
    attempt: state.attempt,
    runId: state.runId,
    receipts: state.receipts,
    execution: state.execution,
    endedAt: now.toISOString(),
    reason: givenReason(reason),
    superseded,
    // Its result leaves with it: one still out is dropped (`superseded`), its ack answers 409 from now on.
    result: endedResult(state, now),
    // Its settled check, when the state carried it: the hashes it sealed are kept with the attempt.
    check: state.evidence.check,
  };
}
