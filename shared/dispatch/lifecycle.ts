import type { LookupOutcome, TargetRunStatus } from '../targets/port.js';
import { clip } from '../text.js';
import { TERMINAL_STATUSES, type DispatchState, type MonitorStatus } from './state.js';
import { advance } from './transitions.js';

/**
 * The run's lifecycle as pure functions: run events from the target, what a lookup at the target
 * means, and what the monitor does with a due run. Rules (CONTRACT §4):
 * - terminal statuses are final; a later event changes nothing;
 * - losing sight of a run makes it `unknown` — never `failed` — and never touches what the target said
 *   (nativeStatus, completedAt, result);
 * - a real completion after a stall is recorded normally and clears the stall.
 */

export const RUN_EVENT_TYPES = ['heartbeat', 'progress', 'approval_requested', 'completed', 'failed', 'cancelled'] as const;
export type RunEventType = (typeof RUN_EVENT_TYPES)[number];

export interface RunEvent {
  readonly seq: number;
  readonly type: RunEventType;
  readonly approvalId?: string | undefined;
  readonly result?: { readonly summary?: string | undefined } | undefined;
}

/** Result previews kept in the hot state item. */
export const RESULT_PREVIEW_CHARS = 200;

export type RunEventOutcome =
  | { readonly kind: 'apply'; readonly next: DispatchState }
  /** Seen and acknowledged, not worth a write (a heartbeat inside the coalescing window). */
  | { readonly kind: 'coalesced' }
  /** Older or repeated seq, or a run already final: acknowledged, no change. */
  | { readonly kind: 'stale' }
  | { readonly kind: 'invalid'; readonly reason: string };

export const isTerminal = (status: string | null): boolean => status !== null && TERMINAL_STATUSES.has(status as TargetRunStatus);

/**
 * Activity is written at most once per window (a fifth of the stall timeout), the way Temporal
 * throttles heartbeats: a chatty target does not cost a write per heartbeat, and a stall can still
 * only be suspected after 80 % of the timeout without recorded activity — and is then looked up.
 */
export function coalescingWindowMs(state: DispatchState): number {
  return state.timeouts.stallAfterSeconds * 200;
}

function result(summary: string | undefined): DispatchState['execution']['result'] {
  return summary === undefined ? {} : { summary: clip(summary, RESULT_PREVIEW_CHARS) };
}

/** Applies one run event of the current run. */
export function applyRunEvent(state: DispatchState, event: RunEvent, now: Date): RunEventOutcome {
  const execution = state.execution;
  if (isTerminal(execution.nativeStatus) || (state.lastSeq !== null && event.seq <= state.lastSeq)) return { kind: 'stale' };
  const at = now.toISOString();
  const watchFrom = (from: Date) => new Date(from.getTime() + state.timeouts.stallAfterSeconds * 1000).toISOString();
  switch (event.type) {
    case 'heartbeat':
    case 'progress': {
      const quiet = execution.status === 'running' && execution.monitorStatus === null;
      const recent = execution.lastActivityAt !== null && now.getTime() - Date.parse(execution.lastActivityAt) < coalescingWindowMs(state);
      if (quiet && recent) return { kind: 'coalesced' };
      // Still waiting for the approval the ledger holds, whatever the monitor concluded meanwhile.
      const waiting = execution.nativeStatus === 'waiting_for_approval' && execution.pendingApproval !== null;
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
          dueAt: waiting ? state.dueAt : state.dueAt ?? watchFrom(now),
        }),
      };
    }
    case 'approval_requested': {
      if (!event.approvalId) return { kind: 'invalid', reason: 'approval_requested needs an approvalId' };
      return {
        kind: 'apply',
        next: advance(state, 'approval_requested', now, {
          lastSeq: event.seq,
          execution: {
            ...execution,
            status: 'waiting_for_approval',
            nativeStatus: 'waiting_for_approval',
            monitorStatus: null,
            lastActivityAt: at,
            pendingApproval: { approvalId: event.approvalId, requestedAt: at },
          },
          dueAt: new Date(now.getTime() + state.timeouts.approvalWaitSeconds * 1000).toISOString(),
        }),
      };
    }
    case 'completed':
    case 'failed':
    case 'cancelled':
      return {
        kind: 'apply',
        next: advance(state, event.type, now, {
          lastSeq: event.seq,
          execution: {
            status: event.type,
            nativeStatus: event.type,
            monitorStatus: null,
            lastActivityAt: at,
            completedAt: at,
            pendingApproval: null,
            result: result(event.result?.summary),
          },
          ...afterTerminal(state, event.type, now),
        }),
      };
  }
}

/**
 * After a final native status: a completion with expected evidence is checked by the platform from the
 * next tick, until completedAt + deliveryGraceSeconds; anything else has nothing to check (`unverified`).
 */
