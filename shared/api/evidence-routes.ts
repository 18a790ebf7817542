import { MAX_EVIDENCE_BYTES } from '@dispatch-ledger/protocol';
import { refProblem } from '../dispatch/refs.js';
import { markEvidence, uploadEvidence } from '../usecases/evidence-upload.js';
import type { Caller } from './caller.js';
import { ApiError, type ApiRequest } from './http.js';
import { parseJson, runOfDispatch, type LifecycleDeps } from './lifecycle-routes.js';
import { EvidenceStatusBody } from '@dispatch-ledger/protocol/requests';
import '@dispatch-ledger/protocol/english';
import type { DispatchState } from '../dispatch/state.js';

/** The protocol's bound on one evidence file (CONTRACT §2). */
export { MAX_EVIDENCE_BYTES };

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
  const { state } = run;
  if (run.kind === 'superseded') throw new ApiError('conflict', `run ${runId} was superseded; its evidence does not count for attempt ${state.attempt}`);
  const outcome = await uploadEvidence(deps, state, { ref, body, contentType: request.headers['content-type'] ?? 'application/octet-stream' });
  if (outcome.kind === 'sealed') throw new ApiError('evidence_sealed', `the check found ${ref}; the checked bytes stand`, { ref, sha256: outcome.file.sha256 });
  return { status: 201, body: { dispatchId, runId, attempt: state.attempt, ref, bytes: body.length } };
}

/**
 * POST /dispatches/{id}/evidence-status — the owner marks one evidence file of the current attempt.
 * A file marked anything but valid no longer counts as present: the gate fails on it, and a check
 * still to come treats it as missing.
 */
export async function postEvidenceStatus(deps: LifecycleDeps, state: DispatchState, body: Buffer | undefined) {
  const { ref, status, reason } = parseJson(body, EvidenceStatusBody());
  return { status: 200, body: await markEvidence(deps, state, { ref, status, reason }) };
}
