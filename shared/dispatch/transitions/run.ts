import { isTerminal, type DispatchState, type MonitorStatus, type ResultBodyRef, type NextState } from '../state.js';
import type { LookupOutcome, TargetRunView } from '../target-answers.js';
import { clip } from '../../text.js';
import type { RunEventType } from '@dispatch-ledger/protocol';
import { advance, cancelAwaitsEnd, cancelPending, finished, isLive, plus, rescheduled } from './core.js';

/**
 * Watching the run (CONTRACT §2, §3): the target's events, the lookups, the monitor's step, approvals.
 */

/** The events a target reports (the protocol's words). */
export { RUN_EVENT_TYPES, type RunEventType } from '@dispatch-ledger/protocol';

export interface RunEvent {
  readonly seq: number;
  readonly type: RunEventType;
  readonly approvalId?: string | undefined;
  readonly result?: { readonly summary?: string | undefined; readonly body?: ResultBodyRef | undefined } | undefined;
  /** A final event's own word for its status (CONTRACT V3 §2), checked at the API. */
  readonly nativeStatus?: string | undefined;
}

export type RunEventOutcome =
  | { readonly kind: 'apply'; readonly next: NextState }
  /** Seen and acknowledged, not worth a write (a heartbeat inside the coalescing window). */
  | { readonly kind: 'coalesced' }
  /** Older or repeated seq, or a run already final: acknowledged, no change. */
  | { readonly kind: 'stale' }
  | { readonly kind: 'invalid'; readonly reason: string };

/**
 * Activity is written at most once per window (a fifth of the stall timeout), the way Temporal
 * throttles heartbeats: a chatty target does not cost a write per heartbeat. Because an absorbed
 * heartbeat is not recorded, a stall is declared only once the stall timeout has passed after the end
 * of the window (see `stallDeadline`): coalescing may delay a recorded activity, never a verdict.
 */
export function coalescingWindowMs(state: DispatchState): number {
  return state.timeouts.stallAfterSeconds * 200;
}

/**
 * When silence becomes a stall: `stallAfterSeconds` after the last activity that may have happened.
 * Activity absorbed by coalescing can be as late as the end of the window after the recorded one.
 */
export function stallDeadline(state: DispatchState): number {
  const recorded = Date.parse(state.execution.lastActivityAt ?? state.updatedAt);
  return recorded + coalescingWindowMs(state) + state.timeouts.stallAfterSeconds * 1000;
}

const waitingForApproval = (state: DispatchState): boolean => state.execution.nativeStatus === 'waiting_for_approval' && state.execution.pendingApproval !== null;

/** Applies one run event of the current run. */
export function applyRunEvent(state: DispatchState, event: RunEvent, now: Date): RunEventOutcome {
  const execution = state.execution;
  if (isTerminal(execution.nativeStatus) || (state.lastSeq !== null && event.seq <= state.lastSeq)) return { kind: 'stale' };
  const at = now.toISOString();
  switch (event.type) {
    case 'heartbeat':
    case 'progress': {
      // Still waiting for the approval the ledger holds, whatever the monitor concluded meanwhile.
      const waiting = waitingForApproval(state);
      const quiet = waiting ? execution.status === 'waiting_for_approval' : execution.status === 'running' && execution.monitorStatus === null;
      const recent = execution.lastActivityAt !== null && now.getTime() - Date.parse(execution.lastActivityAt) < coalescingWindowMs(state);
      if (quiet && recent) return { kind: 'coalesced' };
      return {
        kind: 'apply',
        next: advance(state, 'activity', now, {
          lastSeq: event.seq,
          execution: {
            ...execution,
            status: waiting ? 'waiting_for_approval' : 'running',
            nativeStatus: waiting ? 'waiting_for_approval' : 'running',
            // Activity clears a stall or a lost lookup, never an expired approval (that is about the approval clock).
            monitorStatus: execution.monitorStatus === 'approval_wait_expired' ? 'approval_wait_expired' : null,
            lastActivityAt: at,
          },
          // Watching resumes from this activity (an approval keeps its own clock).
          dueAt: waiting ? state.dueAt : state.dueAt ?? plus(now, state.timeouts.stallAfterSeconds),
        }),
      };
    }
    case 'approval_requested':
      if (!event.approvalId) return { kind: 'invalid', reason: 'approval_requested needs an approvalId' };
      // The approval the ledger already holds (adopted from a lookup, or a retried report): its clock
      // and its event stand; only the seq and the activity are new.
      if (execution.pendingApproval?.approvalId === event.approvalId) {
        return { kind: 'apply', next: advance(state, 'activity', now, { lastSeq: event.seq, execution: { ...execution, lastActivityAt: at } }) };
      }
      return { kind: 'apply', next: { ...approvalRequested(state, event.approvalId, at, now), lastSeq: event.seq } };
    case 'completed':
    case 'failed':
    case 'cancelled':
      return { kind: 'apply', next: { ...finished(state, event.type, event.result?.summary, now, event.type, event.result?.body, event.nativeStatus), lastSeq: event.seq } };
  }
}