function afterTerminal(state: DispatchState, status: string, now: Date): Pick<DispatchState, 'evidence' | 'dueAt'> {
  if (status === 'completed' && state.evidence.expectedCount > 0) {
    return {
      evidence: { ...state.evidence, outcome: 'pending', deadline: new Date(now.getTime() + state.timeouts.deliveryGraceSeconds * 1000).toISOString() },
      dueAt: now.toISOString(),
    };
  }
  return { evidence: { ...state.evidence, outcome: 'unverified', deadline: null }, dueAt: null };
}

/** An observation lost: `unknown`, with why; what the target said stays as it was. */
function unobserved(state: DispatchState, monitorStatus: MonitorStatus, now: Date, recheckAt: Date): DispatchState {
  const kind = monitorStatus === 'stalled' ? 'stalled' : 'unobservable';
  const already = state.execution.monitorStatus === monitorStatus && state.execution.status === 'unknown';
  return advance(state, already ? 'rescheduled' : kind, now, {
    execution: { ...state.execution, status: 'unknown', monitorStatus },
    dueAt: recheckAt.toISOString(),
  });
}

/**
 * What a lookup at the target means for the current run. `stallSuspected`: the monitor came because
 * no activity was recorded for the stall timeout (a refresh asks without suspecting anything).
 * Returns undefined when nothing needs writing.
 */
export function reconcileLookup(state: DispatchState, lookup: LookupOutcome, now: Date, stallSuspected: boolean): DispatchState | undefined {
  const recheckAt = new Date(now.getTime() + state.timeouts.stallAfterSeconds * 1000);
  if (lookup.kind === 'not_found') return unobserved(state, 'target_not_found', now, recheckAt);
  if (lookup.kind === 'unavailable') return unobserved(state, 'lookup_unavailable', now, recheckAt);
  const run = lookup.run;
  if (isTerminal(run.status)) {
    // A final result the target holds but never reported: recorded as the target's own word.
    return advance(state, 'recovered', now, {
      execution: {
        status: run.status,
        nativeStatus: run.status,
        monitorStatus: null,
        lastActivityAt: state.execution.lastActivityAt,
        completedAt: now.toISOString(),
        pendingApproval: null,
        result: result(run.result?.summary),
      },
      ...afterTerminal(state, run.status, now),
    });
  }
  const ownsApproval = run.status === 'waiting_for_approval' && run.pendingApproval !== undefined && state.execution.pendingApproval?.approvalId === run.pendingApproval.approvalId;
  if (run.status === 'waiting_for_approval' && !ownsApproval) {
    // Waiting for an approval the ledger was never told about: nobody can answer it from here.
    return unobserved(state, 'stalled', now, recheckAt);
  }
  if (stallSuspected && !ownsApproval) return unobserved(state, 'stalled', now, recheckAt);
  // Seen alive: a lost lookup or a stall is cleared by the target's own answer.
  if (state.execution.monitorStatus === 'lookup_unavailable' || state.execution.monitorStatus === 'target_not_found' || state.execution.monitorStatus === 'stalled') {
    return advance(state, 'observed', now, {
      execution: { ...state.execution, status: run.status, nativeStatus: run.status, monitorStatus: null },
      dueAt: recheckAt.toISOString(),
    });
  }
  return undefined;
}

export type MonitorStep =
  | { readonly kind: 'write'; readonly next: DispatchState }
  /** A completed run whose expected evidence the platform must look for. */
  | { readonly kind: 'check' }
  | { readonly kind: 'lookup' }
  | { readonly kind: 'none' };

/** What the monitor does with a submitted run that came due, before any target contact. */
export function monitorStep(state: DispatchState, now: Date): MonitorStep {
  const execution = state.execution;
  if (execution.status === 'completed' && state.evidence.outcome === 'pending') return { kind: 'check' };
  if (isTerminal(execution.status)) return { kind: 'write', next: advance(state, 'rescheduled', now, { dueAt: null }) };
  if (execution.status === 'waiting_for_approval' && execution.pendingApproval) {
    const expiresAt = Date.parse(execution.pendingApproval.requestedAt) + state.timeouts.approvalWaitSeconds * 1000;
    if (now.getTime() < expiresAt) return { kind: 'write', next: advance(state, 'rescheduled', now, { dueAt: new Date(expiresAt).toISOString() }) };
    if (execution.monitorStatus === 'approval_wait_expired') return { kind: 'write', next: advance(state, 'rescheduled', now, { dueAt: null }) };
    // The approval stays pending (never auto-denied): only the expiry is recorded.
    return { kind: 'write', next: advance(state, 'approval_wait_expired', now, { execution: { ...execution, monitorStatus: 'approval_wait_expired' }, dueAt: null }) };
  }
  const lastActivity = execution.lastActivityAt ? Date.parse(execution.lastActivityAt) : Date.parse(state.updatedAt);
  const stallAt = lastActivity + state.timeouts.stallAfterSeconds * 1000;
  if (now.getTime() < stallAt && execution.status !== 'unknown') {
    return { kind: 'write', next: advance(state, 'rescheduled', now, { dueAt: new Date(stallAt).toISOString() }) };
  }
  return { kind: 'lookup' };
}
