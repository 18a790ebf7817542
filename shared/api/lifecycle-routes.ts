import * as z from 'zod/mini';
import { dispatchCommand } from '../dispatch/commands.js';
import { MAX_API_BODY_DEPTH, MAX_SEQ } from '@dispatch-ledger/protocol';
import { ApprovalBody, RedispatchBody, RunEventBody } from '@dispatch-ledger/protocol/requests';
import '@dispatch-ledger/protocol/english';
import { DISPATCH_ID } from '../dispatch/ids.js';
import { isTerminal } from '../dispatch/state.js';
import type { DispatchState } from '../dispatch/state.js';
import type { DispatchWorkDeps, StoredState } from '../ledger/port.js';
import { decideApproval } from '../usecases/approval.js';
import { redispatch } from '../usecases/redispatch.js';
import { reportRunEvent, type ReportedBody } from '../usecases/run-events.js';
import { runOn, type MayReport, type RunOfDispatch } from '../usecases/run-of-dispatch.js';
import type { Caller } from './caller.js';
import { ApiError, changedConcurrently, keptChanging } from './http.js';
import { notRegistered } from '../targets/port.js';
import { clip } from '../text.js';
import { nestsDeeperThan } from '../json-depth.js';
import { taskOfDispatch } from '../usecases/task.js';
import { INLINE_BODY_BYTES, MAX_RESULT_BODY_BYTES, resultBodyDigest } from '../usecases/result-body.js';

/** What the lifecycle routes need: the same as the monitor's work on a dispatch. */
export type LifecycleDeps = DispatchWorkDeps;

/** CONTRACT §2: 0 ≤ seq ≤ 2^53 − 1; larger → 422. The bound lives in the protocol package. */
export { MAX_SEQ };


/**
 * How deep any API body may nest (the protocol package's MAX_API_BODY_DEPTH, 1,000 levels): a body
 * 20,000 levels deep overflowed JSON.stringify's stack (a 500 a target retried for ever). The worker kit
 * refuses a result deeper than this before it reports (MAX_RESULT_BODY_DEPTH, from the same package).
 */
export { MAX_API_BODY_DEPTH };

export function parseJson<T>(body: Buffer | undefined, schema: z.ZodMiniType<T>): T {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body?.toString('utf8') ?? '');
  } catch {
    throw new ApiError('malformed', 'the body is not JSON');
  }
  // Before anything walks it recursively (JSON.stringify of a result body overflowed the stack: a 500).
  if (nestsDeeperThan(parsed, MAX_API_BODY_DEPTH)) throw new ApiError('invalid', `the body nests deeper than ${MAX_API_BODY_DEPTH} levels (too_deep)`);
  const result = schema.safeParse(parsed);
  if (!result.success) {
    // Bounded whatever the body: at most 8 issues of ≤ 100 characters a field and a message (≤ 1.6 KB).
    throw new ApiError('invalid', 'the body is not valid', result.error.issues.slice(0, 8).map((issue) => ({ field: clip(issue.path.join('.'), 100), message: clip(issue.message, 100) })));
  }
  return result.data;
}

/** May this caller report on (or upload for) a run of this target? Locally every caller may. */
export const mayReportFor =
  (caller: Caller): MayReport =>
  (target) =>
    caller.kind === 'open' || (caller.principal?.role === 'target' && caller.principal.target === target);

/**
 * Which of a dispatch's runs `runId` is, for a target's callback (events and evidence uploads alike).
 * 409 `not_yet_recorded` (retryable) while the dispatch has an attempt in flight whose run is not
 * recorded — including before its state exists at all; 404 when the dispatch is unknown (or not this
 * caller's target), or the run is none of its runs and no attempt is in flight.
 */
