import * as z from 'zod/mini';
import { MAX_API_BODY_DEPTH, MAX_SEQ } from '@dispatch-ledger/protocol';
import { ApprovalBody, RedispatchBody, RunEventBody } from '@dispatch-ledger/protocol/requests';
import '@dispatch-ledger/protocol/english';
import { DISPATCH_ID } from '../dispatch/ids.js';
import { applyRunEvent, isLive, isTerminal, reconcileLookup, refreshRecorded, refreshThrottled, resultBodyAttached, stallDeadline, type RunEvent } from '../dispatch/transitions.js';
import type { DispatchState } from '../dispatch/state.js';
import type { EvidenceUpload } from '../dispatch/records.js';
import { settleEvidence } from '../usecases/evidence-check.js';
import type { DispatchWorkDeps } from '../ledger/port.js';
import { decideApproval } from '../usecases/approval.js';
import { redispatch } from '../usecases/redispatch.js';
import { lookUpRun } from '../usecases/look-up-run.js';
import type { Caller } from './caller.js';
import { ApiError, changedConcurrently, keptChanging } from './http.js';
import { notRegistered } from '../targets/port.js';
import { clip } from '../text.js';
import { nestsDeeperThan } from '../json-depth.js';
import { taskOf } from '../usecases/task.js';
import type { ResultBodyRef } from '../dispatch/state.js';
import { INLINE_BODY_BYTES, MAX_RESULT_BODY_BYTES, resultBodyDigest, storeResultBody } from '../usecases/inbox.js';

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
const reportsFor = (caller: Caller, target: string): boolean => caller.kind === 'open' || (caller.principal?.role === 'target' && caller.principal.target === target);

export type RunOfDispatch =
  | { readonly kind: 'current'; readonly state: DispatchState }
  /** One of the dispatch's earlier runs, however many redispatches ago. */
  | { readonly kind: 'superseded'; readonly state: DispatchState };

/**
 * Which of a dispatch's runs `runId` is, for a target's callback (events and evidence uploads alike).
 * 409 `not_yet_recorded` (retryable) while the dispatch has an attempt in flight whose run is not
 * recorded — including before its state exists at all; 404 when the dispatch is unknown (or not this
 * caller's target), or the run is none of its runs and no attempt is in flight.
 */
export async function runOfDispatch(
  deps: Pick<LifecycleDeps, 'store'>,
  dispatchId: string,
  runId: string,
  caller: Caller,
  /** How the state is read: strongly consistent, by itself unless the caller needs more with it. */
  read: (dispatchId: string) => Promise<DispatchState | undefined> = (id) => deps.store.getState(id),
): Promise<RunOfDispatch> {
  const notFound = new ApiError('not_found', `no run ${runId} for dispatch ${dispatchId}`);
  const notYet = new ApiError('not_yet_recorded', 'the run is not recorded yet; retry shortly', { retryable: true });
  if (!DISPATCH_ID.test(dispatchId)) throw notFound;
  const state = await read(dispatchId);
  if (!state) {
    // The target may report before the ledger has recorded its submission answer (intake creates the
    // state after the call returns): not yet — in AWS as locally, for the target the message names.
    const message = await deps.store.getAcceptedMessage(dispatchId);
    if (message?.content.valid && reportsFor(caller, message.content.target)) throw notYet;
    throw notFound;
  }
  if (!reportsFor(caller, state.target)) throw notFound;
  const kind = await whichRun(deps, state, runId);
  if (kind) return { kind, state };
  if (state.phase === 'accepted') throw notYet;
  throw notFound;
}

/**
 * Whether `runId` is the dispatch's current run, one of its earlier runs (however many redispatches
 * ago: older than the hot state remembers is answered from the attempt records), or none of them.
 */
export async function whichRun(deps: Pick<LifecycleDeps, 'store'>, state: DispatchState, runId: string): Promise<RunOfDispatch['kind'] | undefined> {
  if (state.runId === runId) return 'current';
  if (state.supersededRuns.includes(runId)) return 'superseded';
  if (state.attempt > 1 && (await deps.store.listPastAttempts(state.dispatchId)).some((past) => past.runId === runId)) return 'superseded';
  return undefined;
}

