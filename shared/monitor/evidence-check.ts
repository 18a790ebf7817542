import type { DispatchState } from '../dispatch/state.js';
import type { ChangeKind } from '../dispatch/state.js';
import type { DispatchWorkDeps } from '../ledger/port.js';

/** Where an attempt's evidence lives (CONTRACT §5): one root per attempt. */
export const evidenceKey = (dispatchId: string, attempt: number, ref: string): string => `evidence/${dispatchId}/${attempt}/${ref}`;

/** How the settled state is derived: a write of its own (`advance`) or one more change in a write already under way (`alsoChange`). */
export type StepState = (state: DispatchState, kind: ChangeKind, now: Date, patch?: Partial<DispatchState>) => DispatchState;

/**
 * The post-condition (CONTRACT §5): the platform itself looks for every expected ref under the
 * attempt's evidence root — a target's claim is not enough. All present → handled, with a
 * dispatch_completed receipt. Missing after the grace window → orphan_no_delivery. A check that could
 * not run is retried until the deadline, then `unverified` — never `handled`.
 *
 * Records the check (once per attempt: if another writer recorded it first, its outcome stands) and
 * returns the settled state for the caller to write, or undefined while it is not decidable yet.
 * The monitor calls it when a completed run comes due; the API calls it as the completion arrives,
 * so a run that delivered before completing is settled in the same write (no due-index round trip).
 */
export async function settleEvidence(deps: Pick<DispatchWorkDeps, 'store' | 'blobs'>, state: DispatchState, now: Date, step: StepState): Promise<DispatchState | undefined> {
  const deadline = state.evidence.deadline ? Date.parse(state.evidence.deadline) : now.getTime();
  const message = await deps.store.getAcceptedMessage(state.dispatchId);
  const expected = message?.content.valid ? message.content.expectedEvidence : [];
  let found: string[] = [];
  let error: string | null = null;
  let invalid: string[] = [];
  try {
    const [present, marks] = await Promise.all([
      Promise.all(expected.map((ref) => deps.blobs.exists(evidenceKey(state.dispatchId, state.attempt, ref)))),
      deps.store.listEvidenceMarks(state.dispatchId, state.attempt),
    ]);
    // Present and valid: a file its owner marked invalid, superseded or rejected does not count.
    invalid = expected.filter((ref) => marks.some((mark) => mark.ref === ref && mark.status !== 'valid'));
    found = expected.filter((ref, index) => present[index] && !invalid.includes(ref));
  } catch (thrown) {
    error = thrown instanceof Error ? `${thrown.name}: ${thrown.message}` : String(thrown);
  }
  const missing = expected.filter((ref) => !found.includes(ref));
  const pastDeadline = now.getTime() >= deadline;
  const outcome = error ? (pastDeadline ? 'unverified' : undefined) : missing.length === 0 ? 'handled' : pastDeadline ? 'orphan_no_delivery' : undefined;
  if (!outcome) return undefined;
  const recorded = await deps.store.putEvidenceCheck({
    dispatchId: state.dispatchId,
    origin: state.origin,
    target: state.target,
    runId: state.runId ?? '',
    attempt: state.attempt,
    outcome,
    expected,
    found,
    missing: outcome === 'unverified' ? [] : missing,
    invalid,
    checkedAt: now.toISOString(),
    error,
  });
  const final = recorded.kind === 'exists' ? recorded.existing.outcome : outcome;
  const at = now.toISOString();
  return step(state, final === 'handled' ? 'handled' : final === 'orphan_no_delivery' ? 'orphaned' : 'evidence_unverified', now, {
    evidence: { ...state.evidence, outcome: final },
    receipts:
      final === 'handled'
        ? [...state.receipts, { event: 'dispatch_completed', at, attempt: state.attempt, runId: state.runId ?? '', evidenceCount: expected.length }]
        : state.receipts,
    dueAt: null,
  });
}