/**
 * The runtime's own word that the run failed, after its own retries — Lambda's on-failure destination
 * (CONTRACT §12): recorded as a reported failure (`Run Failed`), with the runtime's error as its result and its
 * error type as the nativeStatus (`native`).
 */
export function runFailedByRuntime(state: DispatchState, error: string, now: Date, native?: string): NextState {
  return finished(state, 'failed', error, now, 'failed', undefined, native);
}

/**
 * A runtime the ledger cannot call back through a target endpoint (a state machine, CONTRACT §17) said
 * its run ended: recorded as a reported end — the same transition a target's final event takes — with
 * its own word for the status, never as something the ledger recovered.
 */
export function runEndedByRuntime(state: DispatchState, run: TargetRunView, now: Date, body?: ResultBodyRef): NextState {
  if (!isTerminal(run.status)) throw new RangeError(`a run ends with a final status, not ${run.status}`);
  return finished(state, run.status, run.result?.summary, now, run.status as 'completed' | 'failed' | 'cancelled', body, run.nativeStatus);
}

/**
 * The runtime runs an ended run again (a state machine's execution redriven outside the ledger,
 * CONTRACT §17): the recorded end stands — final is final — and what the runtime now does is kept
 * beside it, so the dispatch needs a person (`redriven` on the attention list) until a redispatch, the
 * ledger's own way to run the work again. Nothing to write when this redrive is known already.
 */
export function runRedriven(state: DispatchState, count: number, now: Date): NextState | undefined {
  if (!isTerminal(state.execution.nativeStatus)) throw new RangeError('only an ended run is redriven');
  if (state.execution.redriven && state.execution.redriven.count >= count) return undefined;
  return advance(state, 'redriven', now, { execution: { ...state.execution, redriven: { at: now.toISOString(), count } } });
}

/**
 * A runtime asked for an approval through the ledger (a state machine's task token on the approvals
 * queue, CONTRACT §17), under the approval id the ledger chose: the run waits, the approval clock starts.
 */
export function approvalAsked(state: DispatchState, approvalId: string, now: Date): NextState {
  return approvalRequested(state, approvalId, now.toISOString(), now);
}

function approvalRequested(state: DispatchState, approvalId: string, requestedAt: string, now: Date): NextState {
  return advance(state, 'approval_requested', now, {
    execution: {
      ...state.execution,
      status: 'waiting_for_approval',
      nativeStatus: 'waiting_for_approval',
      monitorStatus: null,
      lastActivityAt: now.toISOString(),
      pendingApproval: { approvalId, requestedAt },
    },
    dueAt: approvalWatchAt({ ...state, execution: { ...state.execution, monitorStatus: null, pendingApproval: { approvalId, requestedAt } } }, now).toISOString(),
  });
}

/**
 * When the monitor next comes to a run that waits for an approval: at the wait's expiry, and before it
 * every stall window, to look the run up for a final status alone — a runtime's end may reach the
 * ledger only as an event that can be lost (CONTRACT §17), and a run that ended while it waited must
 * not wait forever. After the expiry the looks space out with the wait's age (up to
 * {@link MAX_LOOKUP_BACKOFF_SECONDS}): a person may take days, a look never costs a loop.
 */
export function approvalWatchAt(state: DispatchState, now: Date): Date {
  const requested = Date.parse(state.execution.pendingApproval?.requestedAt ?? now.toISOString());
  const expiresAt = requested + state.timeouts.approvalWaitSeconds * 1000;
  const stall = state.timeouts.stallAfterSeconds * 1000;
  const expired = state.execution.monitorStatus === 'approval_wait_expired';
  // Past its expiry and not recorded expired yet (adopted late, or a look crossed it): due now.
  if (!expired && expiresAt <= now.getTime()) return new Date(expiresAt);
  const spacing = expired ? Math.min(Math.max(now.getTime() - requested, stall), MAX_LOOKUP_BACKOFF_SECONDS * 1000) : stall;
  const next = now.getTime() + spacing;
  return new Date(expired ? next : Math.min(expiresAt, next));
}

