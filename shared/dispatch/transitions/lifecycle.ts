import { DEFAULT_PRIORITY, isTerminal, NO_EXECUTION, MAX_HOPS_LIMIT, PARENT_WAIT_SECONDS, type BlockedCode, type DispatchState, type ResultDelivery, type Timeouts, type NextState } from '../state.js';
import type { SubmitOutcome } from '../target-answers.js';
import { nextRetryAt, type RetryPolicy } from '../retry.js';
import { advance, blocked, bounded, finished, givenReason, isLive, plus } from './core.js';

/**
 * A dispatch's life up to its run: written, held for its parent, blocked, claimed for its submission, submitted, redispatched (CONTRACT §1, §4).
 */

export interface NewDispatch {
  readonly dispatchId: string;
  readonly origin: string;
  readonly target: string;
  readonly hop: number;
  readonly maxHops: number;
  readonly parentDispatchId: string | null;
  readonly deliveryMode: 'callback' | 'detached';
  readonly timeouts: Timeouts;
  /** When the accepted message was written: the `dispatch_written` receipt's time. */
  readonly writtenAt: string;
  /** How many evidence refs the dispatch expects (0: nothing to check, the outcome is `unverified`). */
  readonly expectedCount?: number;
  /** CONTRACT §10: how its result reaches the origin (default after_turn). */
  readonly resultDelivery?: ResultDelivery;
  /** CONTRACT §1 v2 / §11: order among waiting dispatches (default 5), and not before when. */
  readonly priority?: number;
  readonly notBefore?: string | null;
  /** When the origin sent the message (its queue's timestamp), if known. */
  readonly sentAt?: string;
}

/** A dispatch written and not yet submitted (attempt 1, nothing tried), not stored yet: its first write creates it (the domain never sees a version). */
export function accepted(input: NewDispatch, now: Date): NextState {
  return {
    dispatchId: input.dispatchId,
    origin: input.origin,
    target: input.target,
    createdAt: input.writtenAt,
    updatedAt: now.toISOString(),
    phase: 'accepted',
    blockedCode: null,
    blockedReason: null,
    attempt: 1,
    runId: null,
    lastSeq: null,
    supersededRuns: [],
    hop: input.hop,
    maxHops: input.maxHops,
    parentDispatchId: input.parentDispatchId,
    deliveryMode: input.deliveryMode,
    timeouts: input.timeouts,
    submission: { attempts: 0, nextRetryAt: null, lastError: null },
    execution: NO_EXECUTION,
    receipts: [{ event: 'dispatch_written', at: input.writtenAt, attempt: 1 }],
    evidence: { outcome: (input.expectedCount ?? 0) > 0 ? 'pending' : 'unverified', expectedCount: input.expectedCount ?? 0, deadline: null },
    dueAt: null,
    changes: ['accepted'],
    dueAtRead: null,
    ...(input.resultDelivery === 'inject' ? { resultDelivery: 'inject' as const } : {}),
    ...(input.priority !== undefined && input.priority !== DEFAULT_PRIORITY ? { priority: input.priority } : {}),
    ...(input.notBefore ? { notBefore: input.notBefore } : {}),
    ...(input.sentAt ? { sentAt: input.sentAt } : {}),
  };
}

/** The held child's first look for its parent, and the most it waits between two looks. */
const PARENT_CHECK_FIRST_SECONDS = 5;

const PARENT_CHECK_MAX_SECONDS = 60;

/**
 * The parent is not recorded (or is another origin's: "not in the ledger" to this one, so existence never
 * leaks). SQS standard queues do not keep order, so the child is held — accepted, `waitingFor: parent`,
 * due again after as long as it has waited already (5 s, 10 s, 20 s…, at most 60 s, never past the
 * deadline) — and blocked `unknown_parent` only once `waitSeconds` (PARENT_WAIT_SECONDS unless a deployment
 * sets less) have passed since it was written.
 */
