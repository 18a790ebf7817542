/**
 * @dispatch-ledger/worker/durable — the kit inside a Lambda durable function (CONTRACT §17 `durable`).
 * The ledger starts one durable execution per attempt with an asynchronous Invoke whose payload is the
 * §8 submission body; the run's id is the durable execution's ARN. `durableRun(handler)` makes the
 * handler the durable SDK's `withDurableExecution` wraps: it reads the submission from the execution's
 * input, gives `handler` the task and a `ctx` that reports to the ledger as that run, and reports the
 * run's end — `completed` with what `handler` returns, `failed` with what it throws.
 *
 * Durable functions replay: every invocation runs the handler from the top, and an operation the
 * execution has checkpointed returns its recorded result instead of running again. So every seq comes
 * from a durable operation, numbered in the checkpointed order the SDK replays: an event of the handler's
 * own body is posted inside its operation and takes the next seq (the operation's checkpoint records it
 * as sent: a replay returns the record and posts nothing); a `ctx.step` reserves the next block of seqs
 * with one operation, for the events its code sends while it runs (durable-step.ts says why a step's
 * retry reusing its block is harmless).
 *
 * Nothing here loads the durable SDK (`@aws/durable-execution-sdk-js`, an optional peer dependency of
 * this subpath): the handler is given the SDK's own context, which {@link DurableContextLike} describes.
 */
import { MAX_RUN_ID_CHARS } from '@dispatch-ledger/protocol';
import * as z from 'zod/mini';
import type { CallbackClient } from './callbacks.js';
import { checkStepSeqs, defaultStepSeqs, runInBlock, type BlockRecord, type DurableRetryStrategy, type DurableStepContext, type DurableStepOptions, type StepRun } from './durable-step.js';
import { DEFAULT_STALL_AFTER_SECONDS, heartbeatIntervalMs, systemClock, type Clock } from './heartbeat.js';
import { invocationCallbacks, readTask } from './invocation-callbacks.js';
import type { LambdaContextLike } from './invocation-callbacks.js';
import { CallbackError, clipForMessage, InputFieldError, ResultRefusedError, RunEndedError, type FinalStatus, type Log, type RunEvent, type RunResult, type Submission } from './model.js';
import { checkWorkerOptions, safeLog, type CommonWorkerOptions } from './options.js';
import { parseSubmission, traceparentOf } from './parse.js';
import { PendingWork } from './pending-work.js';
import { runIdentityOf, type RunIdentity, type RunContext } from './run-api.js';
import { callbackError, clip, evidenceContentType, messageOf, NOTE_CHARS, SUMMARY_CHARS, verdictOf, type RunEnding } from './results.js';

export type { LambdaContextLike } from './invocation-callbacks.js';
export { MAX_STEP_SEQS, type DurableRetryDecision, type DurableRetryStrategy, type DurableStepContext, type DurableStepOptions } from './durable-step.js';

// --- The durable SDK's context, as the helper uses it --------------------------------------------------


/**
 * The part of the durable SDK's `DurableContext` the helper calls. The SDK's context is one, so a
 * handler is typed against this without the helper importing the SDK.
 */
export interface DurableContextLike {
  readonly executionContext: { readonly durableExecutionArn: string };
  readonly lambdaContext: LambdaContextLike;
  step<T>(name: string | undefined, fn: (context: { readonly attempt: number }) => Promise<T>, config?: { readonly retryStrategy?: DurableRetryStrategy }): PromiseLike<T>;
  waitForCallback<T = string>(name: string | undefined, submitter: (callbackId: string) => Promise<void>, config?: { readonly retryStrategy?: DurableRetryStrategy }): PromiseLike<T>;
}

// --- The execution's input -------------------------------------------------------------------------------

/** The execution's input is not a submission, or its context names no run; nothing was sent. */
export class DurableRunInputError extends InputFieldError {
  override readonly name = 'DurableRunInputError';
}

const InvocationSchema = /* @__PURE__ */ z.object({
  submission: z.record(z.string(), z.unknown()),
  runId: z.string().check(z.minLength(1, 'empty'), z.maxLength(MAX_RUN_ID_CHARS, `over the ledger's ${MAX_RUN_ID_CHARS} characters`)),
});

/**
 * Reads one invocation of a durable execution the ledger started: the §8 submission body (the Invoke's
 * payload, the execution's input) and the run id (the execution's ARN, from the SDK's context).
 * @throws DurableRunInputError naming the field at fault
 *
 * @example
 * readDurableInvocation(event, context) // { submission: { dispatchId: 'd-1', … }, runId: 'arn:aws:lambda:…/durable-execution/…' }
 */
