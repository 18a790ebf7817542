import type { DispatchState } from '../dispatch/state.js';
import { evidenceSettled, type WriteMode } from '../dispatch/transitions.js';
import { createHash } from 'node:crypto';
import type { BlobStore, DispatchWorkDeps, EvidenceFile } from '../ledger/port.js';
import { OBJECTS } from '../ledger/objects.js';

export const evidenceKey = OBJECTS.evidence;
export const sealedKey = OBJECTS.sealed;

export const sha256Of = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/**
 * Puts the sealed bytes back if the file under the evidence root no longer holds them: an upload that
 * raced the seal (it read "not sealed", then wrote after the check) never outlives it. Whoever
 * finishes last — the checker or the upload — looks again after its own write, so the bytes that stay
 * are the bytes whose hash was sealed.
 */
export async function keepSealed(blobs: BlobStore, key: string, sealed: { readonly sha256: string; readonly bytes: Uint8Array | (() => Promise<Uint8Array | undefined>) }): Promise<boolean> {
  const now = await blobs.getBytes(key);
  if (now && sha256Of(now) === sealed.sha256) return false;
  const bytes = typeof sealed.bytes === 'function' ? await sealed.bytes() : sealed.bytes;
  if (!bytes) throw new Error(`the sealed copy of ${key} is missing`);
  await blobs.put(key, bytes, 'application/octet-stream');
  return true;
}

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
  // What the state says is expected must be what the check looks for: nothing read is never "handled".
  const unreadable = expected.length !== state.evidence.expectedCount ? `the accepted message names ${expected.length} of the ${state.evidence.expectedCount} expected refs` : null;
  const checkedAt = now.toISOString();
  let files: EvidenceFile[] = [];
  let error: string | null = unreadable;
  let invalid: string[] = [];
  try {
    const marks = await deps.store.listEvidenceMarks(state.dispatchId, state.attempt);
    // Present and valid: a file its owner marked invalid, superseded or rejected does not count.
    invalid = expected.filter((ref) => marks.some((mark) => mark.ref === ref && mark.status !== 'valid'));
    // One file at a time (up to 32 × 4 MB may be expected): read and hash.
    for (const ref of expected) {
      if (invalid.includes(ref)) continue;
      const bytes = await deps.blobs.getBytes(evidenceKey(state.dispatchId, state.attempt, ref));
      if (bytes) files.push({ ref, sha256: sha256Of(bytes), bytes: bytes.length, checkedAt });
    }
  } catch (thrown) {
    error = thrown instanceof Error ? `${thrown.name}: ${thrown.message}`.slice(0, 300) : 'the check failed';
  }
  const found = files.map((file) => file.ref);
  const missing = expected.filter((ref) => !found.includes(ref));
  const pastDeadline = now.getTime() >= deadline;
  const outcome = error ? (pastDeadline ? 'unverified' : undefined) : missing.length === 0 ? 'handled' : pastDeadline ? 'orphan_no_delivery' : undefined;
  if (!outcome) return undefined;
  // Decided: seal what was found — a copy of each file under its hash, from which the checked bytes can
  // always be put back. The file is read again for it; one that changed since it was hashed leaves the
  // check undecided (the next look hashes what is there then).
  for (const file of files) {
    const bytes = await deps.blobs.getBytes(evidenceKey(state.dispatchId, state.attempt, file.ref));
    if (!bytes || sha256Of(bytes) !== file.sha256) return undefined;
    await deps.blobs.put(sealedKey(state.dispatchId, state.attempt, file.ref, file.sha256), bytes, 'application/octet-stream');
  }
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
  const final: { readonly outcome: typeof outcome; readonly missing: readonly string[]; readonly files: readonly EvidenceFile[] } = recorded.kind === 'exists' ? recorded.existing : { outcome, missing, files };
  // An upload may have landed between the read and the record: the sealed bytes are the ones that stay.
  for (const file of final.files) {
    await keepSealed(deps.blobs, evidenceKey(state.dispatchId, state.attempt, file.ref), { sha256: file.sha256, bytes: () => deps.blobs.getBytes(sealedKey(state.dispatchId, state.attempt, file.ref, file.sha256)) });
  }
  return evidenceSettled(state, { outcome: final.outcome, expected, missing: final.missing }, now, mode);
}