export function parentMissing(state: DispatchState, now: Date, waitSeconds: number = PARENT_WAIT_SECONDS, parentHeld = false): NextState {
  const written = Date.parse(state.createdAt);
  // A parent recorded but itself held gives up on its own parent when that wait ends, and its child with
  // it (blocked as `unknown`): the child never gives up first, whatever the depth of the chain still
  // arriving. A cycle of held dispatches is the one case with no end but this bound: one wait per hop allowed.
  const deadline = written + waitSeconds * 1000 * (parentHeld ? MAX_HOPS_LIMIT + 1 : 1);
  if (now.getTime() >= deadline) {
    const why = parentHeld ? `is still held for its own parent after ${Math.round((now.getTime() - written) / 1000)} s` : `is not in the ledger (held ${waitSeconds} s for it)`;
    return blocked(state, 'unknown_parent', `parent ${state.parentDispatchId ?? ''} ${why}`, now);
  }
  const delay = Math.min(PARENT_CHECK_MAX_SECONDS * 1000, Math.max(PARENT_CHECK_FIRST_SECONDS * 1000, now.getTime() - written));
  const dueAt = new Date(Math.min(deadline, now.getTime() + delay)).toISOString();
  // Already held (a new dispatch is never held yet): only the next look moves.
  if (state.waitingFor === 'parent') return advance(state, 'rescheduled', now, { dueAt });
  return advance(state, 'waiting', now, { waitingFor: 'parent', dueAt });
}

/**
 * Whether the dispatch's hop is derived: it has no parent, or its hop was derived from the recorded
 * parent (hop = parent's + 1 ≥ 1). A hop of 0 under a parent is the placeholder of a child held for
 * it; one that left the wait without it (cancelled, blocked `unknown_parent`) never derives it.
 */
export const lineageDerived = (state: Pick<DispatchState, 'parentDispatchId' | 'hop'>): boolean => !state.parentDispatchId || state.hop > 0;

/**
 * The held child's parent is recorded now: its hop and budget are derived from it (hop = parent's + 1,
 * maxHops the smaller of the parent's and its own), and it is claimed for its submission like a retry
 * that came due — or blocked at once when that hop is over the budget, before any target contact.
 */
export function parentFound(state: DispatchState, parent: Pick<DispatchState, 'hop' | 'maxHops'>, now: Date, claimSeconds: number): NextState {
  const derived = { ...state, hop: parent.hop + 1, maxHops: Math.min(parent.maxHops, state.maxHops), waitingFor: undefined };
  if (derived.hop > derived.maxHops) return blocked(derived, 'hop_budget_exceeded', `hop ${derived.hop} > maxHops ${derived.maxHops}`, now);
  return advance(derived, 'claimed', now, { dueAt: plus(now, claimSeconds) });
}

/** Blocked reasons a new submission cannot change: such a dispatch is never submitted again. */
export const FINAL_BLOCKS: ReadonlySet<BlockedCode> = new Set(['invalid_fields', 'hop_budget_exceeded', 'unknown_parent']);

/**
 * The submitter holds the dispatch while it calls the target: its due time moves past the call, so an
 * overlapping tick or a duplicate leaves it alone. `now` must be the clock at the write, not a tick's start.
 */
export function submissionClaimed(state: DispatchState, now: Date, claimSeconds: number): NextState {
  return advance(state, 'claimed', now, { dueAt: plus(now, claimSeconds), waitingFor: undefined });
}

/**
 * A submitter holds this accepted dispatch right now (a claim not lapsed, not a wait or a retry's
 * backoff): its call to the target may be under way, so a cancel is recorded for it to act on rather
 * than ending a dispatch whose run may already exist.
 */
export const submissionInFlight = (state: DispatchState, now: Date): boolean =>
  state.phase === 'accepted' && !state.waitingFor && state.dueAt !== null && Date.parse(state.dueAt) > now.getTime() && state.dueAt !== state.submission.nextRetryAt;

/**
 * Applies what one submission call to the target returned. An answer that already reports a final
 * status goes through the same transition as a reported one (its event, `completedAt`, the evidence
 * grace window): a submission answer is never stored raw.
 */
