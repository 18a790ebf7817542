import * as z from 'zod/mini';
import { DISPATCH_ID, MAX_RUN_ID_CHARS } from '@dispatch-ledger/protocol';
import { isTerminal, type DispatchState } from '../dispatch/state.js';
import type { LookupOutcome } from '../dispatch/target-answers.js';
import { approvalAsked, reconcileLookup, runEndedByRuntime, runRedriven } from '../dispatch/transitions/run.js';
import type { DispatchWorkDeps, LedgerStoreWithWrites } from '../ledger/port.js';
import { dispatchAsFound } from './dispatch-as-found.js';
import { runOn, whichRun } from './run-of-dispatch.js';
import { updateDispatch } from '../ledger/repository.js';
import type { StepFunctionsTargetRegistration } from '../targets/port.js';
import { parseExecutionName } from '../targets/run-names.js';
import { keepFoundBody, lookUpRun } from './look-up-run.js';
import { keepRuntimeToken } from './runtime-approvals.js';
import { effectiveSender, type PrincipalRegistry } from '../principals/principals.js';

/**
 * What AWS's orchestrators tell the ledger on its orchestrator queue (CONTRACT §17), one message at a time:
 * - a state machine's **approval request**, sent with `.waitForTaskToken`: `{ dispatchId, runId, taskToken }`.
 *   Taken only from the registered state machine's role and for the dispatch's current run; the ledger
 *   chooses the approval id (from the token, so a redelivery asks nothing twice) and keeps the token
 *   apart from the dispatch: it never appears in a view, an event or a log.
 * - EventBridge's **"Step Functions Execution Status Change"** for a registered state machine: a nudge,
 *   not a verdict. The ledger looks the execution up (the event could be forged by anyone who may send to
 *   the queue; the lookup cannot) and records an end as the run's own report; an execution started again
 *   after the ledger recorded its end (a redrive outside the ledger) is kept as late activity and lists the
 *   dispatch in GET /attention (`redriven`) until a forced redispatch.
 */

export type OrchestratorOutcome =
  /** Step Functions could not be asked about an ended run's change: retried (the event is the only word of a redrive). */
  | 'unobserved'
  | 'approval_requested'
  | 'ended'
  | 'unchanged'
  /** An execution redriven after its end was recorded: kept as a late event and on the attention list (the ledger's way to run it again is a redispatch). */
  | 'late'
  | 'not_current'
  /** An approval request or a status change for a run whose start the ledger has not recorded yet: retried (SQS redelivers it). */
  | 'not_yet'
  | 'unreadable'
  | 'refused'
  | 'conflict';

export interface OrchestratorDeps extends Pick<DispatchWorkDeps, 'targetFor' | 'now' | 'blobs'> {
  readonly store: LedgerStoreWithWrites;
  /** `enforce` (AWS): an approval request is taken only from the state machine's own role. */
  readonly principalMode: 'enforce' | 'open';
  /** Tells a registered operator, whose redrive from the DLQ carries the first sender. @default none: a redrive's claim is never believed */
  readonly principals?: PrincipalRegistry;
}

/** A redrive is kept as a late event of its run under this seq: a run's own events are numbered from 1. */
const REDRIVE_SEQ = 0;

/** Step Functions' task tokens are up to 2,048 characters (the API's `TaskToken` shape): more is not a token. */
const MAX_TASK_TOKEN_CHARS = 2048;
const MAX_INPUT_CHARS = 256 * 1024;

const approvalRequestSchema = z.object({
  dispatchId: z.string().check(z.regex(DISPATCH_ID)),
  runId: z.string().check(z.minLength(1), z.maxLength(MAX_RUN_ID_CHARS)),
  taskToken: z.string().check(z.minLength(1), z.maxLength(MAX_TASK_TOKEN_CHARS)),
});

const statusChangeSchema = z.object({
  source: z.literal('aws.states'),
  'detail-type': z.literal('Step Functions Execution Status Change'),
  detail: z.object({
    executionArn: z.string().check(z.minLength(1), z.maxLength(MAX_RUN_ID_CHARS)),
    stateMachineArn: z.string().check(z.minLength(1), z.maxLength(MAX_RUN_ID_CHARS)),
    status: z.string().check(z.maxLength(32)),
    input: z.optional(z.nullable(z.string().check(z.maxLength(MAX_INPUT_CHARS)))),
    redriveCount: z.optional(z.number()),
  }),
});


