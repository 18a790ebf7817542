import * as z from 'zod/mini';
import '../zod-english.js';
import { DISPATCH_ID } from '../dispatch/ids.js';
import { applyRunEvent, isTerminal, reconcileLookup, RUN_EVENT_TYPES } from '../dispatch/lifecycle.js';
import { NO_EXECUTION, type DispatchState } from '../dispatch/state.js';
import { advance, alsoChange, submitted } from '../dispatch/transitions.js';
import { refProblem } from '../dispatch/refs.js';
import { taskOf } from '../dispatch/task.js';
import { settleEvidence } from '../monitor/evidence-check.js';
import type { DispatchWorkDeps, LedgerStore } from '../ledger/port.js';
import type { LookupOutcome } from '../targets/port.js';
import { clip, printable } from '../text.js';
import type { Caller } from './caller.js';
import { ApiError } from './http.js';

/** What the lifecycle routes need: the same as the monitor's work on a dispatch. */
export type LifecycleDeps = DispatchWorkDeps;

const MAX_SEQ = 2 ** 53;

export const RunEventBody = z.strictObject({
  dispatchId: z.string().check(z.regex(DISPATCH_ID)),
  seq: z.int().check(z.minimum(0), z.maximum(MAX_SEQ)),
  type: z.enum(RUN_EVENT_TYPES),
  approvalId: z.optional(z.string().check(z.minLength(1), z.maxLength(128))),
  result: z.optional(z.strictObject({ summary: z.optional(z.string().check(z.maxLength(100_000))) })),
  evidence: z.optional(
    z.array(z.string().check(z.refine((ref) => refProblem(ref) === undefined, 'unsafe evidence ref'))).check(z.maxLength(32)),
  ),
});

export function parseJson<T>(body: Buffer | undefined, schema: z.ZodMiniType<T>): T {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body?.toString('utf8') ?? '');
  } catch {
    throw new ApiError('malformed', 'the body is not JSON');
  }
  const result = schema.safeParse(parsed);
  if (!result.success) {
    throw new ApiError('invalid', 'the body is not valid', result.error.issues.slice(0, 20).map((issue) => ({ field: issue.path.join('.'), message: issue.message })));
  }
  return result.data;
}

/** Writes `next` if the state is still at `expected`; a concurrent change is a 409 the caller may retry. */
async function commit(store: LedgerStore, next: DispatchState, expected: number): Promise<void> {
  if ((await store.replaceState(next, expected)).kind === 'conflict') throw new ApiError('conflict', 'the dispatch changed concurrently; retry');
}

/** POST /runs/{runId}/events — the target reports on its run (CONTRACT §2). */
export async function postRunEvent(deps: LifecycleDeps, runId: string, body: Buffer | undefined, caller: Caller) {
  const event = parseJson(body, RunEventBody);
  // Optimistic concurrency: a concurrent writer makes us re-read and decide again.
  for (let round = 0; round < 3; round += 1) {
    const state = await deps.store.getState(event.dispatchId);
    const notFound = new ApiError('not_found', `no run ${runId} for dispatch ${event.dispatchId}`);
    if (state && caller.kind === 'principal' && !(caller.principal?.role === 'target' && caller.principal.target === state.target)) throw notFound;
    if (state?.supersededRuns.includes(runId)) {
      await deps.store.recordLateEvent({ dispatchId: state.dispatchId, runId, seq: event.seq, type: event.type, at: deps.now().toISOString() });
      return { status: 200, body: { applied: false, late: true } };
    }
    if (!state || (state.runId === null && state.phase === 'accepted')) {
      // The target may report before the ledger has recorded its submission answer: not yet, retry.
      // (In AWS an unknown caller never gets here with a state: the principal check above.)
      if (caller.kind === 'open' && (state || (await deps.store.getAcceptedMessage(event.dispatchId)))) {
        throw new ApiError('conflict', 'the run is not recorded yet; retry shortly', { retryable: true });
      }
      if (state) throw new ApiError('conflict', 'the run is not recorded yet; retry shortly', { retryable: true });
      throw notFound;
    }
    if (state.runId !== runId) throw notFound;
    const outcome = applyRunEvent(state, event, deps.now());
    if (outcome.kind === 'invalid') throw new ApiError('invalid', outcome.reason);
    if (outcome.kind === 'stale') return { status: 200, body: { applied: false } };
    if (outcome.kind === 'coalesced') return { status: 202, body: { applied: true } };
    let next = outcome.next;
    // A completion whose evidence is already delivered is settled in the same write; otherwise the
    // monitor looks again from its next tick until the grace window closes.
    // (A check that fails here is left to the monitor rather than failing the target's report.)
    if (next.execution.status === 'completed' && next.evidence.outcome === 'pending') {
      next = (await settleEvidence(deps, next, deps.now(), alsoChange).catch(() => undefined)) ?? next;
    }
    if ((await deps.store.replaceState(next, state.version)).kind === 'updated') return { status: 202, body: { applied: true } };
  }
  throw new ApiError('conflict', 'the dispatch kept changing; retry');
}

