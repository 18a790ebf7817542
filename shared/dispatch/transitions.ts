import type { SubmitOutcome } from '../targets/port.js';
import { clip, printable } from '../text.js';
import { nextRetryAt, type RetryPolicy } from './retry.js';
import { blockedReason, NO_EXECUTION, type BlockedCode, type ChangeKind, type DispatchState, type Timeouts } from './state.js';

/**
 * The next version of a state: `patch` applied, the version advanced, and `kind` recorded as what
 * changed. Changes of a version never stored (version 0, built in memory by intake) carry over, so the
 * first stored version says everything it did ("accepted" and "submitted").
 */
export function advance(state: DispatchState, kind: ChangeKind, now: Date, patch: Partial<DispatchState> = {}): DispatchState {
  return {
    ...state,
    ...patch,
    updatedAt: now.toISOString(),
    changes: state.version === 0 ? [...state.changes, kind] : [kind],
    version: state.version + 1,
  };
}

/**
 * One more change in a write already under way (its version advanced once): both changes are
 * committed together, and the publisher turns each into its event.
 */
export function alsoChange(state: DispatchState, kind: ChangeKind, now: Date, patch: Partial<DispatchState> = {}): DispatchState {
  return { ...state, ...patch, updatedAt: now.toISOString(), changes: [...state.changes, kind] };
}

/**
 * The dispatch's phase transitions, as pure functions from (state, fact, now) to the next state.
 * Use cases never assemble a state by hand; the store writes what these return, conditioned on the
 * version they started from.
 */

const MAX_ERROR = 300;
/** A target's error, as stored in `submission.lastError` and shown in the view. */
const bounded = (text: string): string => clip(printable(text), MAX_ERROR);

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
}

/** A dispatch written and not yet submitted (attempt 1, nothing tried). */
export function accepted(input: NewDispatch, now: Date): DispatchState {
  return {
    dispatchId: input.dispatchId,
    origin: input.origin,
    target: input.target,
    createdAt: input.writtenAt,
    updatedAt: now.toISOString(),
    phase: 'accepted',
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
    version: 0,
    changes: ['accepted'],
  };
}

/** Blocked before any target contact, or after the target refused or the retry budget ran out. */
export function blocked(state: DispatchState, code: BlockedCode, detail: string, now: Date): DispatchState {
  const reason = blockedReason(code, detail);
  return advance(state, 'blocked', now, {
    phase: 'blocked',
    blockedReason: reason,
    submission: { ...state.submission, nextRetryAt: null },
    receipts: [...state.receipts, { event: 'dispatch_blocked', at: now.toISOString(), attempt: state.attempt, reason }],
    dueAt: null,
  });
}

/** Applies what one submission call to the target returned. */
export function submitted(state: DispatchState, outcome: SubmitOutcome, policy: RetryPolicy, now: Date): DispatchState {
  const at = now.toISOString();
  const attempts = state.submission.attempts + 1;
  switch (outcome.kind) {
    case 'accepted':
      return advance(state, 'submitted', now, {
        phase: 'submitted',
        runId: outcome.runId,
        submission: { attempts, nextRetryAt: null, lastError: null },
        execution: { ...NO_EXECUTION, status: outcome.status, nativeStatus: outcome.status, lastActivityAt: at },
        receipts: [
          ...state.receipts,
          { event: 'dispatch_submitted', at, attempt: state.attempt, runId: outcome.runId, requestId: outcome.requestId },
        ],
        // The run is watched from now on: no activity for stallAfterSeconds makes it due.
        dueAt: new Date(now.getTime() + state.timeouts.stallAfterSeconds * 1000).toISOString(),
      });
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
        return blocked(
          { ...state, submission: { attempts, nextRetryAt: null, lastError } },
          'retry_budget_spent',
          `${attempts} submission attempts failed; last: ${lastError}`,
          now,
        );
      }
      return advance(state, 'retry_scheduled', now, {
        submission: { attempts, nextRetryAt: retryAt.toISOString(), lastError },
        dueAt: retryAt.toISOString(),
      });
    }
  }
}
