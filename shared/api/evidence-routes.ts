import { DISPATCH_ID } from '../dispatch/ids.js';
import { refProblem } from '../dispatch/refs.js';
import { evidenceKey } from '../monitor/evidence-check.js';
import type { Caller } from './caller.js';
import { ApiError, type ApiRequest } from './http.js';
import { parseJson, type LifecycleDeps } from './lifecycle-routes.js';
import * as z from 'zod/mini';
import '../zod-english.js';
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
  const notFound = new ApiError('not_found', `no run ${runId} for dispatch ${dispatchId}`);
  if (!DISPATCH_ID.test(dispatchId)) throw notFound;
  const state = await deps.store.getState(dispatchId);
  if (!state) throw notFound;
  if (caller.kind === 'principal' && !(caller.principal?.role === 'target' && caller.principal.target === state.target)) throw notFound;
  if (state.supersededRuns.includes(runId)) throw new ApiError('conflict', `run ${runId} was superseded; its evidence does not count for attempt ${state.attempt}`);
  if (state.runId !== runId) throw notFound;
  await deps.blobs.put(evidenceKey(dispatchId, state.attempt, ref), body, request.headers['content-type'] ?? 'application/octet-stream');
  return { status: 201, body: { dispatchId, runId, attempt: state.attempt, ref, bytes: body.length } };
}

const EvidenceStatusBody = z.strictObject({
  ref: z.string().check(z.refine((ref) => refProblem(ref) === undefined, 'unsafe evidence ref')),
  status: z.enum(['valid', 'invalid', 'superseded', 'rejected']),
  reason: z.string().check(z.trim(), z.minLength(1), z.maxLength(500)),
});

/**
 * POST /dispatches/{id}/evidence-status — the owner marks one evidence file of the current attempt.
 * A file marked anything but valid no longer counts as present: the gate fails on it, and a check
 * still to come treats it as missing.
 */
export async function postEvidenceStatus(deps: LifecycleDeps, state: DispatchState, body: Buffer | undefined) {
  const { ref, status, reason } = parseJson(body, EvidenceStatusBody);
  const mark = { dispatchId: state.dispatchId, attempt: state.attempt, ref, status, reason: clip(printable(reason), 300), at: deps.now().toISOString() };
  await deps.store.putEvidenceMark(mark);
  return { status: 200, body: mark };
}