async function lookupCurrent(deps: LifecycleDeps, state: DispatchState): Promise<LookupOutcome> {
  const registration = await deps.store.getTarget(state.target);
  if (!registration || !state.runId) return { kind: 'unavailable', reason: `target "${state.target}" is not registered` };
  return deps.targetFor(registration).lookup(state.runId);
}

/** `GET /dispatches/{id}?refresh=true`: looks the run up live and reconciles before answering. */
export async function refreshed(deps: LifecycleDeps, state: DispatchState): Promise<DispatchState> {
  if (state.phase !== 'submitted' || !state.runId || isTerminal(state.execution.status)) return state;
  const now = deps.now();
  const lookup = await lookupCurrent(deps, state);
  const lastActivity = Date.parse(state.execution.lastActivityAt ?? state.updatedAt);
  const stallDue = now.getTime() >= lastActivity + state.timeouts.stallAfterSeconds * 1000;
  const next = reconcileLookup(state, lookup, now, stallDue);
  if (!next) return state;
  if (lookup.kind !== 'found' && !stallDue) {
    // A run still within its activity window is not lost because one lookup failed: the answer says
    // so (CONTRACT §2: the stored view with lookup_unavailable and the unknowns), nothing is recorded.
    return next;
  }
  // A lost race only means someone else recorded a newer state first: answer with that.
  if ((await deps.store.replaceState(next, state.version)).kind === 'updated') return next;
  return (await deps.store.getState(state.dispatchId)) ?? state;
}

const ApprovalBody = z.strictObject({ approvalId: z.string().check(z.minLength(1), z.maxLength(128)), decision: z.enum(['approve', 'cancel']) });

/** POST /dispatches/{id}/approval: forwarded to the target; recorded only once the target took it. */
export async function postApproval(deps: LifecycleDeps, state: DispatchState, body: Buffer | undefined) {
  const { approvalId, decision } = parseJson(body, ApprovalBody);
  const pending = state.execution.pendingApproval;
  if (!pending || pending.approvalId !== approvalId || !state.runId) {
    throw new ApiError('conflict', 'that approvalId is not the pending approval', { pendingApprovalId: pending?.approvalId ?? null });
  }
  const registration = await deps.store.getTarget(state.target);
  if (!registration) throw new ApiError('target_unreachable', `target "${state.target}" is not registered`);
  const answer = await deps.targetFor(registration).decideApproval(state.runId, approvalId, decision);
  if (answer.kind === 'unavailable') throw new ApiError('target_unreachable', `the target could not be reached: ${clip(printable(answer.reason), 200)}`);
  if (answer.kind !== 'decided') throw new ApiError('conflict', 'the target does not hold this approval as pending');
  // The target may already be reporting on the decision; record it on whatever version is current,
  // as long as this approval is still the pending one there.
  let current: DispatchState | undefined = state;
  for (let round = 0; current && round < 3; round += 1) {
    if (current.execution.pendingApproval?.approvalId !== approvalId) break;
    const now = deps.now();
    const next = advance(current, 'approval_decided', now, {
      execution: {
        ...current.execution,
        ...(decision === 'approve' ? { status: 'running' as const } : {}),
        monitorStatus: null,
        pendingApproval: null,
        lastActivityAt: now.toISOString(),
      },
      dueAt: new Date(now.getTime() + current.timeouts.stallAfterSeconds * 1000).toISOString(),
    });
    if ((await deps.store.replaceState(next, current.version)).kind === 'updated') break;
    current = await deps.store.getState(state.dispatchId);
  }
  return { status: 200, body: { approvalId, decision } };
}

const RedispatchBody = z.strictObject({ reason: z.string().check(z.trim(), z.minLength(1), z.maxLength(500)), force: z.optional(z.boolean()) });

