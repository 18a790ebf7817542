import { randomUUID } from 'node:crypto';
import { CallbackClient, DEFAULT_RETRY, type CallbackOutcome, type RetryPolicy, type Transport } from './callbacks.js';
import { DEFAULT_STALL_AFTER_SECONDS, HeartbeatCoalescer, heartbeatIntervalMs, systemClock, type Clock } from './heartbeat.js';
import { compact, type LambdaRunItem, type LambdaRunStore } from './lambda-store.js';
import {
  CallbackError,
  EvidenceTooLargeError,
  RunEndedError,
  UnsafeRefError,
  claimedEvidence,
  clipForMessage,
  isFinal,
  type Decision,
  type FinalStatus,
  type Log,
  type RunEvent,
  type RunResult,
  type Submission,
  WORKER_RESTARTED,
} from './model.js';
import { isPlainObject, parseSubmission, traceparentOf } from './parse.js';
import { refProblem } from '@dispatch-ledger/protocol';
import { MAX_EVIDENCE_BYTES, RunCancelledError, resultOf, type RunContext, type RunFunction } from './runs.js';
import type { Signer } from './signer.js';

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

/** The part of Lambda's context the kit reads. */
export interface LambdaContextLike {
  readonly awsRequestId: string;
  getRemainingTimeInMillis(): number;
}

export type LambdaHandler = (event: unknown, context: LambdaContextLike) => Promise<void>;

export interface LambdaHandlerOptions {
  readonly run: RunFunction;
  readonly store: () => LambdaRunStore;
  readonly log: Log;
  readonly signer?: Signer | undefined;
  readonly retry?: Partial<RetryPolicy> | undefined;
  readonly transport?: Transport | undefined;
  readonly clock?: Clock | undefined;
  readonly stallHintSeconds?: number | undefined;
}

/** Items expire (DynamoDB TTL `expiresAt`) after the ledger's default retention. */
const RETENTION_SECONDS = 90 * 86_400;
/** Time kept back from the function's timeout for the last writes. */
const MARGIN_MS = 2_000;
const SUMMARY_CHARS = 2_000;
const NOTE_CHARS = 1_000;

type Output = { readonly kind: 'returned'; readonly value: unknown } | { readonly kind: 'threw'; readonly error: unknown } | { readonly kind: 'suspended' };