export function submitted(state: DispatchState, outcome: SubmitOutcome, policy: RetryPolicy, now: Date): NextState {
  const at = now.toISOString();
  const attempts = state.submission.attempts + 1;
  switch (outcome.kind) {
    case 'accepted': {
      const next = advance(state, 'submitted', now, {
        phase: 'submitted',
        runId: outcome.runId,
        lastSeq: null,
        submission: { attempts, nextRetryAt: null, lastError: null },
        execution: { ...NO_EXECUTION, status: outcome.status, nativeStatus: outcome.status, lastActivityAt: at },
        receipts: [...state.receipts, { event: 'dispatch_submitted', at, attempt: state.attempt, runId: outcome.runId, requestId: outcome.requestId }],
        // The run is watched from now on: no activity for stallAfterSeconds makes it due.
        dueAt: plus(now, state.timeouts.stallAfterSeconds),
      });
      return isTerminal(outcome.status) ? finished(next, outcome.status, undefined, now) : next;
    }
    case 'rejected':
      return blocked(
        { ...state, submission: { ...state.submission, attempts, lastError: bounded(`HTTP ${outcome.httpStatus}: ${outcome.reason}`) } },
        'target_rejected',
        `HTTP ${outcome.httpStatus}: ${outcome.reason}`,
        now,
      );
    case 'unavailable': {
      const lastError = bounded(outcome.reason);
      const retryAt = nextRetryAt(policy, state.dispatchId, attempts, now);
      if (!retryAt) {
        return blocked({ ...state, submission: { attempts, nextRetryAt: null, lastError } }, 'retry_budget_spent', `${attempts} submission attempts failed; last: ${lastError}`, now);
      }
      return advance(state, 'retry_scheduled', now, { submission: { attempts, nextRetryAt: retryAt.toISOString(), lastError }, dueAt: retryAt.toISOString(), waitingFor: undefined });
    }
  }
}

export interface RedispatchFacts {
  readonly reason: string;
  /** The current run may be active and is superseded (forced). */
  readonly supersede: boolean;
  /** Seconds the redispatcher holds the dispatch while it submits. */
  readonly claimSeconds: number;
}

/** Superseded run ids kept in the hot state (the rest are answerable from their own run records). */
export const SUPERSEDED_IN_STATE = 10;

/**
 * A redispatch: back to `accepted` with the attempt to submit. A new attempt (a new Idempotency-Key)
 * only when a run is known to exist or the target refused the key; otherwise the same key again, so a
 * submission that timed out finds its run instead of starting a second writer. The ended attempt's
 * receipts and run leave the hot state (the caller commits their record in the same write). A manual
 * dispatch's redispatch is a new round of the person's work, so a new attempt too: the attestations of
 * the ended one stop counting. It forgets that it was manual; the one submission path records it so
 * again when its target is manual now (it may be http by then).
 */
export function redispatched(state: DispatchState, facts: RedispatchFacts, now: Date): NextState {
  const attempt = state.runId || state.manual || state.blockedCode === 'target_rejected' ? state.attempt + 1 : state.attempt;
  const next = advance(state, facts.supersede ? 'superseded' : 'redispatched', now, {
    // The ended attempt's result leaves with its record (endedResult); the attempt submitted next gets its own.
    result: undefined,
    ...(state.result && attempt === state.result.attempt ? { resultRound: (state.resultRound ?? 0) + 1 } : {}),
    phase: 'accepted',
    blockedCode: null,
    blockedReason: null,
    attempt,
    runId: null,
    lastSeq: null,
    supersededRuns: state.runId ? [...state.supersededRuns, state.runId].slice(-SUPERSEDED_IN_STATE) : state.supersededRuns,
    submission: { attempts: 0, nextRetryAt: null, lastError: null },
    execution: NO_EXECUTION,
    // The ended attempt's receipts go with its record (written in the same transaction).
    receipts: [],
    evidence: { outcome: state.evidence.expectedCount > 0 ? 'pending' : 'unverified', expectedCount: state.evidence.expectedCount, deadline: null },
    dueAt: plus(now, facts.claimSeconds),
    redispatch: { at: now.toISOString(), reason: givenReason(facts.reason), supersededRunId: facts.supersede ? state.runId : null, cancel: null },
    // The ended attempt's cancel and slot release stay with it; the new attempt joins the queue afresh.
    cancel: undefined,
    slotRelease: undefined,
    waitingFor: undefined,
    manual: undefined,
  });
  // A result still out is dropped with its attempt: its ack answers `superseded` from now on.
  return isLive(state.result) ? { ...next, changes: [...next.changes, 'result_dropped'] } : next;
}

/** What became of the old run's cancel request, recorded with the new attempt's submission. */
export function withCancelAnswer<S extends DispatchState>(state: S, cancel: string | null): S {
  return state.redispatch ? { ...state, redispatch: { ...state.redispatch, cancel } } : state;
}
