import { systemClock } from './heartbeat.js';
import { compact, type LambdaRunItem, type LambdaRunStore } from './lambda-store.js';
import {
  isFinal,
  submittedFields,
  type Decision,
  type FinalStatus,
  type Submission,
  WORKER_RESTARTED,
} from './model.js';
import { isPlainObject, parseSubmission, traceparentOf } from './parse.js';
import { reportState } from './results.js';
import { invocationCallbacks } from './invocation-callbacks.js';
import { Invocation, finalEventOf, type Env, type LambdaHandler, type LambdaHandlerOptions, type Output } from './lambda-invocation.js';

/**
 * The kit as a Lambda handler (CONTRACT §12). The ledger invokes the function asynchronously with the
 * submission body, or with `{ resume: runId, approvalId, decision }` once an approval is decided. One
 * item per run in a {@link LambdaRunStore} (DynamoDB in AWS) carries everything across invocations:
 * status, the last seq taken, the approvals asked for, the uploads taken, the final report.
 *
 * - A repeated delivery (Lambda's retries, a duplicate invoke) never runs `run` twice: the item is
 *   created on `attribute_not_exists(runId)`; a final run only re-sends a final event never delivered.
 * - A run an earlier invocation left `running` — Lambda retrying the same invocation (same request id:
 *   the earlier try crashed or timed out), or any invocation once that one's function timeout is over —
 *   is reported `failed`, `worker_restarted`. A duplicate while the first invocation may still be alive
 *   is left to it.
 * - `requestApproval` persists the run as `waiting_for_approval`, sends `approval_requested` and ends
 *   the invocation; the resume invocation calls `run` again from the top, and the n-th
 *   `requestApproval` of the run resolves at once with the n-th decision. `run` must be re-entrant.
 * - Errors of the kit itself (the store unreachable, an event that is not the ledger's) escape the
 *   handler, for Lambda to retry and then hand to the on-failure destination; `run` throwing is a
 *   `failed` run, reported like on the HTTP side.
 */

export type { LambdaContextLike, LambdaHandler, LambdaHandlerOptions } from './lambda-invocation.js';

/** Items expire (DynamoDB TTL `expiresAt`) after the ledger's default retention. */
export const RETENTION_SECONDS = 90 * 86_400;

export function createLambdaHandler(options: LambdaHandlerOptions): LambdaHandler {
  const clock = options.clock ?? systemClock;
  const { log } = options;
  const nowIso = (): string => new Date(clock.now()).toISOString();

  return async (event, context) => {
    const store = options.store();
    const stop = new AbortController();
    const callbacks = invocationCallbacks(options, context, stop.signal);
    const requestId = context.awsRequestId;
    const leaseUntil = new Date(clock.now() + context.getRemainingTimeInMillis()).toISOString();
    const env = { store, callbacks, log, requestId, leaseUntil, nowIso, clock, options };
    try {
      if (isPlainObject(event) && 'resume' in event) await resume(env, event);
      else await submit(env, event);
    } finally {
      stop.abort();
    }
  };
}


// --- The two events ------------------------------------------------------------------------------------

async function submit(env: Env, event: unknown): Promise<void> {
  const parsed = parseSubmission(event);
  if (!parsed.ok) throw new TypeError(`not a Dispatch Ledger submission: ${parsed.problem}`);
  const submission = parsed.value;
  const runId = `${submission.dispatchId}:${submission.attempt}`;
  if (isPlainObject(event) && event['runId'] !== undefined && event['runId'] !== runId) throw new TypeError(`runId must be ${runId}`);
  // An invoke has no headers: the ledger puts the trace context in the payload (CONTRACT §12).
  const traceparent = isPlainObject(event) ? traceparentOf(event['traceparent']) : undefined;
  const at = env.nowIso();
  const item: LambdaRunItem = {
    runId,
    status: 'running',
    seq: 0,
    updatedAt: at,
    kit: 1,
    rev: 1,
    ...submittedFields(submission),
    ...(traceparent === undefined ? {} : { traceparent }),
    createdAt: at,
    invocation: env.requestId,
    leaseUntil: env.leaseUntil,
    evidence: [],
    approvals: [],
    expiresAt: Math.floor(env.clock.now() / 1000) + RETENTION_SECONDS,
  };
  const created = await env.store.create(item);
  if (created.kind === 'created') {
    env.log({ level: 'info', msg: 'run_created', runId, dispatchId: item.dispatchId, attempt: item.attempt });
    return drive(env, item, submission);
  }
  const existing = created.existing;
  if (isFinal(existing.status)) return resendFinal(env, existing);
  if (existing.status === 'waiting_for_approval') {
    env.log({ level: 'info', msg: 'duplicate_delivery_waiting_for_approval', runId });
    return;
  }
  if (interrupted(env, existing)) return failRestarted(env, existing);
  env.log({ level: 'info', msg: 'duplicate_delivery_run_live', runId, invocation: existing.invocation });
}

