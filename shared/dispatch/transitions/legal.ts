import { isTerminal, type ChangeKind, type DispatchState, type NextState, type Phase } from '../state.js';
import { PHASES as PROTOCOL_PHASES } from '@dispatch-ledger/protocol';

/**
 * The dispatch's state machine, as data and named transitions (CONTRACT §1, §4, §5).
 *
 * - `LEGAL` says which change kinds may move a dispatch from one phase to another; `assertLegal` checks
 *   every write against it (the repository's `writeCondition` calls it), so an illegal move cannot be
 *   written from anywhere.
 * - The transitions live by capability beside this file (lifecycle, run, evidence, inbox, flow, manual; the
 *   pieces they share in core.ts). Each is a pure function (state, fact, now) → next state; callers never pass a
 *   patch. The next state (`NextState`) records what changed (`changes`), which the publisher turns into events.
 * - Rules: terminal statuses are final; losing sight of a run makes it `unknown` — never `failed` —
 *   and never touches what the target said (nativeStatus, completedAt, result); a real completion
 *   after a stall is recorded normally and clears the stall.
 */

export const PHASES = PROTOCOL_PHASES satisfies readonly Phase[];

/** The inbox's own changes of a result (CONTRACT §10): written in the phase the dispatch is in. */
const RESULT_CHANGES: readonly ChangeKind[] = ['result_ready', 'result_claimed', 'result_renewed', 'result_released', 'result_delivered', 'result_dropped'];

/** Change kinds that may be written while the phase moves from → to. Anything else is refused. */
export const LEGAL: Readonly<Record<Phase, Partial<Record<Phase, readonly ChangeKind[]>>>> = {
  accepted: {
    accepted: ['claimed', 'retry_scheduled', 'rescheduled', 'redispatched', 'waiting', 'cancel_requested', 'manual_result_attested'],
    submitted: ['submitted', 'completed', 'failed', 'cancelled', 'approval_requested', 'handled', 'orphaned', 'evidence_unverified', 'result_ready'],
    blocked: ['blocked', 'result_ready'],
    // Cancelled before it was ever submitted (CONTRACT §2 v2): its origin hears back like a blocked one's.
    cancelled: ['dispatch_cancelled', 'result_ready'],
  },
  submitted: {
    submitted: [
      'activity',
      'approval_requested',
      'approval_decided',
      'completed',
      'failed',
      'cancelled',
      'recovered',
      'stalled',
      'unobservable',
      'approval_wait_expired',
      'observed',
      'rescheduled',
      'handled',
      'orphaned',
      'evidence_unverified',
      'evidence_recheck',
      'cancel_requested',
      'cancel_answered',
      'slot_released',
      'redriven',
      ...RESULT_CHANGES,
    ],
    // Only a redispatch leaves `submitted`: the old run superseded (or proven final), attempt + 1 next.
    accepted: ['redispatched', 'superseded', 'result_dropped'],
  },
  blocked: {
    accepted: ['redispatched', 'result_dropped'],
    // A blocked dispatch's result is claimed, acked, released or dropped like any other.
    blocked: [...RESULT_CHANGES, 'rescheduled'],
  },
  cancelled: {
    accepted: ['redispatched', 'result_dropped'],
    cancelled: [...RESULT_CHANGES, 'rescheduled'],
  },
};

/** A write the state machine does not allow: a bug in a caller, never an input's fault. */
export class IllegalTransitionError extends Error {
  override readonly name = 'IllegalTransitionError';
  constructor(
    readonly dispatchId: string,
    readonly from: Phase,
    readonly to: Phase,
    readonly changes: readonly ChangeKind[],
  ) {
    super(`${dispatchId}: ${from} → ${to} by ${changes.join('+') || '(nothing)'} is not a legal transition`);
  }
}

/**
 * Throws when `next` is not a legal successor of `from`, the state read: its changes are not among those
 * LEGAL allows from `from`'s phase to `next`'s, a final status would change, or a run changes outside a
 * submission or a redispatch. The repository conditions the write on the version read and `from`'s phase
 * (`writeCondition`, shared/ledger/repository.ts); a dispatch not stored yet is created by any first write.
 */
export function assertLegal(from: DispatchState, next: NextState): void {
  const illegal = () => new IllegalTransitionError(from.dispatchId, from.phase, next.phase, next.changes);
  if (next.dispatchId !== from.dispatchId) throw illegal();
  const allowed = LEGAL[from.phase][next.phase];
  if (!allowed || next.changes.length === 0 || next.changes.some((kind) => !allowed.includes(kind))) throw illegal();
  // Terminal is final: the same run's final status never changes again.
  if (next.runId === from.runId && isTerminal(from.execution.nativeStatus) && next.execution.nativeStatus !== from.execution.nativeStatus) throw illegal();
  // A run is fenced: only a submission (accepted → submitted) or a redispatch may change it.
  if (next.runId !== from.runId && !(from.phase === 'accepted' && next.phase === 'submitted') && !(next.phase === 'accepted' && from.phase !== 'accepted')) throw illegal();
}
