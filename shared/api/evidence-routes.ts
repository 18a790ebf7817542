import { refProblem } from '../dispatch/refs.js';
import { evidenceRecheck } from '../dispatch/transitions/evidence.js';
import { updateDispatch } from '../ledger/repository.js';
import { evidenceKey, sealedFile, sha256Of } from '../usecases/evidence-check.js';
import type { Caller } from './caller.js';
import { ApiError, type ApiRequest } from './http.js';
import { parseJson, runOfDispatch, type LifecycleDeps } from './lifecycle-routes.js';
import { EvidenceStatusBody } from '@dispatch-ledger/protocol/requests';
import '@dispatch-ledger/protocol/english';
import type { DispatchState } from '../dispatch/state.js';
import { clip, printable } from '../text.js';

/** CONTRACT §2: one evidence file is at most 4 MB. */
export const MAX_EVIDENCE_BYTES = 4 * 1024 * 1024;

/**
 * PUT /dispatches/{id}/evidence/{ref}?runId= — the target uploads one file into the current attempt's
 * evidence root. The ref is checked as sent and percent-decoded (CONTRACT §6); a superseded run gets
 * 409 and writes nothing; a run that is not this dispatch's, 404.
 */
export async function putEvidence(deps: LifecycleDeps, dispatchId: string, rawRef: string, request: ApiRequest, caller: Caller) {
  const problem = refProblem(rawRef);
  if (problem) throw new ApiError('invalid', `unsafe evidence ref (${problem})`);
  const ref = decodeURIComponent(rawRef);
  const runId = request.query.runId;
  if (!runId) throw new ApiError('malformed', 'runId is required');
  const body = request.body ?? Buffer.alloc(0);
  if (body.length > MAX_EVIDENCE_BYTES) throw new ApiError('too_large', `an evidence file is at most ${MAX_EVIDENCE_BYTES} bytes`);
  const run = await runOfDispatch(deps, dispatchId, runId, caller);
  const state = run.state;
  if (run.kind === 'superseded') throw new ApiError('conflict', `run ${runId} was superseded; its evidence does not count for attempt ${state.attempt}`);
  const refuse = (file: { sha256: string }) => new ApiError('evidence_sealed', `the check found ${ref}; the checked bytes stand`, { ref, sha256: file.sha256 });
  const before = await sealedFile(deps.store, state, ref);
  if (before) throw refuse(before);
  // The bytes once, under their hash (every write of that key holds the same bytes), then the pointer
  // the check reads: an upload that dies between the two is finished by its retry.
  const sha256 = sha256Of(body);
  await deps.blobs.put(evidenceKey(dispatchId, state.attempt, sha256, ref), body, request.headers['content-type'] ?? 'application/octet-stream');
  await deps.store.putEvidenceUpload({ dispatchId, attempt: state.attempt, ref, sha256, bytes: body.length, at: deps.now().toISOString() });
  // The check may have sealed the file while this upload was on its way: the sealed bytes stand (they
  // are immutable under their hash; this pointer names bytes no check reads again).
  const after = await deps.store.getState(dispatchId);
  // (A redispatch since then started a new attempt: this one's files count for nothing any more.)
  const sealed = after?.attempt === state.attempt ? await sealedFile(deps.store, after, ref) : undefined;
  if (sealed) throw refuse(sealed);
  await recheckIfMissed(deps, dispatchId, ref, after);
  return { status: 201, body: { dispatchId, runId, attempt: state.attempt, ref, bytes: body.length } };
}

/**
 * An expected file that arrives after a check found it missing (a completed run inside its grace
 * window, looked at again only at the deadline) makes the dispatch due now: re-checked within a tick.
 */
async function recheckIfMissed(deps: LifecycleDeps, dispatchId: string, ref: string, read: DispatchState | undefined): Promise<void> {
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
 * POST /dispatches/{id}/evidence-status — the owner marks one evidence file of the current attempt.
 * A file marked anything but valid no longer counts as present: the gate fails on it, and a check
 * still to come treats it as missing.
 */
export async function postEvidenceStatus(deps: LifecycleDeps, state: DispatchState, body: Buffer | undefined) {
  const { ref, status, reason } = parseJson(body, EvidenceStatusBody());
  const mark = { dispatchId: state.dispatchId, attempt: state.attempt, ref, status, reason: clip(printable(reason), 300), at: deps.now().toISOString() };
  await deps.store.putEvidenceMark(mark);
  return { status: 200, body: mark };
}
