import { ATTENTION_KINDS, type AttentionKind } from '@dispatch-ledger/protocol';
import { isTerminal, nativeStatusOf, type DispatchState } from './state.js';
import { dispatchCommand, optionWords } from './commands.js';

/** Work that needs a person (CONTRACT §2 `GET /attention`), across all origins: its kinds are the protocol's. */
export { ATTENTION_KINDS, type AttentionKind };

/** Which list a dispatch belongs on now, if any. Pure: derived from the state alone. */
export function attentionKind(state: DispatchState): AttentionKind | undefined {
  // Its runtime runs it again after its end was recorded (CONTRACT §17): a second writer may be at work
  // right now, which outranks everything else; until a redispatch.
  if (state.phase === 'submitted' && state.execution.redriven) return 'redriven';
  // A result nobody will receive (too many attempts, or expired) comes next: the origin never heard
  // back, whatever else happened; a superseded one left with its attempt.
  if (state.result?.state === 'dropped' && state.result.droppedReason !== 'superseded') return 'result_dropped';
  if (state.phase === 'blocked') return 'blocked';
  if (state.phase === 'accepted' && state.submission.lastError) return 'retrying';
  // The origin asked for a cancel the target has not confirmed yet (CONTRACT §2 v2).
  if (state.phase === 'submitted' && state.cancel && !isTerminal(state.execution.nativeStatus)) return 'cancel_pending';
  if (state.execution.monitorStatus === 'approval_wait_expired') return 'approval_wait_expired';
  if (state.execution.status === 'unknown') return 'unknown';
  if (state.evidence.outcome === 'orphan_no_delivery') return 'orphan_no_delivery';
  return undefined;
}

/** One line of the attention list. */
export function attentionEntry(state: DispatchState, kind: AttentionKind) {
  return {
    kind,
    dispatchId: state.dispatchId,
    origin: state.origin,
    target: state.target,
    // When this problem began (CONTRACT §2 V3), carried by every write that keeps it (transitions/core.ts
    // `withAttention`); a write that keeps the problem — a re-lookup, a claim — never moves it.
    // (A state stored before the field existed falls back to its last write, as the feed's order does.)
    since: state.attentionSince ?? state.updatedAt,
    runId: state.runId,
    attempt: state.attempt,
    status: state.execution.status,
    monitorStatus: state.execution.monitorStatus,
    // An orphan names what never arrived, so a person (the status page) sees it without opening the dispatch.
    ...(kind === 'orphan_no_delivery' ? { missing: state.evidence.missing ?? [] } : {}),
    reason:
      kind === 'blocked'
        ? state.blockedReason
        : kind === 'retrying'
          ? `${state.submission.attempts} submission attempt(s) failed; next ${state.submission.nextRetryAt ?? '—'}; last: ${state.submission.lastError ?? ''}`
          : kind === 'orphan_no_delivery'
            ? 'completed, but the expected evidence never arrived'
            : kind === 'result_dropped'
              ? `result ${state.result?.id ?? ''} dropped (${state.result?.droppedReason ?? ''}) after ${state.result?.deliveryAttempts ?? 0} delivery attempt(s); the payload is kept: npx ledger inbox list --state dropped --origin ${state.origin}`
            : kind === 'cancel_pending'
              ? `cancel asked ${state.cancel?.requestedAt ?? ''} (${state.cancel?.asks ?? 0} time(s)); the target's last answer: ${state.cancel?.answer ?? 'none yet'}${state.cancel?.nextAskAt ? `; asked again ${state.cancel.nextAskAt}` : ''}`
            : kind === 'redriven'
              ? redrivenReason(state)
            : kind === 'approval_wait_expired'
              ? `approval ${state.execution.pendingApproval?.approvalId ?? ''} still pending`
              : state.execution.monitorStatus === 'target_not_found'
                ? `lost sight of the run (target_not_found); ${whenTargetForgot(state)}`
                : `lost sight of the run (${state.execution.monitorStatus ?? 'unknown'}); check: ${dispatchCommand(state, 'check', '--refresh')}`,
  };
}

/**
 * A run its runtime redrove after the ledger recorded its end: what stands, what runs, and the ledger's
 * own way to run the work again (a forced redispatch: the redriven run is asked to stop and fenced).
 */
export function redrivenReason(state: DispatchState): string {
  const redriven = state.execution.redriven;
  return (
    `the ledger recorded its end (${nativeStatusOf(state.execution) ?? '—'}); its runtime runs it again, outside the ledger (redrive ${redriven?.count ?? 1}, learned ${redriven?.at ?? '—'}). ` +
    `To run the work under the ledger instead: ${dispatchCommand(state, 'redispatch', '--force --reason R')} (asks the redriven run to stop)`
  );
}

/**
 * What a person can do about a run its target answers 404 for (looking it up again only finds the same
 * answer): the target's own records, a forced redispatch, and the slot the run still holds, if any.
 */
export function whenTargetForgot(state: DispatchState): string {
  const slot = state.slot ? `; its slot: npx ledger slots release --target ${state.target} ${state.runId === null ? '--run-id RUN' : optionWords('run-id', state.runId)} ${optionWords('dispatch-id', state.dispatchId)} --reason R` : '';
  return `the target's own records say what became of it; to run the work again: ${dispatchCommand(state, 'redispatch', '--force --reason R')}${slot}`;
}
