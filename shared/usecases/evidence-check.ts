import type { DispatchState, InlineCheck, NextState } from '../dispatch/state.js';
import { evidenceSettled } from '../dispatch/transitions/evidence.js';
import { isLive } from '../dispatch/transitions/core.js';
import { createHash } from 'node:crypto';
import type { DispatchWorkDeps, LedgerStore } from '../ledger/port.js';
import type { EvidenceCheck, EvidenceFile, EvidenceUpload, SettledCheck } from '../dispatch/records.js';
import { evidenceObjectKey } from '../ledger/objects.js';

/** Where an uploaded evidence file's bytes live: immutable, under their hash (`OBJECTS.evidence`). */
export const evidenceKey = evidenceObjectKey;

export const sha256Of = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/**
 * The most of a check's record (files, hashes, invalid refs; as JSON bytes) the settled state carries:
 * one file with a ref of 14 to 20 characters (by its size's digits), so the hot item (its write id included) stays within one
 * write unit for usual ids (test/unit/inline-check.test.ts measures it) and a completion that settles its
 * evidence is one state write. Past it the record is an item of its own. A state that outgrows the unit anyway (very long
 * ids) costs no more than the item would have: its settling write takes 2 units instead of 1 + 1.
 */
export const INLINE_CHECK_BYTES = 160;

/**
 * The current attempt's settled check (CONTRACT §5 "sealed"): from the state when it carries it, else
 * the check's own item; undefined while none is recorded.
 */
export async function evidenceCheckOf(store: Pick<LedgerStore, 'getEvidenceCheck'>, state: DispatchState): Promise<SettledCheck | undefined> {
  const { outcome, check, missing = [] } = state.evidence;
  if (!check || outcome === 'pending') return store.getEvidenceCheck(state.dispatchId, state.attempt);
  // (An inline record is only ever handled or orphaned: a check that failed has an item of its own.)
  return { missing, invalid: check.invalid ?? [], files: check.files.map((file) => ({ ...file, checkedAt: check.at })) };
}

/** The file the attempt's check found and sealed under `ref`, if it did: a later upload of it is refused. */
export async function sealedFile(store: Pick<LedgerStore, 'getEvidenceCheck'>, state: DispatchState, ref: string): Promise<EvidenceFile | undefined> {
  return (await evidenceCheckOf(store, state))?.files.find((file) => file.ref === ref);
}

/** The bytes a pointer names, hashed; undefined when the object is gone. Throws when they are not the bytes uploaded. */
async function readUpload(deps: Pick<DispatchWorkDeps, 'blobs'>, dispatchId: string, attempt: number, ref: string, sha256: string): Promise<{ sha256: string; bytes: number } | undefined> {
  const bytes = await deps.blobs.getBytes(evidenceKey(dispatchId, attempt, sha256, ref));
  if (!bytes) return undefined;
  const actual = sha256Of(bytes);
  if (actual !== sha256) throw new Error(`${ref} is not the bytes uploaded`);
  return { sha256: actual, bytes: bytes.length };
}

/**
 * The post-condition (CONTRACT §5): the platform itself reads every expected ref of the attempt — a
 * target's claim is not enough — and records each file found with its SHA-256. All present → handled,
 * with a dispatch_completed receipt. Missing after the grace window → orphan_no_delivery. A check that
 * could not run is retried until the deadline, then `unverified` — never `handled`.
 *
 * Each upload put its bytes under their hash and pointed the ref at them (`EvidenceUpload`): the check
 * reads the pointers, fetches and hashes each named object once, and the seal is the hash it records —
 * those bytes are immutable, so they are the bytes that stay whatever is uploaded later (nothing is
 * copied, nothing put back). Before it records, one look at the pointers again: a file replaced since
 * leaves the check undecided (the next look hashes what is there then).
 *
 * Recorded once per attempt: in the settled state itself when it is small and no result is out
 * (`INLINE_CHECK_BYTES`; the state's versioned write lets one writer settle it), else — many files,
 * long refs, a result out, a check that failed — in an item of its own written first (if another
 * writer recorded one, its outcome stands, and any later check defers to it). Returns the settled state for the caller to write,
 * or undefined while it is not decidable yet. The monitor calls it when a completed run comes due; the
 * API calls it as the completion arrives (in the completion's own write), so a run that delivered before completing is
 * settled in one write. Handled/Orphaned are published from the state change, so a check whose state
 * write loses (a concurrent redispatch fenced the run) publishes nothing.
 */
/**
 * What a check does with an expected ref that has no upload pointer: nothing (the API), or the
 * monitor's look for a file uploaded before uploads were content-addressed (`legacy-evidence.ts`).
 */
