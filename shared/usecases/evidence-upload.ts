import type { DispatchState } from '../dispatch/state.js';
import type { EvidenceFile, EvidenceMark } from '../dispatch/records.js';
import { evidenceRecheck } from '../dispatch/transitions/evidence.js';
import { givenReason } from '../dispatch/transitions/core.js';
import type { DispatchWorkDeps, StoredState } from '../ledger/port.js';
import { updateDispatch } from '../ledger/repository.js';
import { evidenceKey, sealedFile, sha256Of } from './evidence-check.js';

type EvidenceDeps = Pick<DispatchWorkDeps, 'store' | 'blobs' | 'now'>;

/** What an upload ended as: kept (the pointer the check reads names these bytes), or refused because the check had sealed the file. */
export type UploadOutcome = { readonly kind: 'uploaded'; readonly sha256: string } | { readonly kind: 'sealed'; readonly file: EvidenceFile };

/**
 * One evidence file of the current attempt `state` (held by a run the caller may report for), kept as
 * the check will read it (CONTRACT §6):
 *  1. a file the check already sealed stands: the upload is refused;
 *  2. the bytes once, under their hash (every write of that key holds the same bytes), then the pointer
 *     the check reads: an upload that dies between the two is finished by its retry;
 *  3. the check may have sealed the file while this upload was on its way: the sealed bytes stand;
 *  4. an expected file arriving after a check found it missing makes the dispatch due again.
 */
export async function uploadEvidence(deps: EvidenceDeps, state: DispatchState, file: { readonly ref: string; readonly body: Buffer; readonly contentType: string }): Promise<UploadOutcome> {
  const { dispatchId, attempt } = state;
  const { ref, body } = file;
  const before = await sealedFile(deps.store, state, ref);
  if (before) return { kind: 'sealed', file: before };
  const sha256 = sha256Of(body);
  await deps.blobs.put(evidenceKey(dispatchId, attempt, sha256, ref), body, file.contentType);
  await deps.store.putEvidenceUpload({ dispatchId, attempt, ref, sha256, bytes: body.length, at: deps.now().toISOString() });
  // The sealed bytes are immutable under their hash; this pointer then names bytes no check reads again.
  const after = await deps.store.getStored(dispatchId);
  // (A redispatch since then started a new attempt: this one's files count for nothing any more.)
  const sealed = after?.state.attempt === attempt ? await sealedFile(deps.store, after.state, ref) : undefined;
  if (sealed) return { kind: 'sealed', file: sealed };
  await recheckIfMissed(deps, dispatchId, ref, after);
  return { kind: 'uploaded', sha256 };
}

/**
 * An expected file that arrives after a check found it missing (a completed run inside its grace
 * window, looked at again only at the deadline) makes the dispatch due now: re-checked within a tick.
 */
async function recheckIfMissed(deps: EvidenceDeps, dispatchId: string, ref: string, read: StoredState | undefined): Promise<void> {
  // Even when it is due already: a check reading the files right now may be about to reschedule it to
  // the deadline, and this write makes that stale reschedule conflict, so the check runs again. When
  // this write is the one that loses, the check committed first: read again and make it due once more.
  await updateDispatch(
    deps.store,
    dispatchId,
    async (state) => {
      if (!state || state.execution.status !== 'completed' || state.evidence.outcome !== 'pending') return { answer: undefined };
      const message = await deps.store.getAcceptedMessage(dispatchId);
      if (!message?.content.valid || !message.content.expectedEvidence.includes(ref)) return { answer: undefined };
      return { write: evidenceRecheck(state, deps.now()), answer: undefined };
    },
    { first: read },
  );
}

/**
 * The owner's mark on one evidence file of the current attempt (latest wins). A file marked anything
 * but valid no longer counts as present: the gate fails on it, and a check still to come treats it as missing.
 */
export async function markEvidence(deps: Pick<EvidenceDeps, 'store' | 'now'>, state: DispatchState, given: Pick<EvidenceMark, 'ref' | 'status' | 'reason'>): Promise<EvidenceMark> {
  const mark: EvidenceMark = { dispatchId: state.dispatchId, attempt: state.attempt, ref: given.ref, status: given.status, reason: givenReason(given.reason), at: deps.now().toISOString() };
  await deps.store.putEvidenceMark(mark);
  return mark;
}