/** Rounds of optimistic concurrency: a concurrent writer makes us re-read and decide again. */
const EVENT_ROUNDS = 5;

/** POST /runs/{runId}/events — the target reports on its run (CONTRACT §2). */
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
  if (await coalescedAtAGlance(deps, event.dispatchId, runId, event, caller)) return { status: 200, body: { applied: false, coalesced: true } };
  let stored = false;
  // A completion reads its attempt's upload pointers with the state: the check's first look at them.
  let pointers: EvidenceUpload[] | undefined;
  const readWithPointers = async (dispatchId: string): Promise<DispatchState | undefined> => {
    const read = await deps.store.getStateWithUploads(dispatchId);
    pointers = read.uploads;
    return read.state;
  };
  for (let round = 0; round < EVENT_ROUNDS; round += 1) {
    const run = await runOfDispatch(deps, event.dispatchId, runId, caller, event.type === 'completed' ? readWithPointers : undefined);
    const state = run.state;
    if (run.kind === 'superseded') {
      await deps.store.recordLateEvent({ dispatchId: state.dispatchId, runId, seq: event.seq, type: event.type, at: deps.now().toISOString() });
      return { status: 200, body: { applied: false, late: true } };
    }
    const outcome = applyRunEvent(state, event, deps.now());
    if (outcome.kind === 'invalid') throw new ApiError('invalid', outcome.reason);
    if (outcome.kind === 'stale') {
      // The final status was recorded first (by a lookup or the submission's answer): the body this
      // report carries still belongs with the result, which is never left without it.
      const late = resultBody && state.runId === runId && state.execution.nativeStatus === event.type && !state.execution.result?.body && isLive(state.result) && (state.lastSeq === null || event.seq > state.lastSeq);
      if (!late || !resultBody) return { status: 200, body: { applied: false } };
      const ref = await storeResultBody(deps, state.dispatchId, state.attempt, event.seq, resultBody.json);
      if ((await deps.store.commit(state, resultBodyAttached(state, event.seq, ref, deps.now()))).kind === 'committed') return { status: 202, body: { applied: true } };
      continue;
    }
    if (outcome.kind === 'coalesced') return { status: 200, body: { applied: false, coalesced: true } };
    let next = outcome.next;
    // A completion whose evidence is already delivered is settled in the same write; otherwise the
    // monitor looks again from its next tick until the grace window closes.
    // (A check that fails here is left to the monitor rather than failing the target's report.)
    if (next.execution.status === 'completed' && next.evidence.outcome === 'pending') {
      next = (await settleEvidence(deps, next, deps.now(), 'same_write', undefined, pointers).catch(() => undefined)) ?? next;
    }
    // The body first, then the state that refers to it: if it cannot be stored this throws (5xx), nothing is recorded, the target retries.
    if (resultBody && !stored) {
      await storeResultBody(deps, state.dispatchId, state.attempt, event.seq, resultBody.json);
      stored = true;
    }
    if ((await deps.store.commit(state, next)).kind === 'committed') return { status: 202, body: { applied: true } };
  }
  throw keptChanging();
}

/**
 * A heartbeat (or progress) inside the coalescing window writes nothing: that is decided on an
 * eventually consistent read (half the read units). It cannot move a verdict: activity only moves
 * forward, so a heartbeat recent to an older view is recent to the current one, and no write is ever
 * conditioned on the view. Anything else (no state yet, a caller not the target's, another run, a write
 * due) is decided again on the strongly consistent read. What a view up to about a second old can miss
 * is a change in that second — a redispatch, a cancel, a final status, a refresh's lookup verdict, an
 * approval decided: this heartbeat is then answered `coalesced` (and, for a superseded run, not recorded
 * as late), and the next one, read strongly once the window has passed or answered from a current view,
 * gets the right answer. A heartbeat that does write reads 1.5 units instead of 1 (once per window).
 */