/**
 * What a look at a run that waits for an approval records: its end, when the target says it ended (the
 * look that finds it is the ledger's own, like every lookup's: `recovered`); anything else — still waiting,
 * not found, unreachable — changes nothing about the run or the approval's clock, only when to look again.
 */
export function approvalWaitLookedUp(state: DispatchState, lookup: LookupOutcome, now: Date, body?: ResultBodyRef): NextState {
  if (lookup.kind === 'found' && isTerminal(lookup.run.status) && !isTerminal(state.execution.nativeStatus)) {
    return finished(state, lookup.run.status, lookup.run.result?.summary, now, 'recovered', body, lookup.run.nativeStatus);
  }
  return rescheduled(state, now, approvalWatchAt(state, now));
}

/** Lookups of a run that stays unknown back off, doubling from the stall timeout, up to this. */
export const MAX_LOOKUP_BACKOFF_SECONDS = 6 * 3600;

/**
 * An observation lost: `unknown`, with why; what the target said stays as it was. Looked up again
 * after a delay that doubles while it stays unknown (from stallAfterSeconds, capped at 6 h): never a
 * loop of constant cost.
 */
function unobserved(state: DispatchState, monitorStatus: MonitorStatus, now: Date): NextState {
  const kind = monitorStatus === 'stalled' ? 'stalled' : 'unobservable';
  const already = state.execution.status === 'unknown';
  const lookups = already ? (state.execution.unknownLookups ?? 1) + 1 : 1;
  const delay = Math.min(state.timeouts.stallAfterSeconds * 2 ** (lookups - 1), MAX_LOOKUP_BACKOFF_SECONDS);
  const same = already && state.execution.monitorStatus === monitorStatus;
  return advance(state, same ? 'rescheduled' : kind, now, {
    execution: { ...state.execution, status: 'unknown', monitorStatus, unknownLookups: lookups },
    dueAt: plus(now, delay),
  });
}

/**
 * What a lookup at the target means for the current run. `stallSuspected`: the monitor came because
 * no activity was recorded for the stall timeout (a refresh asks without suspecting anything).
 * Returns undefined when nothing needs writing.
 */
export function reconcileLookup(state: DispatchState, lookup: LookupOutcome, now: Date, stallSuspected: boolean, body?: ResultBodyRef): NextState | undefined {
  if (isTerminal(state.execution.nativeStatus)) return undefined;
  if (lookup.kind === 'not_found') return unobserved(state, 'target_not_found', now);
  if (lookup.kind === 'unavailable') return unobserved(state, 'lookup_unavailable', now);
  const run = lookup.run;
  // A final result the target holds but never reported: recorded as the target's own word.
  if (isTerminal(run.status)) return finished(state, run.status, run.result?.summary, now, 'recovered', body, run.nativeStatus);
  const held = state.execution.pendingApproval;
  if (run.status === 'waiting_for_approval' && run.pendingApproval && held?.approvalId !== run.pendingApproval.approvalId) {
    // Waiting for an approval the ledger never heard of: adopted, so approve and cancel work.
    const requestedAt = run.pendingApproval.requestedAt && !Number.isNaN(Date.parse(run.pendingApproval.requestedAt)) ? new Date(run.pendingApproval.requestedAt).toISOString() : now.toISOString();
    return approvalRequested(state, clip(run.pendingApproval.approvalId, 128), requestedAt, now);
  }
  const ownsApproval = run.status === 'waiting_for_approval' && held !== null;
  // A runtime that sends no heartbeats (a state machine, CONTRACT §17) moved within the stall window by
  // its own record: that is its activity, recorded at that time — not a stall.
  const moved = run.lastActivityAt === undefined ? Number.NaN : Math.min(Date.parse(run.lastActivityAt), now.getTime());
  if (stallSuspected && run.status === 'running' && now.getTime() - moved < state.timeouts.stallAfterSeconds * 1000) {
    const lost = state.execution.status === 'unknown' || state.execution.monitorStatus !== null;
    const execution = { ...state.execution, status: run.status, nativeStatus: run.status, monitorStatus: null, unknownLookups: undefined, lastActivityAt: new Date(moved).toISOString() };
    return advance(state, lost ? 'observed' : 'activity', now, { execution, dueAt: new Date(stallDeadline({ ...state, execution })).toISOString() });
  }
  if (stallSuspected && !ownsApproval) return unobserved(state, 'stalled', now);
  // Seen alive: a lost lookup or a stall is cleared by the target's own answer.
  const lost = state.execution.monitorStatus === 'lookup_unavailable' || state.execution.monitorStatus === 'target_not_found' || state.execution.monitorStatus === 'stalled';
  if (lost || state.execution.status === 'unknown') {
    return advance(state, 'observed', now, {
      execution: { ...state.execution, status: run.status, nativeStatus: run.status, monitorStatus: null, unknownLookups: undefined },
      dueAt: plus(now, state.timeouts.stallAfterSeconds),
    });
  }
  return undefined;
}

