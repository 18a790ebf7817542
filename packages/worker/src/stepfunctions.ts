/**
 * @dispatch-ledger/worker/stepfunctions — the kit inside a state machine's Lambda task (CONTRACT §17:
 * "the kit's `putEvidence` works inside a state machine's Lambda task, given the event shape Step
 * Functions passes"). The ledger starts a `stepfunctions` target's execution with the §8 submission body
 * as its input; its run id is the execution ARN. A Task state hands both to the function:
 *
 * ```json
 * "Parameters": { "submission.$": "$$.Execution.Input", "executionArn.$": "$$.Execution.Id" }
 * ```
 *
 * `stepFunctionsTask(handler)` reads that event, gives `handler` the task and a `ctx` that uploads
 * evidence and posts heartbeats and progress as the run `executionArn`, and returns what `handler`
 * returns as the Task's output. It never posts `completed` or `failed`: the state machine decides the
 * run's end, and the ledger reads it from Step Functions (§17).
 */
import { setTimeout as pause } from 'node:timers/promises';
import { MAX_RUN_ID_CHARS } from '@dispatch-ledger/protocol';
import * as z from 'zod/mini';
import type { CallbackClient, CallbackOutcome } from './callbacks.js';
import { DEFAULT_STALL_AFTER_SECONDS, HeartbeatCoalescer, heartbeatIntervalMs, systemClock, type Clock } from './heartbeat.js';
import { invocationCallbacks, readTask } from './invocation-callbacks.js';
import { RETENTION_SECONDS } from './lambda.js';
import type { LambdaContextLike } from './invocation-callbacks.js';
import { compact, dynamoRunStore, type LambdaRunItem, type LambdaRunStore } from './lambda-store.js';
import { clipForMessage, InputFieldError, RunEndedError, submittedFields, type Log, type Submission } from './model.js';
import { checkWorkerOptions, safeLog, type CommonWorkerOptions } from './options.js';
import { parseSubmission, traceparentOf } from './parse.js';
import { runIdentityOf, type RunIdentity, type RunContext } from './run-api.js';
import { callbackError, clip, evidenceContentType, messageOf, NOTE_CHARS } from './results.js';
import { PendingWork } from './pending-work.js';

export { dynamoRunStore, memoryLambdaStore, type DynamoRunStoreOptions, type LambdaRunStore } from './lambda-store.js';
export type { LambdaContextLike } from './invocation-callbacks.js';

// --- The event ---------------------------------------------------------------------------------------

/** Step Functions takes at most 256 KB as an execution's input: a larger submission is not one it passed. */
export const MAX_SUBMISSION_BYTES = 256 * 1024;
/** A Standard execution's ARN, `$$.Execution.Id`. A literal `"$$.Execution.Id"` (the key lacking `.$`) is not one. */
const EXECUTION_ARN = /^arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:execution:[^:\s]+:[^:\s]+$/;

/** How each field is mapped in the Task's `Parameters`: said in the error when it is missing. */
const MAPPING = {
  submission: '"submission.$": "$$.Execution.Input"',
  executionArn: '"executionArn.$": "$$.Execution.Id"',
} as const;
type EventField = keyof typeof MAPPING;

const fitsInput = (value: unknown): boolean => Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8') <= MAX_SUBMISSION_BYTES;

const TaskEventSchema = /* @__PURE__ */ z.object({
  submission: z.record(z.string(), z.unknown()).check(z.refine(fitsInput, `at most ${MAX_SUBMISSION_BYTES} bytes of JSON (Step Functions' input limit)`)),
  executionArn: z.string().check(z.maxLength(MAX_RUN_ID_CHARS, `at most ${MAX_RUN_ID_CHARS} characters`), z.regex(EXECUTION_ARN, 'not an execution ARN (a Parameters key mapping a path must end in ".$")')),
});

/** The event a Task state passes with the documented `Parameters`, once read. */
export interface StepFunctionsTaskEvent {
  readonly submission: Submission;
  readonly executionArn: string;
}

/** The Task's event is not `{ submission, executionArn }` as documented; nothing was sent. Step Functions sees it as this error's name. */
export class StepFunctionsTaskEventError extends InputFieldError {
  override readonly name = 'StepFunctionsTaskEventError';
}