export type UnpointedRef = (deps: Pick<DispatchWorkDeps, 'store' | 'blobs'>, dispatchId: string, attempt: number, ref: string, now: Date) => Promise<{ sha256: string; bytes: number } | undefined>;

export async function settleEvidence(
  deps: Pick<DispatchWorkDeps, 'store' | 'blobs'>,
  state: DispatchState,
  now: Date,
  unpointed?: UnpointedRef,
  /** The attempt's upload pointers when the caller read them with the state (`getStateWithUploads`): the first look. */
  pointers?: readonly EvidenceUpload[],
): Promise<NextState | undefined> {
  const deadline = state.evidence.deadline ? Date.parse(state.evidence.deadline) : now.getTime();
  const { dispatchId, attempt } = state;
  // The first look at the pointers goes out with the basis (wasted only when a check item is found
  // already, which is rare); a failure of it is the check's (below).
  const firstLook = pointers ? Promise.resolve(pointers) : deps.store.listEvidenceUploads(dispatchId, attempt);
  firstLook.catch(() => undefined);
  const { message, check: recordedBefore, marks: marksRead } = await deps.store.getEvidenceBasis(dispatchId, attempt);
  const expected = message?.content.valid ? message.content.expectedEvidence : [];
  const settle = (recorded: Pick<EvidenceCheck, 'outcome' | 'missing'>, check?: InlineCheck) => evidenceSettled(state, { outcome: recorded.outcome, expected, missing: recorded.missing, check }, now);
  // A check recorded in its own item whose state write lost (to a claim, an upload's re-check): it stands.
  if (recordedBefore) return settle(recordedBefore);
  // What the state says is expected must be what the check looks for: nothing read is never "handled".
  const unreadable = expected.length !== state.evidence.expectedCount ? `the accepted message names ${expected.length} of the ${state.evidence.expectedCount} expected refs` : null;
  const checkedAt = now.toISOString();
  const files: EvidenceFile[] = [];
  let error: string | null = unreadable;
  let invalid: string[] = [];
  try {
    const [marks, uploads] = await Promise.all([marksRead ?? deps.store.listEvidenceMarks(dispatchId, attempt), firstLook]);
    // Present and valid: a file its owner marked invalid, superseded or rejected does not count.
    invalid = expected.filter((ref) => marks.some((mark) => mark.ref === ref && mark.status !== 'valid'));
    // One file at a time (up to 32 × 4 MB may be expected; the monitor runs few checks at once): read
    // and hash what each pointer names.
    for (const ref of expected) {
      const upload = uploads.find((candidate) => candidate.ref === ref);
      if (invalid.includes(ref)) continue;
      const file = await (upload ? readUpload(deps, dispatchId, attempt, ref, upload.sha256) : unpointed?.(deps, dispatchId, attempt, ref, now));
      if (file) files.push({ ref, sha256: file.sha256, bytes: file.bytes, checkedAt });
    }
  } catch (thrown) {
    error = thrown instanceof Error ? `${thrown.name}: ${thrown.message}`.slice(0, 300) : 'the check failed';
  }
  const found = files.map((file) => file.ref);
  const missing = expected.filter((ref) => !found.includes(ref));
  const pastDeadline = now.getTime() >= deadline;
  const outcome = error ? (pastDeadline ? 'unverified' : undefined) : missing.length === 0 ? 'handled' : pastDeadline ? 'orphan_no_delivery' : undefined;
  if (!outcome) return undefined;
  // Decided: one look at the pointers before sealing — an upload that replaced a found file since they
  // were read leaves the check undecided; the next look hashes what is there then.
  if (files.length > 0) {
    const latest = await deps.store.listEvidenceUploads(dispatchId, attempt);
    if (files.some((file) => latest.find((upload) => upload.ref === file.ref)?.sha256 !== file.sha256)) return undefined;
  }
  const settledMissing = outcome === 'unverified' ? [] : missing;
  // The record rides on the settling write when it is small — and no result is out: its claims and
  // acks rewrite the hot item, which has no room to spare then.
  const check: InlineCheck = { at: checkedAt, files: files.map(({ ref, sha256, bytes }) => ({ ref, sha256, bytes })), ...(invalid.length > 0 ? { invalid } : {}) };
  const settled = settle({ outcome, missing: settledMissing }, check);
  if (!error && !isLive(settled.result) && Buffer.byteLength(JSON.stringify(check)) <= INLINE_CHECK_BYTES) return settled;
  const recorded = await deps.store.putEvidenceCheck({ dispatchId, origin: state.origin, target: state.target, runId: state.runId ?? '', attempt, outcome, expected, found, missing: settledMissing, invalid, files, checkedAt, error });
  return settle(recorded.kind === 'exists' ? recorded.existing : { outcome, missing });
}