async function coalescedAtAGlance(deps: LifecycleDeps, dispatchId: string, runId: string, event: RunEvent, caller: Caller): Promise<boolean> {
  if (event.type !== 'heartbeat' && event.type !== 'progress') return false;
  const seen = await deps.store.peekState(dispatchId);
  return seen !== undefined && seen.runId === runId && reportsFor(caller, seen.target) && applyRunEvent(seen, event, deps.now()).kind === 'coalesced';
}

/**
 * `GET /runs/{runId}/control?dispatchId=` (CONTRACT §12): what a worker that cannot be called — a
 * Lambda — polls with its heartbeats: whether its run was superseded (stop: its events are late from
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
  const message = await deps.store.getAcceptedMessage(dispatchId);
  if (!message?.content.valid) throw new ApiError('not_found', `dispatch ${dispatchId} has no task`);
  return { status: 200, body: await taskOf(deps.blobs, message) };
}

/** A final event's `result.body`: only on a final type, at most 256 KB of JSON (413 beyond). */
function resultBodyOfEvent(type: string, body: unknown): { readonly json: string; readonly ref: (seq: number) => ResultBodyRef } {
  if (type !== 'completed' && type !== 'failed' && type !== 'cancelled') throw new ApiError('invalid', 'result.body is carried by a final event only (completed, failed, cancelled)');
  const json = JSON.stringify(body);
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > MAX_RESULT_BODY_BYTES) throw new ApiError('too_large', `result.body is ${bytes} bytes; at most ${MAX_RESULT_BODY_BYTES}`);
  // The digest names the body's own record and object (storeResultBody): the state refers to this body, not the seq's last.
  const digest = resultBodyDigest(json);
  return { json, ref: (seq) => ({ seq, bytes, spilled: bytes > INLINE_BODY_BYTES, digest }) };
}

/**
 * `GET /dispatches/{id}?refresh=true`: looks the run up live and records what the target says through
 * the monitor's transitions (CONTRACT §2 V3), at most once per 10 s per dispatch — a refresh within them
 * answers the stored view and does not call the target.
 */
export async function refreshed(deps: LifecycleDeps, state: DispatchState): Promise<DispatchState> {
  if (state.phase !== 'submitted' || !state.runId || isTerminal(state.execution.status)) return state;
  const now = deps.now();
  if (refreshThrottled(state, now)) return state;
  const lookup = await lookUpRun(deps, state);
  // A run waiting for an approval the ledger holds is governed by the approval clock alone: a refresh
  // that cannot see it records nothing (and never moves the approval's expiry).
  const waiting = state.execution.status === 'waiting_for_approval' && state.execution.pendingApproval !== null;
  const stallDue = !waiting && now.getTime() >= stallDeadline(state);
  if (lookup.kind === 'unavailable' && !stallDue) {
    // The target could not be asked: nothing was found there, so nothing is recorded. A run still within
    // its activity window is not lost because one lookup failed: the answer says so (CONTRACT §2: the
    // stored view with lookup_unavailable and the unknowns).
    return reconcileLookup(state, lookup, now, false) ?? state;
  }
  // What the target said — a final status, a 404, the run alive — is recorded like the monitor's lookup.
  const next = refreshRecorded(state, lookup, now, stallDue);
  // A lost race only means someone else recorded a newer state first: answer with that.
  if ((await deps.store.commit(state, next)).kind === 'committed') return next;
  return (await deps.store.getState(state.dispatchId)) ?? state;
}


/** POST /dispatches/{id}/approval: forwarded to the target; recorded only once the target took it. */
export async function postApproval(deps: LifecycleDeps, state: DispatchState, body: Buffer | undefined) {
  const outcome = await decideApproval(deps, state, parseJson(body, ApprovalBody()));
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
export async function postRedispatch(deps: LifecycleDeps, state: DispatchState, body: Buffer | undefined) {
  const { reason, force } = parseJson(body, RedispatchBody());
  const outcome = await redispatch(deps, state, { reason, force: force ?? false });
  switch (outcome.kind) {
    case 'run_may_be_active':
      throw new ApiError('conflict', 'the current run may still be active: look it up, or redispatch with force and a reason', {
        runId: outcome.runId,
        attempt: outcome.attempt,
        status: outcome.status,
        check: `npx ledger check ${state.dispatchId} --refresh`,
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