/**
 * Reads the event a Task state passes. Both fields are required: a task whose input is the bare
 * submission has no execution ARN to report under, so it is refused naming what to map.
 * @throws StepFunctionsTaskEventError naming the missing or malformed field
 *
 * @example
 * parseStepFunctionsTaskEvent({ submission: JSON.parse(input), executionArn: 'arn:aws:states:eu-west-1:123456789012:execution:flow:d-1-1' })
 */
export function parseStepFunctionsTaskEvent(event: unknown): StepFunctionsTaskEvent {
  const read = TaskEventSchema.safeParse(event);
  if (!read.success) {
    const issue = read.error.issues[0];
    const field = issue?.path[0];
    if (field !== 'submission' && field !== 'executionArn') throw new StepFunctionsTaskEventError('the Task event must be a JSON object { submission, executionArn }', undefined);
    const given: unknown = typeof event === 'object' && event !== null ? Reflect.get(event, field) : undefined;
    if (given === undefined) throw new StepFunctionsTaskEventError(missing(field, event), field);
    throw new StepFunctionsTaskEventError(`the Task event's ${field} is malformed: ${field === 'submission' && issue?.code !== 'custom' ? 'not a JSON object' : (issue?.message ?? 'invalid')}`, field);
  }
  const submission = parseSubmission(read.data.submission);
  if (!submission.ok) throw new StepFunctionsTaskEventError(`the Task event's submission is not a Dispatch Ledger submission: ${submission.problem}`, `submission.${submission.problem.split(/[:\s]/, 1)[0] ?? ''}`);
  const traceparent = traceparentOf(read.data.submission['traceparent']);
  return { submission: { ...submission.value, ...(traceparent === undefined ? {} : { traceparent }) }, executionArn: read.data.executionArn };
}

function missing(field: EventField, event: unknown): string {
  const bare = field === 'submission' && typeof event === 'object' && event !== null && 'dispatchId' in event ? ' (the event looks like the bare submission)' : '';
  return `the Task event has no ${field}${bare}: map it in the Task's Parameters with ${MAPPING[field]}`;
}

// --- seq ----------------------------------------------------------------------------------------------

/** Conditional writes lost in a row to other tasks of the same execution before a seq is given up. */
const SEQ_TRIES = 10;

/**
 * The run's seq counter: the `seq` of the run's item in a {@link LambdaRunStore} (the Lambda kit's
 * persistence, keyed by runId — here the execution ARN). Each seq is taken by a write conditional on
 * the item's revision, before the event that carries it is sent; a write that lost to another task of
 * the same execution (a Parallel or Map branch, a retry still running) reads the item again and tries
 * the next number. So every task, every retry and every branch of one execution draws from one counter,
 * and no seq is ever taken twice. Branches posting at once may reach the ledger out of order: the
 * lower seq is then acknowledged as stale, which costs a heartbeat, never a reused number.
 */
class SeqCounter {
  #known: LambdaRunItem | undefined;
  readonly #store: LambdaRunStore;
  readonly #runId: string;
  /** The item the run's first event creates. */
  readonly #first: () => LambdaRunItem;
  readonly #nowIso: () => string;

  constructor(store: LambdaRunStore, runId: string, first: () => LambdaRunItem, nowIso: () => string) {
    this.#store = store;
    this.#runId = runId;
    this.#first = first;
    this.#nowIso = nowIso;
  }