export async function runOfDispatch(deps: Pick<LifecycleDeps, 'store'>, dispatchId: string, runId: string, caller: Caller): Promise<Extract<RunOfDispatch, { readonly state: DispatchState }>> {
  const run = DISPATCH_ID.test(dispatchId) ? await runOn(deps, dispatchId, await deps.store.getState(dispatchId), runId, mayReportFor(caller)) : ({ kind: 'not_found' } as const);
  if (run.kind === 'not_yet' || run.kind === 'not_found') throw notARun(run.kind, dispatchId, runId);
  return run;
}

const notARun = (kind: 'not_yet' | 'not_found', dispatchId: string, runId: string): ApiError =>
  kind === 'not_yet' ? new ApiError('not_yet_recorded', 'the run is not recorded yet; retry shortly', { retryable: true }) : new ApiError('not_found', `no run ${runId} for dispatch ${dispatchId}`);

/** POST /runs/{runId}/events — the target reports on its run (CONTRACT §2): parsed here, recorded by `reportRunEvent`. */
export async function postRunEvent(deps: LifecycleDeps, runId: string, body: Buffer | undefined, caller: Caller) {
  const { result, ...rest } = parseJson(body, RunEventBody());
  if (rest.nativeStatus !== undefined && !isTerminal(rest.type)) {
    throw new ApiError('invalid', `nativeStatus is only for a final event (completed, failed, cancelled), not ${rest.type}`);
  }
  const resultBody = result?.body === undefined ? undefined : resultBodyOfEvent(rest.type, result.body);
  const event = {
    ...rest,
    ...(result ? { result: { ...(result.summary === undefined ? {} : { summary: result.summary }), ...(resultBody ? { body: resultBody.ref(rest.seq) } : {}) } } : {}),
  };
  if (!DISPATCH_ID.test(event.dispatchId)) throw notARun('not_found', event.dispatchId, runId);
  const outcome = await reportRunEvent(deps, runId, event, mayReportFor(caller), resultBody);
  switch (outcome.kind) {
    case 'applied':
      // A durable function's approval: the id the ledger chose for it (its callback id is never answered back).
      return { status: 202, body: { applied: true, ...(outcome.approvalId ? { approvalId: outcome.approvalId } : {}) } };
    case 'not_applied':
      return { status: 200, body: { applied: false } };
    case 'coalesced':
      return { status: 200, body: { applied: false, coalesced: true } };
    case 'late':
      return { status: 200, body: { applied: false, late: true } };
    case 'invalid':
      throw new ApiError('invalid', outcome.reason);
    case 'not_yet':
    case 'not_found':
      throw notARun(outcome.kind, event.dispatchId, runId);
    case 'kept_changing':
      throw keptChanging();
  }
}

/**
 * `GET /runs/{runId}/control?dispatchId=` (CONTRACT §12): what a worker that cannot be called — a
 * Lambda — polls once a heartbeat interval: whether its run was superseded (stop: its events are late from
 * now on), whether a cancel was asked, and the last approval decision taken for it.
 */
export async function getRunControl(deps: LifecycleDeps, runId: string, dispatchId: string | undefined, caller: Caller) {
  if (dispatchId === undefined) throw new ApiError('malformed', 'dispatchId is required (?dispatchId=)');
  const run = await runOfDispatch(deps, dispatchId, runId, caller);
  if (run.kind === 'superseded') return { status: 200, body: { runId, dispatchId, superseded: true, cancelRequested: true, approval: null } };
  const decision = run.state.execution.lastDecision ?? null;
  return {
    status: 200,
    body: {
      runId,
      dispatchId,
      superseded: false,
      // The origin asked for a cancel (CONTRACT §2): a Lambda worker learns it here and aborts ctx.signal.
      cancelRequested: run.state.cancel !== null && run.state.cancel !== undefined,
      approval: decision ? { approvalId: decision.approvalId, decision: decision.decision, decidedAt: decision.at } : null,
      status: run.state.execution.status,
    },
  };
}

/**
 * `GET /dispatches/{dispatchId}/task?runId=` (CONTRACT §8 v2, §12): the task of a submission that
 * carried `taskRef` instead (a Lambda's asynchronous payload is bounded), for the dispatch's current run.
 */