/** The dispatch an execution runs: from its input (the submission body), else from its readable name. */
function dispatchOfExecution(executionArn: string, input: string | null | undefined): string | undefined {
  if (input) {
    try {
      const body: unknown = JSON.parse(input);
      const dispatchId = typeof body === 'object' && body !== null ? (body as { dispatchId?: unknown }).dispatchId : undefined;
      if (typeof dispatchId === 'string' && DISPATCH_ID.test(dispatchId)) return dispatchId;
    } catch {
      // Not the ledger's submission body: the name may still say.
    }
  }
  return parseExecutionName(executionArn.split(':').at(-1) ?? '')?.dispatchId;
}

/** The state machine registration of a dispatch's target, if that is what it is. */
async function stateMachineOf(deps: OrchestratorDeps, target: string): Promise<StepFunctionsTargetRegistration | undefined> {
  const registration = await deps.store.getTarget(target);
  return registration?.kind === 'stepfunctions' ? registration : undefined;
}

/**
 * `senderId`: the message's SQS SenderId (an assumed role sends as `{roleId}:{session}`); `redrivenFor`:
 * the first sender of a message an operator moved back from the DLQ, believed only from a registered operator.
 */
export async function takeOrchestratorMessage(deps: OrchestratorDeps, body: unknown, senderId?: string, redrivenFor?: string): Promise<OrchestratorOutcome> {
  const request = approvalRequestSchema.safeParse(body);
  if (request.success) return takeApprovalRequest(deps, request.data, deps.principals ? await effectiveSender(deps.principals, deps.principalMode, senderId, redrivenFor) : senderId);
  const change = statusChangeSchema.safeParse(body);
  if (change.success) return takeStatusChange(deps, change.data.detail);
  return 'unreadable';
}

async function takeApprovalRequest(deps: OrchestratorDeps, request: z.output<typeof approvalRequestSchema>, senderId: string | undefined): Promise<OrchestratorOutcome> {
  const read = await deps.store.getStored(request.dispatchId);
  // The dispatch's target: from its state, or — its submission's answer not recorded yet — from its message.
  const { target } = await dispatchAsFound(deps, request.dispatchId, read);
  const registration = target === undefined ? undefined : await stateMachineOf(deps, target);
  if (!registration) return target === undefined ? 'not_current' : 'refused';
  if (deps.principalMode === 'enforce' && (!registration.roleId || !senderId?.startsWith(`${registration.roleId}:`))) return 'refused';
  // Which run it names, as a target's own report is read: an execution may ask before the ledger has
  // recorded the start that answered it (the intake writes after StartExecution returns) — not yet, retried.
  const run = await runOn(deps, request.dispatchId, read?.state, request.runId, (named) => named === registration.name);
  if (run.kind === 'not_yet') return 'not_yet';
  if (run.kind !== 'current' || !read) return 'not_current';
  // The token first: a decision can only be answered once the state that shows the approval refers to a kept token.
  const kept = await keepRuntimeToken(deps, read.state, request.runId, request.taskToken, 'sfn');
  // Redelivered after its decision was sent: asked and answered already, never reopened.
  if (kept.kind === 'decided') return 'unchanged';
  const { approvalId } = kept;
  const updated = await updateDispatch<OrchestratorOutcome>(
    deps.store,
    request.dispatchId,
    (state) => {
      if (state?.phase !== 'submitted' || state.runId !== request.runId || isTerminal(state.execution.nativeStatus)) return { answer: 'not_current' };
      if (state.execution.pendingApproval?.approvalId === approvalId || state.execution.lastDecision?.approvalId === approvalId) return { answer: 'unchanged' };
      return { write: approvalAsked(state, approvalId, deps.now()), answer: 'approval_requested' };
    },
    { first: read },
  );
  return updated.kind === 'lost' ? 'conflict' : updated.answer;
}

/**
 * The redrive count when Step Functions ran the execution again after the ledger recorded its end (one it
 * has not recorded yet): running now although recorded ended, or redriven after the end was recorded and
 * ended again. Undefined otherwise — a redrive before the lookup that recorded the end is that end's own.
 */