/** A refresh looks the run up at most once in this many seconds per dispatch (CONTRACT §2 V3); more answer the stored view. */
export const REFRESH_INTERVAL_SECONDS = 10;

/** A refresh asked within the interval: answered from the stored view, the target not called. */
export const refreshThrottled = (state: DispatchState, now: Date): boolean =>
  !!state.lastRefreshAt && now.getTime() - Date.parse(state.lastRefreshAt) < REFRESH_INTERVAL_SECONDS * 1000;

/**
 * What a refresh (`GET /dispatches/{id}?refresh=true`) found at the target, recorded through the same
 * transition as the monitor's lookup — so `check`, `check --refresh` and `attention` agree — with when
 * it asked (the throttle reads it; a run found as recorded is one `observed` write of that alone).
 */
export function refreshRecorded(state: DispatchState, lookup: LookupOutcome, now: Date, stallSuspected: boolean, body?: ResultBodyRef): NextState {
  const next = reconcileLookup(state, lookup, now, stallSuspected, body) ?? advance(state, 'observed', now);
  return { ...next, lastRefreshAt: now.toISOString() };
}

export type MonitorStep =
  | { readonly kind: 'write'; readonly next: NextState }
  /** A completed run whose expected evidence the platform must look for. */
  | { readonly kind: 'check' }
  | { readonly kind: 'lookup' }
  /** A run waiting for an approval, looked up for a final status alone (see {@link approvalWaitLookedUp}). */
  | { readonly kind: 'approval_lookup' }
  /** A settled dispatch whose result is still out: its expiry is on the origin's clock. */
  | { readonly kind: 'result' }
  /** A cancel to ask of the target again (it could not be reached before). */
  | { readonly kind: 'cancel' }
  /** A cancel the target answered, its run not over yet: looked up for its end, within the stall window (never a stall). */
  | { readonly kind: 'cancel_lookup' };

/** What the monitor does with a submitted run that came due, before any target contact. */
export function monitorStep(state: DispatchState, now: Date): MonitorStep {
  const execution = state.execution;
  if (execution.status === 'completed' && state.evidence.outcome === 'pending') return { kind: 'check' };
  if (isTerminal(execution.status) && isLive(state.result)) return { kind: 'result' };
  if (isTerminal(execution.status)) return { kind: 'write', next: rescheduled(state, now, null) };
  // A cancel the target could not be asked yet: ask again before anything else.
  const ask = cancelPending(state) ? state.cancel?.nextAskAt : null;
  if (ask && Date.parse(ask) <= now.getTime()) return { kind: 'cancel' };
  if (execution.status === 'waiting_for_approval' && execution.pendingApproval) {
    const expiresAt = Date.parse(execution.pendingApproval.requestedAt) + state.timeouts.approvalWaitSeconds * 1000;
    if (now.getTime() >= expiresAt && execution.monitorStatus !== 'approval_wait_expired') {
      // The approval stays pending (never auto-denied): only the expiry is recorded, the run watched on.
      const expired = { ...execution, monitorStatus: 'approval_wait_expired' as const };
      return { kind: 'write', next: advance(state, 'approval_wait_expired', now, { execution: expired, dueAt: approvalWatchAt({ ...state, execution: expired }, now).toISOString() }) };
    }
    return { kind: 'approval_lookup' };
  }
  const stallAt = stallDeadline(state);
  if (now.getTime() < stallAt && execution.status !== 'unknown') return cancelAwaitsEnd(state, now) ? { kind: 'cancel_lookup' } : { kind: 'write', next: rescheduled(state, now, new Date(stallAt)) };
  return { kind: 'lookup' };
}

/** The target took the decision on the pending approval: recorded, the run watched again. */
export function approvalDecided(state: DispatchState, decision: 'approve' | 'cancel', now: Date): NextState {
  const approvalId = state.execution.pendingApproval?.approvalId;
  return advance(state, 'approval_decided', now, {
    execution: {
      ...state.execution,
      ...(approvalId ? { lastDecision: { approvalId, decision, at: now.toISOString() } } : {}),
      ...(decision === 'approve' && !isTerminal(state.execution.status) ? { status: 'running' as const } : {}),
      monitorStatus: null,
      pendingApproval: null,
      lastActivityAt: now.toISOString(),
    },
    dueAt: plus(now, state.timeouts.stallAfterSeconds),
  });
}