async function resume(env: Env, event: Record<string, unknown>): Promise<void> {
  const { resume: runId, approvalId, decision } = event;
  if (typeof runId !== 'string' || typeof approvalId !== 'string' || (decision !== 'approve' && decision !== 'cancel')) {
    throw new TypeError('a resume event is { resume: runId, approvalId, decision: "approve" | "cancel" }');
  }
  const existing = await env.store.get(runId);
  if (!existing) {
    env.log({ level: 'warn', msg: 'resume_of_unknown_run', runId, approvalId });
    return;
  }
  if (isFinal(existing.status)) return resendFinal(env, existing);
  const index = existing.approvals.findIndex((approval) => approval.approvalId === approvalId);
  if (existing.status !== 'waiting_for_approval') {
    // A resume delivered again: the run is under way (or was, until its invocation died).
    if (index >= 0 && interrupted(env, existing)) return failRestarted(env, existing);
    env.log({ level: 'info', msg: 'duplicate_resume', runId, approvalId });
    return;
  }
  if (existing.pendingApproval?.approvalId !== approvalId || index < 0) {
    env.log({ level: 'warn', msg: 'resume_of_other_approval', runId, approvalId, pending: existing.pendingApproval?.approvalId });
    return;
  }
  const chosen: Decision = decision;
  const approvals = existing.approvals.map((approval, at) => (at === index ? { ...approval, decision: chosen } : approval));
  const taken: LambdaRunItem = compact({ ...existing, status: 'running', pendingApproval: undefined, approvals, invocation: env.requestId, leaseUntil: env.leaseUntil, rev: existing.rev + 1, updatedAt: env.nowIso() });
  if (decision === 'cancel') {
    // Nothing to run: the run ends cancelled, as a cancel decision ends it on the HTTP side.
    return endWithoutRunning(env, { ...taken, cancelRequestedAt: env.nowIso() }, existing.rev, 'cancelled', 'cancelled: the origin decided cancel');
  }
  if (!(await env.store.replace(taken))) {
    env.log({ level: 'info', msg: 'resume_taken_by_another_invocation', runId, approvalId });
    return;
  }
  env.log({ level: 'info', msg: 'run_resumed', runId, approvalId });
  return drive(env, taken, undefined);
}

/** The invocation that drove the run is certainly gone: Lambda retries it (same request id), or its timeout is over. */
function interrupted(env: Env, item: LambdaRunItem): boolean {
  return item.invocation === env.requestId || Date.parse(item.leaseUntil) <= env.clock.now();
}

function failRestarted(env: Env, item: LambdaRunItem): Promise<void> {
  env.log({ level: 'warn', msg: 'run_orphaned_by_restart', runId: item.runId, was: item.status });
  return endWithoutRunning(env, item, item.rev, 'failed', WORKER_RESTARTED, WORKER_RESTARTED);
}

/** Ends a run this invocation will not run: written (if still at `rev`), then reported. */
async function endWithoutRunning(env: Env, item: LambdaRunItem, rev: number, status: FinalStatus, summary: string, nativeStatus?: string): Promise<void> {
  const seq = item.seq + 1;
  const ended: LambdaRunItem = compact({
    ...item,
    status,
    nativeStatus,
    result: { summary },
    pendingApproval: undefined,
    seq,
    finalReport: { seq, state: 'pending' as const },
    invocation: env.requestId,
    rev: rev + 1,
    updatedAt: env.nowIso(),
  });
  if (!(await env.store.replace(ended))) {
    env.log({ level: 'info', msg: 'run_moved_by_another_invocation', runId: item.runId });
    return;
  }
  return resendFinal(env, ended);
}

/** Sends the final event a final item stands for, if it was never delivered; records that it was. */
async function resendFinal(env: Env, item: LambdaRunItem): Promise<void> {
  const event = finalEventOf(item);
  if (!event || item.finalReport?.state !== 'pending') return;
  const state = reportState(await env.callbacks.postEvent(item.callbackUrl, item.runId, event));
  if (state === 'pending') return;
  await env.store.replace({ ...item, finalReport: { seq: event.seq, state }, rev: item.rev + 1, updatedAt: env.nowIso() });
}



// --- One invocation driving a run ----------------------------------------------------------------------

/** Runs `run` for the item this invocation holds, to its end or to an approval request. */
async function drive(env: Env, item: LambdaRunItem, submission: Submission | undefined): Promise<void> {
  const inv = new Invocation(env, item);
  inv.heartbeat.request();
  inv.watchControl();
  let output: Output;
  try {
    const task = submission?.task ?? (await inv.task());
    output = await Promise.race([env.options.run(task, inv.context()).then((value): Output => ({ kind: 'returned', value })), inv.suspended]);
  } catch (error) {
    output = { kind: 'threw', error };
  }
  inv.settled = true;
  inv.heartbeat.stop();
  inv.stopWatchingControl();
  if (output.kind !== 'suspended' && !inv.lost) await inv.finish(output);
  await inv.drain();
  if (inv.storeError !== undefined) throw inv.storeError;
}