function redrivenSinceRecorded(state: DispatchState, lookup: LookupOutcome): number | undefined {
  if (lookup.kind !== 'found' || !lookup.run.redrive || lookup.run.redrive.count <= (state.execution.redriven?.count ?? 0)) return undefined;
  const { redrive } = lookup.run;
  const recordedAt = Date.parse(state.execution.completedAt ?? state.updatedAt);
  const after = lookup.run.status === 'running' || (redrive.at !== undefined && Date.parse(redrive.at) > recordedAt);
  return after ? redrive.count : undefined;
}

async function takeStatusChange(deps: OrchestratorDeps, detail: z.output<typeof statusChangeSchema>['detail']): Promise<OrchestratorOutcome> {
  const dispatchId = dispatchOfExecution(detail.executionArn, detail.input);
  // Neither its input nor its name is the ledger's: an execution the ledger did not start.
  if (!dispatchId) return 'not_current';
  const read = await deps.store.getStored(dispatchId);
  if (!read || read.state.runId !== detail.executionArn) {
    // An execution that ended (or changed) while the ledger was still in the StartExecution call: its run
    // is written when the call returns, so the event is retried — not dropped, leaving the end to the
    // stall deadline's lookup and the slot held until then.
    const found = await dispatchAsFound(deps, dispatchId, read);
    const registration = found.target === undefined ? undefined : await stateMachineOf(deps, found.target);
    if (!found.submitting || registration?.stateMachineArn !== detail.stateMachineArn) return 'not_current';
    // An earlier attempt's execution (its end arriving while a redispatch starts the next) is never this
    // one: asked only here, in the window, so an ordinary stale event costs no read of past attempts.
    return read && (await whichRun(deps, read.state, detail.executionArn)) === 'superseded' ? 'not_current' : 'not_yet';
  }
  const registration = await stateMachineOf(deps, read.state.target);
  if (registration?.stateMachineArn !== detail.stateMachineArn) return 'not_current';
  // Looked up before anything is recorded: the event says which execution changed, Step Functions says how.
  const lookup = await lookUpRun(deps, read.state);
  if (isTerminal(read.state.execution.nativeStatus)) {
    // After its end is recorded, this event is the ledger's only word of a redrive (nothing looks an ended
    // run up again): an unanswered lookup is retried, never concluded.
    if (lookup.kind === 'unavailable') return 'unobserved';
    const count = redrivenSinceRecorded(read.state, lookup);
    // Not run again since the end was recorded, by Step Functions' own word (a start event delivered late,
    // or a forged one, changes nothing).
    if (count === undefined) return 'unchanged';
    // Kept once per run as late activity (seq 0: no event of the run's own has it), and on the state, so
    // the dispatch is on the attention list until a person redispatches it (the ledger's way to run it again).
    await deps.store.recordLateEvent({ dispatchId, runId: detail.executionArn, seq: REDRIVE_SEQ, type: 'redriven', at: deps.now().toISOString() });
    const updated = await updateDispatch<OrchestratorOutcome>(
      deps.store,
      dispatchId,
      (state) => {
        if (!state || state.runId !== detail.executionArn || !isTerminal(state.execution.nativeStatus)) return { answer: 'unchanged' };
        const next = runRedriven(state, count, deps.now());
        return next ? { write: next, answer: 'late' } : { answer: 'late' };
      },
      { first: read },
    );
    return updated.kind === 'lost' ? 'conflict' : updated.answer;
  }
  // Its output, as the result's body, before the state that refers to it.
  const body = await keepFoundBody(deps, read.state, lookup);
  const updated = await updateDispatch<OrchestratorOutcome>(
    deps.store,
    dispatchId,
    (state) => {
      if (!state || state.runId !== detail.executionArn || isTerminal(state.execution.nativeStatus)) return { answer: 'unchanged' };
      // Not seen (unavailable, unknown to Step Functions): the nudge concludes nothing; the monitor's own lookup will.
      if (lookup.kind !== 'found') return { answer: 'unchanged' };
      if (isTerminal(lookup.run.status)) return { write: runEndedByRuntime(state, lookup.run, deps.now(), body), answer: 'ended' };
      // Still running (a start, a redrive): what a refresh would record, never a stall.
      const next = reconcileLookup(state, lookup, deps.now(), false);
      return next ? { write: next, answer: 'unchanged' } : { answer: 'unchanged' };
    },
    { first: read },
  );
  return updated.kind === 'lost' ? 'conflict' : updated.answer;
}