export function readDurableInvocation(event: unknown, context: Pick<DurableContextLike, 'executionContext'>): { readonly submission: Submission; readonly runId: string } {
  const read = InvocationSchema.safeParse({ submission: event, runId: context.executionContext?.durableExecutionArn });
  if (!read.success) {
    const issue = read.error.issues[0];
    if (issue?.path[0] === 'runId') throw new DurableRunInputError(`the durable context names no run: its durableExecutionArn is ${issue.message}`, 'durableExecutionArn');
    throw new DurableRunInputError("the execution's input must be the ledger's submission body, a JSON object", 'submission');
  }
  const submission = parseSubmission(read.data.submission);
  if (!submission.ok) throw new DurableRunInputError(`the execution's input is not a Dispatch Ledger submission: ${submission.problem}`, `submission.${submission.problem.split(/[:\s]/, 1)[0] ?? ''}`);
  const traceparent = traceparentOf(read.data.submission['traceparent']);
  return { submission: { ...submission.value, ...(traceparent === undefined ? {} : { traceparent }) }, runId: read.data.runId };
}

// --- Approvals -----------------------------------------------------------------------------------------

/** The approval granted through the ledger (`POST /dispatches/{id}/approval` with `approve`). */
export interface ApprovalGranted {
  readonly approvalId: string;
  readonly decision: 'approve';
}

/**
 * The approval was cancelled through the ledger (it answered the callback with
 * `SendDurableExecutionCallbackFailure`). Let it escape and the run is reported `cancelled`.
 */
export class ApprovalCancelledError extends Error {
  override readonly name = 'ApprovalCancelledError';
  readonly runId: string;
  constructor(runId: string, why: string, options?: { cause?: unknown }) {
    super(`the approval run ${clipForMessage(runId)} waited for was cancelled: ${clip(why, NOTE_CHARS)}`, options);
    this.runId = runId;
  }
}

const GrantSchema = /* @__PURE__ */ z.object({ approvalId: z.string().check(z.minLength(1)), decision: z.literal('approve') });

/** The SDK's error for a callback its sender failed (`CallbackExternalError`), read by its `errorType` so the SDK need not be loaded. */
const failedBySender = (error: unknown): boolean => error instanceof Error && Reflect.get(error, 'errorType') === 'CallbackExternalError';

// --- The run -------------------------------------------------------------------------------------------

/** What the handler sees: the run's ids, the SDK's context for its own durable operations, and the kit's calls back to the ledger. */
export interface DurableRunContext<C extends DurableContextLike = DurableContextLike> extends RunIdentity, Pick<RunContext, 'putEvidence'> {
  /** The durable SDK's context: the run's own steps, waits and child contexts. */
  readonly durable: C;
  /** A durable step posting a heartbeat, unless another event was posted within a fifth of the stall window (`coalesced`: nothing posted). */
  heartbeat(): Promise<'sent' | 'coalesced'>;
  /** A durable step posting a `progress` event; the note is kept in the step's checkpoint (the event carries no text). */
  progress(note: string): Promise<void>;
  /**
   * The SDK's `step(name, fn)`, whose code sends heartbeats and progress while it runs: called in the
   * handler's body, it first reserves a block of seqs with one durable operation (`ledger-block#<seq>`),
   * then runs the step, giving `fn` a `step` whose `heartbeat()` and `progress()` post with the
   * block's seqs (no operation each) and whose `putEvidence` is the run's. A replay returns the step's
   * checkpointed result and posts nothing; a retry numbers its events from the block's start again.
   *
   * @example
   * const pages = await ctx.step('render', async (step) => {
   *   for (const page of book) { await render(page); step.heartbeat(); }
   *   await step.putEvidence('out/book.pdf', pdf);
   *   return book.length;
   * });
   */
  step<T>(name: string, fn: (step: DurableStepContext) => Promise<T>, options?: DurableStepOptions): Promise<T>;
  /**
   * Waits for a person's approval through the ledger (the SDK's `waitForCallback`): its submitter posts
   * `approval_requested` with the callback id; the execution suspends until the ledger answers it.
   * @throws ApprovalCancelledError when the approval was cancelled through the ledger
   */
  requestApproval(): Promise<ApprovalGranted>;
}

export type DurableRunHandler<C extends DurableContextLike = DurableContextLike> = (task: Readonly<Record<string, unknown>>, ctx: DurableRunContext<C>) => Promise<unknown> | unknown;