/**
 * POST /dispatches/{id}/redispatch (CONTRACT §4): never a second writer by accident. While the current
 * run may be active → 409 with its handle. `force` + reason supersedes it: the old run is asked to
 * cancel (best effort), fenced (its later events are late), and attempt + 1 is submitted.
 */
export async function postRedispatch(deps: LifecycleDeps, state: DispatchState, body: Buffer | undefined) {
  const { reason, force } = parseJson(body, RedispatchBody);
  const proven = state.phase === 'submitted' && isTerminal(state.execution.status);
  if (state.phase === 'submitted' && !proven && !force) {
    throw new ApiError('conflict', 'the current run may still be active: look it up, or redispatch with force and a reason', {
      runId: state.runId,
      attempt: state.attempt,
      status: state.execution.status,
      check: `npx ledger check ${state.dispatchId} --refresh`,
    });
  }
  // Blocked for what a new submission cannot change: refused here, before any target contact.
  const final = ['invalid_fields', 'hop_budget_exceeded', 'unknown_parent'].find((code) => state.blockedReason?.startsWith(code));
  if (final || state.hop > state.maxHops) throw new ApiError('invalid', `this dispatch cannot be submitted: ${state.blockedReason ?? 'hop budget'}`);
  const message = await deps.store.getAcceptedMessage(state.dispatchId);
  if (!message?.content.valid) throw new ApiError('invalid', 'this dispatch has no valid message to submit again');
  const registration = await deps.store.getTarget(state.target);
  if (!registration) throw new ApiError('target_unreachable', `target "${state.target}" is not registered`);
  const target = deps.targetFor(registration);

  // 1. Fence first, conditioned on the version read: from here the old run's events are late, and if
  //    this request dies mid-way the monitor finds attempt + 1 due and submits it itself.
  const superseded = state.phase === 'submitted' && !proven;
  // A new attempt (a new Idempotency-Key) only when a run is known to exist. Otherwise the same key
  // again: a submission that timed out may have created a run, and the same key finds it instead of
  // starting a second writer.
  // After a refusal the target may answer the same key with the same refusal forever: a new key then.
  const attempt = state.runId || state.blockedReason?.startsWith('target_rejected') ? state.attempt + 1 : state.attempt;
  const now = deps.now();
  const record = { at: now.toISOString(), reason: clip(printable(reason), 120), supersededRunId: superseded ? state.runId : null, cancel: null };
  const claimed = advance(state, superseded ? 'superseded' : 'claimed', now, {
    phase: 'accepted',
    blockedReason: null,
    attempt,
    runId: null,
    lastSeq: null,
    supersededRuns: state.runId ? [...state.supersededRuns, state.runId].slice(-10) : state.supersededRuns,
    submission: { attempts: 0, nextRetryAt: null, lastError: null },
    // The new attempt has no run yet: the old run's execution stays with the old run (receipts, redispatch).
    execution: NO_EXECUTION,
    evidence: { ...state.evidence, outcome: state.evidence.expectedCount > 0 ? 'pending' : 'unverified', deadline: null },
    dueAt: new Date(now.getTime() + deps.claimSeconds * 1000).toISOString(),
    redispatch: record,
  });
  await commit(deps.store, claimed, state.version);

  // 2. Ask the old run to stop (best effort, recorded), 3. submit the new attempt.
  let cancel: string | null = null;
  if (superseded && state.runId) {
    const answer = await target.cancel(state.runId);
    cancel = answer.kind === 'cancelled' ? `cancelled (${answer.status})` : answer.kind === 'not_found' ? 'not_found' : `unavailable: ${clip(printable(answer.reason), 80)}`;
  }
  const outcome = await target.submit({
    dispatchId: state.dispatchId,
    attempt,
    origin: state.origin,
    task: await taskOf(deps.blobs, message),
    expectedEvidence: message.content.expectedEvidence,
    callbackUrl: deps.callbackUrl,
  });
  const next: DispatchState = { ...submitted(claimed, outcome, deps.retryPolicy, deps.now()), redispatch: { ...record, cancel } };
  // Someone finishing it first (the monitor after the claim lapsed) is fine: the same key, the same run.
  await deps.store.replaceState(next, claimed.version);
  return {
    status: 202,
    body: { dispatchId: state.dispatchId, attempt, phase: next.phase, runId: next.runId, supersededRunId: superseded ? state.runId : null, cancel, reason },
  };
}