export async function getTask(deps: LifecycleDeps, dispatchId: string, runId: string | undefined, caller: Caller) {
  if (runId === undefined) throw new ApiError('malformed', 'runId is required (?runId=)');
  const run = await runOfDispatch(deps, dispatchId, runId, caller);
  if (run.kind === 'superseded') throw new ApiError('superseded', 'this run was superseded by a redispatch');
  const task = await taskOfDispatch(deps, dispatchId);
  if (!task) throw new ApiError('not_found', `dispatch ${dispatchId} has no task`);
  return { status: 200, body: task };
}

/** A final event's `result.body`: only on a final type, at most 256 KB of JSON (413 beyond). */
function resultBodyOfEvent(type: string, body: unknown): ReportedBody {
  if (type !== 'completed' && type !== 'failed' && type !== 'cancelled') throw new ApiError('invalid', 'result.body is carried by a final event only (completed, failed, cancelled)');
  const json = JSON.stringify(body);
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > MAX_RESULT_BODY_BYTES) throw new ApiError('too_large', `result.body is ${bytes} bytes; at most ${MAX_RESULT_BODY_BYTES}`);
  // The digest names the body's own record and object (storeResultBody): the state refers to this body, not the seq's last.
  const digest = resultBodyDigest(json);
  return { json, ref: (seq) => ({ seq, bytes, spilled: bytes > INLINE_BODY_BYTES, digest }) };
}

/** POST /dispatches/{id}/approval: forwarded to the target; recorded only once the target took it. */
export async function postApproval(deps: LifecycleDeps, stored: StoredState, body: Buffer | undefined) {
  const outcome = await decideApproval(deps, stored, parseJson(body, ApprovalBody()));
  switch (outcome.kind) {
    case 'decided':
      return { status: 200, body: { approvalId: outcome.approvalId, decision: outcome.decision } };
    case 'not_pending':
      throw new ApiError('conflict', 'that approvalId is not the pending approval', { pendingApprovalId: outcome.pendingApprovalId });
    case 'target_conflict':
      throw new ApiError('conflict', 'the target does not hold this approval as pending');
    case 'target_unreachable':
      throw new ApiError('target_unreachable', `the target could not be reached: ${outcome.reason}`);
  }
}


/** POST /dispatches/{id}/redispatch (CONTRACT §4): the outcomes of the redispatch use case as HTTP answers. */
export async function postRedispatch(deps: LifecycleDeps, stored: StoredState, body: Buffer | undefined) {
  const { reason, force } = parseJson(body, RedispatchBody());
  const outcome = await redispatch(deps, stored, { reason, force: force ?? false });
  const { state } = stored;
  switch (outcome.kind) {
    case 'run_may_be_active':
      throw new ApiError('conflict', 'the current run may still be active: look it up, or redispatch with force and a reason', {
        runId: outcome.runId,
        attempt: outcome.attempt,
        status: outcome.status,
        // Its end is recorded, but its runtime runs it again (CONTRACT §17): a look finds nothing new, force is the way.
        ...(outcome.redriven ? { redriven: outcome.redriven, force: dispatchCommand(state, 'redispatch', '--force --reason R') } : { check: dispatchCommand(state, 'check', '--refresh') }),
      });
    case 'not_submittable':
      throw new ApiError('invalid', `this dispatch cannot be submitted: ${outcome.reason}`);
    case 'target_not_registered':
      throw new ApiError('target_unreachable', notRegistered(state.target));
    case 'conflict':
      throw changedConcurrently();
    case 'redispatched':
      return {
        status: 202,
        body: {
          dispatchId: state.dispatchId,
          attempt: outcome.attempt,
          phase: outcome.state.phase,
          runId: outcome.state.runId,
          supersededRunId: outcome.supersededRunId,
          cancel: outcome.cancel,
          reason,
        },
      };
  }
}