/** The helper's options: those of every worker (`CommonWorkerOptions`, read there) that a durable function has, and its name. */
export interface DurableRunOptions extends Pick<CommonWorkerOptions, 'signer' | 'stallHintSeconds' | 'log' | 'retry' | 'transport' | 'clock'> {
  /** Names the run's worker in its log lines. 1..64 of [A-Za-z0-9._-]. @default 'durable-run' */
  readonly name?: string;
}

/** A run event's durable step gives up after this many attempts (the ledger unreachable for each one's retry budget). */
export const EVENT_STEP_ATTEMPTS = 5;

/** Retries a step whose callback never got through; a refusal (4xx) stands. */
const retryUnlessRefused: DurableRetryStrategy = (error, attempt) =>
  (error instanceof CallbackError && error.kind === 'refused') || attempt >= EVENT_STEP_ATTEMPTS ? { shouldRetry: false } : { shouldRetry: true, delay: { seconds: Math.min(300, 15 * 2 ** (attempt - 1)) } };

/**
 * The handler of a durable function that runs the ledger's dispatches (CONTRACT §17), for the durable
 * SDK's `withDurableExecution`. Its input is the submission body; a malformed one, or a context naming
 * no run, is refused with a {@link DurableRunInputError} before anything is sent. `handler` gets the task
 * (a spilled one read from the ledger with `?runId=<execution ARN>`, at each invocation) and `ctx`. What it
 * returns (`{ summary?, body? }` or nothing) is reported `completed` and is the execution's output (as
 * `{ summary, body? }`, which the ledger's lookup reads as the same result if the event was lost); what
 * it throws is reported `failed` (an {@link ApprovalCancelledError}: `cancelled`) and fails the execution.
 *
 * @example
 * import { withDurableExecution } from '@aws/durable-execution-sdk-js';
 * import { sigv4Signer } from '@dispatch-ledger/worker';
 * import { durableRun } from '@dispatch-ledger/worker/durable';
 *
 * export const handler = withDurableExecution(
 *   durableRun(async (task, ctx) => {
 *     const report = await ctx.durable.step('write', async () => `# Report\n\n${String(task.goal)}\n`);
 *     await ctx.requestApproval();
 *     await ctx.durable.step('upload', () => ctx.putEvidence('out/report.md', report));
 *     return { summary: 'report written' };
 *   }, { signer: sigv4Signer({ region: process.env.AWS_REGION ?? 'us-east-1' }) }),
 * );
 */
export function durableRun<C extends DurableContextLike = DurableContextLike>(handler: DurableRunHandler<C>, options: DurableRunOptions = {}): (event: unknown, context: C) => Promise<RunResult> {
  const name = options.name ?? 'durable-run';
  checkWorkerOptions({ name, run: handler, stallHintSeconds: options.stallHintSeconds, retry: options.retry }, 'durableRun');
  const log = safeLog(name, options.log);
  const clock = options.clock ?? systemClock;

  return async (event, context) => {
    const { submission, runId } = readDurableInvocation(event, context);
    const stop = new AbortController();
    const callbacks = invocationCallbacks({ log, signer: options.signer, retry: options.retry, transport: options.transport }, context.lambdaContext, stop.signal);
    const run = new DurableRun({ submission, runId, durable: context, callbacks, log, clock, stallHintSeconds: options.stallHintSeconds });
    try {
      let ending: RunEnding;
      try {
        const task = submission.task ?? (await readTask(callbacks, { callbackUrl: submission.callbackUrl, dispatchId: submission.dispatchId, runId }));
        ending = { kind: 'returned', value: await handler(task, run.context()) };
      } catch (error) {
        ending = { kind: 'threw', error };
      }
      let verdict: Awaited<ReturnType<typeof run.finish>>;
      try {
        verdict = await run.finish(ending);
      } catch (unreported) {
        // The end could not be reported (its step gave up). The execution ends as the handler did all the
        // same — a success stays a success — and the ledger's lookup of the execution records it.
        log({ level: 'error', msg: 'final_event_not_sent', runId, error: messageOf(unreported) });
        if (ending.kind === 'threw') throw ending.error;
        verdict = run.verdictOf(ending);
      }
      if (ending.kind === 'threw') throw ending.error;
      // A value the ledger could not take was reported failed, said why: the execution fails with it too.
      if (verdict.status !== 'completed') throw new ResultRefusedError(verdict.result.summary);
      return verdict.result;
    } finally {
      stop.abort();
    }
  };
}

interface DurableRunDeps<C extends DurableContextLike> {
  readonly submission: Submission;
  readonly runId: string;
  readonly durable: C;
  readonly callbacks: CallbackClient;
  readonly log: Log;
  readonly clock: Clock;
  readonly stallHintSeconds: number | undefined;
}