  async next(note: string | undefined): Promise<number> {
    const patch = note === undefined ? {} : { note };
    for (let tries = 1; ; tries += 1) {
      const current = this.#known ?? (await this.#store.get(this.#runId));
      if (current === undefined) {
        const item = compact({ ...this.#first(), ...patch, seq: 1, rev: 1 });
        const created = await this.#store.create(item);
        this.#known = created.kind === 'created' ? item : created.existing;
        if (created.kind === 'created') return item.seq;
        continue;
      }
      const item: LambdaRunItem = compact({ ...current, ...patch, seq: current.seq + 1, rev: current.rev + 1, updatedAt: this.#nowIso() });
      if (await this.#store.replace(item)) {
        this.#known = item;
        return item.seq;
      }
      this.#known = undefined;
      if (tries >= SEQ_TRIES) throw new Error(`no seq taken for run ${clipForMessage(item.runId)}: ${SEQ_TRIES} writes in a row lost to other tasks of the execution`);
      await pause(Math.floor(Math.random() * 20 * tries));
    }
  }
}

// --- The task -----------------------------------------------------------------------------------------

/** What the task's code sees: the run's ids and the kit's calls back to the ledger, as the execution's run. */
export type StepFunctionsTaskContext = RunIdentity & Pick<RunContext, 'heartbeat' | 'progress' | 'putEvidence'>;

export type StepFunctionsTaskHandler<T> = (task: Readonly<Record<string, unknown>>, ctx: StepFunctionsTaskContext) => Promise<T> | T;

/** The task's options: those of every worker (`CommonWorkerOptions`, read there) that a Task state's function has, its name and its seq store. */
export interface StepFunctionsTaskOptions extends Pick<CommonWorkerOptions, 'signer' | 'stallHintSeconds' | 'log' | 'retry' | 'transport' | 'clock'> {
  /** Names the task in its log lines. 1..64 of [A-Za-z0-9._-]. @default 'stepfunctions-task' */
  readonly name?: string;
  /** Where the run's seq counter lives. @default dynamoRunStore({ tableName: process.env.KIT_RUN_TABLE }), read at the first invocation; without either, `heartbeat` and `progress` throw */
  readonly store?: LambdaRunStore;
}

/**
 * A Lambda handler for a state machine's Task state (CONTRACT §17). The event is `{ submission,
 * executionArn }` (see the module's `Parameters`); a malformed one is refused with a
 * {@link StepFunctionsTaskEventError} before anything is sent. `handler` gets the task (read from the
 * ledger with `?runId=<executionArn>` when the submission carries a `taskRef`) and `ctx`; what it returns
 * is the Task's output, what it throws fails the Task (the state machine's Retry and Catch decide).
 * Uploads and events still under way are awaited before the handler returns.
 *
 * @example
 * import { stepFunctionsTask } from '@dispatch-ledger/worker/stepfunctions';
 *
 * export const handler = stepFunctionsTask(async (task, ctx) => {
 *   ctx.heartbeat();
 *   await ctx.putEvidence('out/report.md', `# Report\n\n${String(task.goal)}\n`);
 *   return { written: 'out/report.md' };
 * });
 */
export function stepFunctionsTask<T>(handler: StepFunctionsTaskHandler<T>, options: StepFunctionsTaskOptions = {}): (event: unknown, context: LambdaContextLike) => Promise<T> {
  if (typeof handler !== 'function') throw new TypeError('stepFunctionsTask needs a handler function');
  const name = options.name ?? 'stepfunctions-task';
  checkWorkerOptions({ name, run: handler, stallHintSeconds: options.stallHintSeconds, retry: options.retry }, 'stepFunctionsTask');
  const log = safeLog(name, options.log);
  const clock = options.clock ?? systemClock;
  let store: LambdaRunStore | undefined | null = options.store;

  return async (event, context) => {
    const { submission, executionArn } = parseStepFunctionsTaskEvent(event);
    // Read once: an execution that only uploads evidence needs no table.
    if (store === undefined) store = process.env.KIT_RUN_TABLE ? dynamoRunStore({ tableName: process.env.KIT_RUN_TABLE }) : null;
    const stop = new AbortController();
    const callbacks = invocationCallbacks({ log, signer: options.signer, retry: options.retry, transport: options.transport }, context, stop.signal);
    const run = new TaskRun({ submission, runId: executionArn, callbacks, log, clock, store, context, stallHintSeconds: options.stallHintSeconds });
    try {
      const task = submission.task ?? (await readTask(callbacks, { callbackUrl: submission.callbackUrl, dispatchId: submission.dispatchId, runId: executionArn }));
      return await handler(task, run.context());
    } finally {
      run.settle();
      // Lambda freezes the process once the handler returns: what is under way is sent first.
      await run.drain();
      stop.abort();
    }
  };
}

interface TaskRunDeps {
  readonly submission: Submission;
  readonly runId: string;
  readonly callbacks: CallbackClient;
  readonly log: Log;
  readonly clock: Clock;
  readonly store: LambdaRunStore | null;
  readonly context: LambdaContextLike;
  readonly stallHintSeconds: number | undefined;
}

/** One invocation of the task: its ctx, its events in seq order, and what is under way. */
class TaskRun {
  readonly #deps: TaskRunDeps;
  readonly #seq: SeqCounter | undefined;
  readonly #heartbeat: HeartbeatCoalescer;
  readonly #pending = new PendingWork();
  #outbox: Promise<unknown> = Promise.resolve();
  #settled = false;

  constructor(deps: TaskRunDeps) {
    this.#deps = deps;
    const { submission, runId, clock, context } = deps;
    const nowIso = (): string => new Date(clock.now()).toISOString();
    this.#seq = deps.store === null ? undefined : new SeqCounter(deps.store, runId, () => firstItem(submission, runId, context, clock), nowIso);
    const stall = submission.timeouts.stallAfterSeconds ?? deps.stallHintSeconds ?? DEFAULT_STALL_AFTER_SECONDS;
    this.#heartbeat = new HeartbeatCoalescer(heartbeatIntervalMs(stall), () => this.#emit('heartbeat', undefined).catch(() => undefined), clock);
  }

  context(): StepFunctionsTaskContext {
    const { submission, runId, callbacks } = this.#deps;
    const active = (): void => {
      if (this.#settled) throw new RunEndedError(runId, 'ended');
    };
    return {
      ...runIdentityOf({ ...submission, runId }),
      heartbeat: () => {
        if (this.#settled) return 'stopped';
        this.#counter('heartbeat');
        return this.#heartbeat.request();
      },
      progress: async (note) => {
        active();
        this.#counter('progress');
        await this.#emit('progress', clip(String(note), NOTE_CHARS));
      },
      putEvidence: async (ref, bytes, options = {}) => {
        active();
        const contentType = evidenceContentType(ref, bytes, options);
        const upload = callbacks.putEvidence(submission.callbackUrl, submission.dispatchId, runId, ref, bytes, contentType);
        this.#hold(upload);
        const outcome = await upload;
        if (outcome.kind !== 'delivered') throw callbackError(`uploading ${clipForMessage(ref)}`, outcome, runId);
      },
    };
  }

  /** A run event needs its seq counter: without a store, say how to give it one. */
  #counter(call: 'heartbeat' | 'progress'): SeqCounter {
    if (this.#seq) return this.#seq;
    throw new TypeError(`ctx.${call}() numbers its events in a run-state table: set KIT_RUN_TABLE (a DynamoDB table keyed by runId) or pass stepFunctionsTask(handler, { store })`);
  }

  /**
   * Takes the next seq, then sends the event; one at a time, so this invocation's events reach the
   * ledger in seq order. Rejects when no seq could be taken (nothing is sent then); an event the ledger
   * never took is logged by the callback client.
   */
  #emit(type: 'heartbeat' | 'progress', note: string | undefined): Promise<CallbackOutcome> {
    const { submission, runId, callbacks, log } = this.#deps;
    if (type !== 'heartbeat') this.#heartbeat.activity();
    const sent = this.#outbox.then(async () => {
      const seq = await this.#counter(type).next(note);
      return callbacks.postEvent(submission.callbackUrl, runId, { dispatchId: submission.dispatchId, seq, type });
    });
    this.#outbox = sent.catch((error: unknown) => log({ level: 'error', msg: 'seq_not_taken', runId, type, error: messageOf(error) }));
    this.#hold(sent);
    return sent;
  }

  #hold(work: Promise<unknown>): void {
    this.#pending.hold(work);
  }

  /** The handler has settled: ctx calls are refused, no trailing heartbeat is left behind. */
  settle(): void {
    this.#settled = true;
    this.#heartbeat.stop();
  }

  async drain(): Promise<void> {
    await this.#pending.drain();
  }
}

/** The run's item as the first event of the execution writes it: the Lambda kit's layout, never final (the state machine ends the run). */
function firstItem(submission: Submission, runId: string, context: LambdaContextLike, clock: Clock): LambdaRunItem {
  const at = new Date(clock.now()).toISOString();
  return {
    runId,
    status: 'running',
    seq: 0,
    updatedAt: at,
    kit: 1,
    rev: 0,
    ...submittedFields(submission),
    createdAt: at,
    invocation: context.awsRequestId,
    leaseUntil: new Date(clock.now() + context.getRemainingTimeInMillis()).toISOString(),
    evidence: [],
    approvals: [],
    expiresAt: Math.floor(clock.now() / 1000) + RETENTION_SECONDS,
  };
}
