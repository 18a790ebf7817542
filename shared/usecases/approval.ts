import { approvalDecided } from '../dispatch/transitions/run.js';
import type { DispatchWorkDeps, StoredState } from '../ledger/port.js';
import { updateDispatch } from '../ledger/repository.js';
import { clip, printable } from '../text.js';
import { notRegistered } from '../targets/port.js';

export type ApprovalDecisionOutcome =
  | { readonly kind: 'decided'; readonly approvalId: string; readonly decision: 'approve' | 'cancel'; readonly recorded: boolean }
  /** That approvalId is not the pending one (nothing sent to the target). */
  | { readonly kind: 'not_pending'; readonly pendingApprovalId: string | null }
  /** The target does not hold this approval as pending. */
  | { readonly kind: 'target_conflict' }
  /** The target could not be reached: nothing is recorded as decided. */
  | { readonly kind: 'target_unreachable'; readonly reason: string };

/**
 * An origin decides a pending approval (CONTRACT §2): forwarded to the target, recorded only once the
 * target took it — and then recorded even when the first write loses a race (a heartbeat, the approval
 * clock): it is re-read and written again as long as this approval is still the pending one. If the
 * run moved on meanwhile (the target already reported the outcome), there is nothing left to record.
 */
export async function decideApproval(
  deps: DispatchWorkDeps,
  stored: StoredState,
  request: { readonly approvalId: string; readonly decision: 'approve' | 'cancel' },
): Promise<ApprovalDecisionOutcome> {
  const { state } = stored;
  const pending = state.execution.pendingApproval;
  if (!pending || pending.approvalId !== request.approvalId || !state.runId) return { kind: 'not_pending', pendingApprovalId: pending?.approvalId ?? null };
  const registration = await deps.store.getTarget(state.target);
  if (!registration) return { kind: 'target_unreachable', reason: notRegistered(state.target) };
  const answer = await deps.targetFor(registration).decideApproval(state.runId, request.approvalId, request.decision, state.dispatchId);
  if (answer.kind === 'unavailable') return { kind: 'target_unreachable', reason: clip(printable(answer.reason), 200) };
  if (answer.kind !== 'decided') return { kind: 'target_conflict' };
  const recorded = await updateDispatch(
    deps.store,
    state.dispatchId,
    (current) => (current?.runId === state.runId && current.execution.pendingApproval?.approvalId === request.approvalId ? { write: approvalDecided(current, request.decision, deps.now()), answer: true } : { answer: false }),
    { first: stored },
  );
  return { kind: 'decided', ...request, recorded: recorded.kind === 'written' };
}