/** What an event's durable step records: its seq, and when it was posted (null: a heartbeat coalesced). */
interface EventRecord {
  readonly seq: number;
  readonly postedAt: string | null;
  readonly note?: string;
}

/** One invocation of the run: the events it numbers, in the order the handler (and its replay) asks for them. */
class DurableRun<C extends DurableContextLike> {
  readonly #deps: DurableRunDeps<C>;
  readonly #heartbeatMs: number;
  readonly #pending = new PendingWork();
  /** Seqs taken so far by this invocation, replayed operations included, so the count is the checkpointed one. */
  #taken = 0;
  /** When an event was last posted (ms), from the checkpoints replayed and the events sent. */
  #lastPostedAt: number | undefined;
  #outbox: Promise<unknown> = Promise.resolve();
  #ended = false;
  /** What a step's events need of the run: they go through its outbox, in seq order with the handler's. */
  readonly #stepRun: StepRun;

  constructor(deps: DurableRunDeps<C>) {
    this.#deps = deps;
    this.#heartbeatMs = heartbeatIntervalMs(deps.submission.timeouts.stallAfterSeconds ?? deps.stallHintSeconds ?? DEFAULT_STALL_AFTER_SECONDS);
    this.#stepRun = {
      runId: deps.runId,
      heartbeatMs: this.#heartbeatMs,
      clock: deps.clock,
      log: deps.log,
      active: () => this.#active(),
      lastPostedAt: () => this.#lastPostedAt,
      send: (seq, type) => this.#send({ dispatchId: deps.submission.dispatchId, seq, type }),
      hold: (work) => this.#pending.hold(work),
      putEvidence: this.#putEvidence,
    };
  }

  context(): DurableRunContext<C> {
    const { submission, runId, durable } = this.#deps;
    return {
      ...runIdentityOf({ ...submission, runId }),
      durable,
      step: (name, fn, options) => this.#step(name, fn, options),
      heartbeat: async () => {
        this.#active();
        const due = (): boolean => this.#lastPostedAt === undefined || this.#deps.clock.now() - this.#lastPostedAt >= this.#heartbeatMs;
        return (await this.#event('heartbeat', {}, { due })).postedAt === null ? 'coalesced' : 'sent';
      },
      progress: async (note) => {
        this.#active();
        await this.#event('progress', {}, { note: clip(String(note), NOTE_CHARS) });
      },
      putEvidence: this.#putEvidence,
      requestApproval: async () => {
        this.#active();
        const seq = this.#nextSeq();
        let answer: string;
        try {
          // The submitter runs inside the SDK's own step: once posted and checkpointed, a replay skips it.
          answer = await durable.waitForCallback<string>(`ledger-approval#${seq}`, (callbackId) => this.#send({ dispatchId: submission.dispatchId, seq, type: 'approval_requested', callbackId }), { retryStrategy: retryUnlessRefused });
        } catch (error) {
          throw failedBySender(error) ? new ApprovalCancelledError(runId, messageOf(error), { cause: error }) : error;
        }
        return grantOf(answer, runId);
      },
    };
  }

  /**
   * Reports the run's end as its last event step, once what is under way has been sent: `completed`
   * with the value (a value the ledger cannot take, `failed` said why), `failed` with what was thrown,
   * `cancelled` when the approval was cancelled through the ledger.
   */
  async finish(ending: RunEnding): Promise<{ readonly status: FinalStatus; readonly result: RunResult }> {
    await this.#pending.drain();
    this.#ended = true;
    const verdict = this.verdictOf(ending);
    await this.#event(verdict.status, { result: verdict.result });
    return verdict;
  }

  /** What the run's end reports: its status and result, bounded. */
  verdictOf(ending: RunEnding): { readonly status: FinalStatus; readonly result: RunResult } {
    const bound = (text: string): string => clip(text, SUMMARY_CHARS);
    return ending.kind === 'threw' && ending.error instanceof ApprovalCancelledError ? { status: 'cancelled' as const, result: { summary: bound(ending.error.message) } } : verdictOf(false, ending, bound);
  }

  #active(): void {
    if (this.#ended) throw new RunEndedError(this.#deps.runId, 'ended');
  }

  /** Uploads one evidence file, anywhere (a step included); the run's end waits for it. */
  readonly #putEvidence: RunContext['putEvidence'] = async (ref, bytes, options = {}) => {
    this.#active();
    const { submission, runId, callbacks } = this.#deps;
    const contentType = evidenceContentType(ref, bytes, options);
    const upload = callbacks.putEvidence(submission.callbackUrl, submission.dispatchId, runId, ref, bytes, contentType);
    this.#pending.hold(upload);
    const outcome = await upload;
    if (outcome.kind !== 'delivered') throw callbackError(`uploading ${clipForMessage(ref)}`, outcome, runId);
  };

  /** The first of the next `count` seqs, taken when the handler asks (so their place is the handler's order, replayed alike). */
  #nextSeq(count = 1): number {
    const first = this.#taken + 1;
    this.#taken += count;
    return first;
  }

  /** `ctx.step`: one durable operation reserves the step's block, then the SDK's step runs `fn` with the block's seqs. */
  async #step<T>(name: string, fn: (step: DurableStepContext) => Promise<T>, options: DurableStepOptions = {}): Promise<T> {
    this.#active();
    const seqs = checkStepSeqs(options.seqs ?? defaultStepSeqs(this.#heartbeatMs));
    const first = this.#nextSeq(seqs);
    const block = await this.#deps.durable.step(`ledger-block#${first}`, async (): Promise<BlockRecord> => ({ seq: first, seqs }));
    if (block.seq !== first || block.seqs !== seqs) throw outOfOrder(first, `seqs ${block.seq}..${block.seq + block.seqs - 1}`);
    const retry = options.retryStrategy === undefined ? undefined : { retryStrategy: options.retryStrategy };
    return await this.#deps.durable.step(name, async ({ attempt }) => runInBlock(this.#stepRun, block, name, attempt, fn), retry);
  }

  /**
   * One run event as a durable step, made when asked (so its place is the handler's order, replayed
   * alike) and posted from inside the step: a replay gets the step's record back and posts nothing.
   */
  async #event(type: 'heartbeat' | 'progress' | FinalStatus, fields: Pick<RunEvent, 'result'>, how: { readonly due?: () => boolean; readonly note?: string } = {}): Promise<EventRecord> {
    const seq = this.#nextSeq();
    const note = how.note === undefined ? {} : { note: how.note };
    const recorded = await this.#deps.durable.step(
      `ledger-${type}#${seq}`,
      async (): Promise<EventRecord> => {
        if (how.due && !how.due()) return { seq, postedAt: null };
        await this.#send({ dispatchId: this.#deps.submission.dispatchId, seq, type, ...fields });
        return { seq, postedAt: new Date(this.#deps.clock.now()).toISOString(), ...note };
      },
      { retryStrategy: retryUnlessRefused },
    );
    if (recorded.seq !== seq) throw outOfOrder(seq, `seq ${recorded.seq}`);
    if (recorded.postedAt !== null) this.#lastPostedAt = Math.max(this.#lastPostedAt ?? 0, Date.parse(recorded.postedAt));
    return recorded;
  }

  /** Posts one event, after the ones before it: events reach the ledger in seq order. A refusal or an exhausted budget throws, for the step to retry or fail. */
  async #send(event: RunEvent): Promise<void> {
    const { submission, runId, callbacks } = this.#deps;
    const sent = this.#outbox.then(() => callbacks.postEvent(submission.callbackUrl, runId, event));
    this.#outbox = sent.catch(() => undefined);
    const outcome = await sent;
    if (outcome.kind !== 'delivered') throw callbackError(`posting ${event.type} (seq ${event.seq})`, outcome, runId);
    this.#lastPostedAt = this.#deps.clock.now();
  }
}

/** An operation's record names the seq it was made with: any other means the handler asked in another order than when it was recorded. */
function outOfOrder(seq: number, recorded: string): Error {
  return new Error(`the run's event step ${seq} replayed the record of ${recorded}: the handler must make its durable operations (and a step's seqs) the same at every invocation`);
}

/** The decision the ledger completed the callback with: `{ approvalId, decision: 'approve' }` (a cancel fails the callback instead). */
function grantOf(answer: unknown, runId: string): ApprovalGranted {
  let value: unknown = answer;
  try {
    if (typeof answer === 'string') value = JSON.parse(answer);
  } catch {
    // Left as the text: refused below.
  }
  const grant = GrantSchema.safeParse(value);
  if (grant.success) return grant.data;
  if (typeof value === 'object' && value !== null && Reflect.get(value, 'decision') === 'cancel') throw new ApprovalCancelledError(runId, 'the ledger answered cancel');
  throw new Error(`the approval's callback for run ${clipForMessage(runId)} completed with something other than the ledger's decision: ${clip(String(answer), 200)}`);
}
