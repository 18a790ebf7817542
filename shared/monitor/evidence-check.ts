import type { DispatchState } from '../dispatch/state.js';
import { evidenceSettled, type WriteMode } from '../dispatch/transitions.js';
import type { DispatchWorkDeps, EvidenceFile } from '../ledger/port.js';

/** Where an attempt's evidence lives (CONTRACT §5): one root per attempt. */
export const evidenceKey = (dispatchId: string, attempt: number, ref: string): string => `evidence/${dispatchId}/${attempt}/${ref}`;

/**
 * The post-condition (CONTRACT §5): the platform itself reads every expected ref under the attempt's
 * evidence root — a target's claim is not enough — and records each file found with its SHA-256.
 * All present → handled, with a dispatch_completed receipt. Missing after the grace window →
 * orphan_no_delivery. A check that could not run is retried until the deadline, then `unverified` —
 * never `handled`.
 *
 * Records the check (once per attempt: if another writer recorded it first, its outcome stands) and
 * returns the settled state for the caller to write, or undefined while it is not decidable yet.
 * The monitor calls it when a completed run comes due; the API calls it as the completion arrives
 * (`same_write`), so a run that delivered before completing is settled in one write.
 * Handled/Orphaned are published from the state change, so a check whose state write loses (a
 * concurrent redispatch fenced the run) publishes nothing.
 */
export async function settleEvidence(deps: Pick<DispatchWorkDeps, 'store' | 'blobs'>, state: DispatchState, now: Date, mode: WriteMode): Promise<DispatchState | undefined> {
  const deadline = state.evidence.deadline ? Date.parse(state.evidence.deadline) : now.getTime();
  const message = await deps.store.getAcceptedMessage(state.dispatchId);
  const expected = message?.content.valid ? message.content.expectedEvidence : [];
  const checkedAt = now.toISOString();
  let files: EvidenceFile[] = [];
  let error: string | null = null;
  let invalid: string[] = [];
  try {
    const [digests, marks] = await Promise.all([
      Promise.all(expected.map((ref) => deps.blobs.digest(evidenceKey(state.dispatchId, state.attempt, ref)))),
      deps.store.listEvidenceMarks(state.dispatchId, state.attempt),
    ]);
    // Present and valid: a file its owner marked invalid, superseded or rejected does not count.
    invalid = expected.filter((ref) => marks.some((mark) => mark.ref === ref && mark.status !== 'valid'));
    files = expected.flatMap((ref, index) => {
      const digest = digests[index];
      return digest && !invalid.includes(ref) ? [{ ref, sha256: digest.sha256, bytes: digest.bytes, checkedAt }] : [];
    });
  } catch (thrown) {
    error = thrown instanceof Error ? `${thrown.name}: ${thrown.message}`.slice(0, 300) : 'the check failed';
  }
  const found = files.map((file) => file.ref);
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
    files,
    checkedAt,
    error,
  });
  const final: { readonly outcome: typeof outcome; readonly missing: readonly string[] } = recorded.kind === 'exists' ? recorded.existing : { outcome, missing };
  return evidenceSettled(state, { outcome: final.outcome, expected, missing: final.missing }, now, mode);
}