export function createLambdaHandler(options: LambdaHandlerOptions): LambdaHandler {
  const clock = options.clock ?? systemClock;
  const { log } = options;
  const nowIso = (): string => new Date(clock.now()).toISOString();

  return async (event, context) => {
    const store = options.store();
    const remaining = Math.max(1_000, context.getRemainingTimeInMillis() - MARGIN_MS);
    const policy = { ...DEFAULT_RETRY, ...options.retry };
    const stop = new AbortController();
    const callbacks = new CallbackClient({
      log,
      stopSignal: stop.signal,
      signer: options.signer,
      // A callback never outlives the invocation: past its timeout, Lambda would freeze it mid-way.
      retry: { ...policy, budgetMs: Math.min(policy.budgetMs, remaining), finalBudgetMs: Math.min(policy.finalBudgetMs, remaining) },
      ...(options.transport ? { transport: options.transport } : {}),
    });
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

interface Env {
  readonly store: LambdaRunStore;
  readonly callbacks: CallbackClient;
  readonly log: Log;
  readonly requestId: string;
  readonly leaseUntil: string;
  readonly nowIso: () => string;
  readonly clock: Clock;
  readonly options: LambdaHandlerOptions;
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
    dispatchId: submission.dispatchId,
    attempt: submission.attempt,
    origin: submission.origin,
    callbackUrl: submission.callbackUrl,
    expectedEvidence: submission.expectedEvidence,
    timeouts: submission.timeouts,
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

function finalEventOf(item: LambdaRunItem): RunEvent | undefined {
  if (!isFinal(item.status) || !item.finalReport) return undefined;
  const body: unknown = item.resultBodyJson === undefined ? undefined : JSON.parse(item.resultBodyJson);
  return {
    dispatchId: item.dispatchId,
    seq: item.finalReport.seq,
    type: item.status,
    ...(item.nativeStatus !== undefined && { nativeStatus: item.nativeStatus }),
    ...(item.result && { result: { summary: item.result.summary, ...(body !== undefined && { body }) } }),
    ...(item.status === 'completed' && { evidence: claimedEvidence(item) }),
  };
}

function reportState(outcome: CallbackOutcome): 'pending' | 'delivered' | 'refused' {
  if (outcome.kind === 'delivered') return 'delivered';
  if (outcome.kind === 'refused') return 'refused';
  return 'pending';
}

// --- One invocation driving a run ----------------------------------------------------------------------

/** Runs `run` for the item this invocation holds, to its end or to an approval request. */
async function drive(env: Env, item: LambdaRunItem, submission: Submission | undefined): Promise<void> {
  const inv = new Invocation(env, item);
  inv.heartbeat.request();
  let output: Output;
  try {
    const task = submission?.task ?? (await inv.task());
    output = await Promise.race([env.options.run(task, inv.context()).then((value): Output => ({ kind: 'returned', value })), inv.suspended]);
  } catch (error) {
    output = { kind: 'threw', error };
  }
  inv.settled = true;
  inv.heartbeat.stop();
  if (output.kind !== 'suspended' && !inv.lost) await inv.finish(output);
  await inv.drain();
  if (inv.storeError !== undefined) throw inv.storeError;
}

class Invocation {
  item: LambdaRunItem;
  readonly env: Env;
  readonly abort = new AbortController();
  readonly heartbeat: HeartbeatCoalescer;
  settled = false;
  /** Another invocation wrote the item (or a write failed): this one sends and writes nothing more. */
  lost = false;
  storeError: unknown;
  #writes: Promise<boolean> = Promise.resolve(true);
  #outbox: Promise<unknown> = Promise.resolve();
  readonly #uploads = new Set<Promise<unknown>>();
  readonly #pending = new Set<Promise<unknown>>();
  #approvalIndex = 0;
  #suspend: (output: Output) => void = () => undefined;
  readonly suspended: Promise<Output>;

  constructor(env: Env, item: LambdaRunItem) {
    this.env = env;
    this.item = item;
    this.suspended = new Promise<Output>((resolve) => {
      this.#suspend = resolve;
    });
    const stall = item.timeouts.stallAfterSeconds ?? env.options.stallHintSeconds ?? DEFAULT_STALL_AFTER_SECONDS;
    this.heartbeat = new HeartbeatCoalescer(
      heartbeatIntervalMs(stall),
      () => {
        void this.emit({ type: 'heartbeat' }, false);
        this.#hold(this.pollControl());
      },
      env.clock,
    );
  }

  async task(): Promise<Readonly<Record<string, unknown>>> {
    const outcome = await this.env.callbacks.getTask(this.item.callbackUrl, this.item.dispatchId, this.item.runId);
    if (outcome.kind !== 'delivered') throw new CallbackError(`reading the task: ${outcome.kind}`, { kind: outcome.kind === 'refused' ? 'refused' : 'gave_up' });
    const value: unknown = JSON.parse(outcome.text);
    if (!isPlainObject(value)) throw new Error('the task is not a JSON object');
    return value;
  }

  /** Polls the control record; a superseded or cancelled run has its signal aborted. */
  async pollControl(): Promise<void> {
    const { callbackUrl, runId, dispatchId } = this.item;
    const outcome = await this.env.callbacks.getControl(callbackUrl, runId, dispatchId, 10_000);
    if (outcome.kind !== 'delivered' || this.settled) return;
    let control: unknown;
    try {
      control = JSON.parse(outcome.text);
    } catch {
      return;
    }
    if (!isPlainObject(control) || (control['superseded'] !== true && control['cancelRequested'] !== true)) return;
    if (this.item.cancelRequestedAt === undefined) {
      this.env.log({ level: 'info', msg: control['superseded'] === true ? 'run_superseded' : 'cancel_requested', runId });
      this.persist({ cancelRequestedAt: this.env.nowIso() });
      this.abort.abort(new RunCancelledError(runId, 'cancel'));
    }
  }

  context(): RunContext {
    const { item } = this;
    const active = (): void => {
      if (this.settled || this.lost) throw new RunEndedError(item.runId, 'ended');
    };
    return {
      dispatchId: item.dispatchId,
      attempt: item.attempt,
      runId: item.runId,
      origin: item.origin,
      expectedEvidence: item.expectedEvidence,
      traceparent: item.traceparent,
      signal: this.abort.signal,
      heartbeat: () => (this.settled ? 'stopped' : this.heartbeat.request()),
      progress: async (note) => {
        active();
        this.persist({ note: String(note).slice(0, NOTE_CHARS) });
        await this.emit({ type: 'progress' });
      },
      putEvidence: async (ref, bytes, options = {}) => {
        active();
        const problem = refProblem(ref);
        if (problem) throw new UnsafeRefError(ref, problem);
        if (typeof bytes !== 'string' && !(bytes instanceof Uint8Array)) throw new TypeError('evidence bytes must be a string or a Uint8Array');
        const size = typeof bytes === 'string' ? Buffer.byteLength(bytes, 'utf8') : bytes.byteLength;
        if (size > MAX_EVIDENCE_BYTES) throw new EvidenceTooLargeError(ref, size, MAX_EVIDENCE_BYTES);
        const contentType = options.contentType ?? (typeof bytes === 'string' ? 'text/plain; charset=utf-8' : 'application/octet-stream');
        const upload = this.env.callbacks.putEvidence(item.callbackUrl, item.dispatchId, item.runId, ref, bytes, contentType);
        this.#uploads.add(upload);
        this.#hold(upload);
        const outcome = await upload.finally(() => this.#uploads.delete(upload));
        if (outcome.kind !== 'delivered') {
          throw new CallbackError(`uploading ${clipForMessage(ref)}: ${outcome.kind}${outcome.kind === 'refused' ? ` (HTTP ${outcome.status})` : ''}`, {
            kind: outcome.kind === 'refused' ? 'refused' : outcome.kind === 'stopped' ? 'stopped' : 'gave_up',
            ...(outcome.kind === 'refused' ? { status: outcome.status } : {}),
          });
        }
        if (!this.item.evidence.includes(ref)) this.persist({ evidence: [...this.item.evidence, ref] });
      },
      requestApproval: async (note) => {
        active();
        if (this.abort.signal.aborted) return 'cancel';
        const index = this.#approvalIndex++;
        const known = this.item.approvals[index];
        // A re-entered run: this approval was asked for and decided in an earlier invocation.
        if (known?.decision) return known.decision;
        const approvalId = `a-${randomUUID()}`;
        const requestedAt = this.env.nowIso();
        const approvals = [...this.item.approvals.slice(0, index), { approvalId, requestedAt, ...(note === undefined ? {} : { note: String(note).slice(0, NOTE_CHARS) }) }];
        this.persist({ status: 'waiting_for_approval', pendingApproval: { approvalId, requestedAt }, approvals });
        this.heartbeat.stop();
        await this.emit({ type: 'approval_requested', approvalId });
        this.env.log({ level: 'info', msg: 'approval_requested_invocation_ends', runId: item.runId, approvalId });
        // The invocation ends here; the decision re-invokes the function, which runs `run` again.
        this.#suspend({ kind: 'suspended' });
        return new Promise<Decision>(() => undefined);
      },
    };
  }

  async finish(output: Exclude<Output, { kind: 'suspended' }>): Promise<void> {
    let status: FinalStatus;
    let result: RunResult;
    if (this.item.cancelRequestedAt !== undefined) {
      status = 'cancelled';
      result = { summary: 'cancelled on request' };
    } else if (output.kind === 'threw') {
      status = 'failed';
      result = { summary: messageOf(output.error).slice(0, SUMMARY_CHARS) };
    } else {
      const normalised = resultOf(output.value);
      status = normalised.ok ? 'completed' : 'failed';
      result = normalised.ok ? normalised.result : { summary: normalised.error.message.slice(0, SUMMARY_CHARS) };
    }
    await Promise.allSettled([...this.#uploads]);
    const seq = this.item.seq + 1;
    const persisted = this.persist({
      status,
      result: { summary: result.summary },
      resultBodyJson: result.body === undefined ? undefined : JSON.stringify(result.body),
      pendingApproval: undefined,
      seq,
      finalReport: { seq, state: 'pending' },
    });
    const event = finalEventOf(this.item);
    this.env.log({ level: status === 'completed' ? 'info' : 'warn', msg: `run_${status}`, runId: this.item.runId, summary: result.summary });
    if (!event) return;
    const outcome = await this.#enqueue(async () => ((await persisted) ? this.env.callbacks.postEvent(this.item.callbackUrl, this.item.runId, event) : { kind: 'stopped', tries: 0 }));
    const state = reportState(outcome);
    // Pending: the item still says final; the ledger's lookup reads it, and a redelivery sends it again.
    if (state !== 'pending') this.persist({ finalReport: { seq, state } });
  }

  /** Takes the next seq, writes it, then sends the event (never sent if the write did not land). */
  emit(fields: Omit<RunEvent, 'dispatchId' | 'seq'>, activity = true): Promise<CallbackOutcome> {
    if (this.lost) return Promise.resolve({ kind: 'stopped', tries: 0 });
    const seq = this.item.seq + 1;
    const persisted = this.persist({ seq });
    if (activity) this.heartbeat.activity();
    const event: RunEvent = { dispatchId: this.item.dispatchId, seq, ...fields };
    return this.#enqueue(async () => ((await persisted) ? this.env.callbacks.postEvent(this.item.callbackUrl, this.item.runId, event) : { kind: 'stopped', tries: 0 }));
  }

  /** Changes the item at once and queues its conditional write; writes go in order. */
  persist(patch: Partial<Omit<LambdaRunItem, 'runId' | 'kit' | 'rev'>>): Promise<boolean> {
    const next: LambdaRunItem = compact({ ...this.item, ...patch, rev: this.item.rev + 1, updatedAt: this.env.nowIso() });
    this.item = next;
    const written = this.#writes.then(async () => {
      if (this.lost) return false;
      try {
        if (await this.env.store.replace(next)) return true;
        this.env.log({ level: 'warn', msg: 'run_taken_by_another_invocation', runId: next.runId });
      } catch (error) {
        this.storeError ??= error;
        this.env.log({ level: 'error', msg: 'store_write_failed', runId: next.runId, error: messageOf(error) });
      }
      this.lost = true;
      this.abort.abort(new RunEndedError(next.runId, 'ended'));
      return false;
    });
    this.#writes = written;
    this.#hold(written);
    return written;
  }

  #enqueue(send: () => Promise<CallbackOutcome>): Promise<CallbackOutcome> {
    const sent = this.#outbox.then(send).catch((error: unknown): CallbackOutcome => ({ kind: 'gave_up', last: messageOf(error), tries: 0 }));
    this.#outbox = sent;
    this.#hold(sent);
    return sent;
  }

  #hold(work: Promise<unknown>): void {
    const held = work.catch(() => undefined);
    this.#pending.add(held);
    void held.finally(() => this.#pending.delete(held));
  }

  /** Waits for every write, event and upload under way: Lambda freezes the process once the handler returns. */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}
