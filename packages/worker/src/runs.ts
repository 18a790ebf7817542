import { createHash, randomUUID } from 'node:crypto';
import type { CallbackClient, CallbackOutcome } from './callbacks.js';
import { DEFAULT_STALL_AFTER_SECONDS, HeartbeatCoalescer, heartbeatIntervalMs, systemClock, type Clock, type HeartbeatDecision } from './heartbeat.js';
import {
  CallbackError,
  EvidenceTooLargeError,
  ResultRefusedError,
  RunEndedError,
  UnsafeRefError,
  canMove,
  clipForMessage,
  finalEventOf,
  isFinal,
  runIdFor,
  viewOf,
  type Decision,
  type FinalStatus,
  type Log,
  type RunEvent,
  type RunRecord,
  type RunResult,
  type RunStatus,
  type RunView,
  type Submission,
  WORKER_RESTARTED,
} from './model.js';
import { isPlainObject, parseDecision, parseSubmission, traceparentOf } from './parse.js';
import { MAX_RESULT_BODY_DEPTH, refProblem } from '@dispatch-ledger/protocol';
import { UNFINISHED, type RunStore } from './store.js';

/**
 * The kit's engine: takes submissions, runs the user's `run` for each, keeps every run's state in the
 * store and reports it to the ledger (CONTRACT §2, §8, §12). It knows nothing of HTTP: each operation
 * returns an outcome that `server.ts` maps to a status code.
 *
 * Order of things, per run: the record is created in the store before `POST /runs` is answered; each
 * event's seq is taken in memory and the record carrying the next seq is written before the event is
 * sent; events of one run go out one at a time, in seq order, while uploads go on their own (the final
 * event waits for them, and lists what arrived); the final status is written before the final event is
 * sent, so a lookup never lags behind what the ledger was told.
 */

/** CONTRACT §2: one evidence file is at most 4 MB. */
export const MAX_EVIDENCE_BYTES = 4 * 1024 * 1024;
/** CONTRACT §2 v2: a final event's `result.body` is any JSON of at most 256 KB. */
export const MAX_RESULT_BODY_BYTES = 256 * 1024;
/**
 * The deepest `result.body` the ledger takes (the protocol's MAX_RESULT_BODY_DEPTH: its API bodies nest
 * at most 1,000 levels, and a final event holds the body two levels down). Deeper is refused here, as a
 * failed run said why, not sent to be refused and lost.
 */
export { MAX_RESULT_BODY_DEPTH };

/** Whether a value nests deeper than `levels` (the value itself is level 1), found without recursion. */
function nestsDeeperThan(value: unknown, levels: number): boolean {
  const stack: Array<readonly [unknown, number]> = [[value, 1]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [node, depth] = next;
    if (typeof node !== 'object' || node === null) continue;
    if (depth > levels) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) stack.push([child, depth + 1]);
  }
  return false;
}
/** Summaries are previews: the ledger keeps a bounded one, and so does the store. */
const SUMMARY_CHARS = 2_000;
const NOTE_CHARS = 1_000;

/** What the run's code sees (CONTRACT §12). */
export interface RunContext {
  readonly dispatchId: string;
  readonly attempt: number;
  readonly runId: string;
  readonly origin: string;
  /** The refs the origin expects under the attempt's evidence root. */
  readonly expectedEvidence: readonly string[];
  /** The dispatch message's W3C trace context (CONTRACT §1 v2), to continue the origin's trace; undefined when it carried none (or a malformed one). */
  readonly traceparent?: string | undefined;
  /** Aborted when the ledger cancels the run (a cancel, a forced redispatch, a `cancel` decision) or the worker closes. */
  readonly signal: AbortSignal;
  /** A sign of life; at most one is sent per fifth of the stall window, the rest folded into one trailing heartbeat. Never blocks. */
  heartbeat(): HeartbeatDecision;
  /** Reports progress (a `progress` event); the note is kept for `GET /runs/{runId}` (the event carries no text). Resolves once sent or logged as undeliverable. */
  progress(note: string): Promise<void>;
  /**
   * Uploads one evidence file into the attempt's evidence root. Refuses an unsafe ref (CONTRACT §6) or
   * a file over 4 MB before sending anything; rejects with a {@link CallbackError} if the ledger refuses it
   * or cannot be reached in the retry budget.
   */
  putEvidence(ref: string, bytes: string | Uint8Array, options?: { readonly contentType?: string }): Promise<void>;
  /** Asks the origin for approval (`approval_requested`); resolves with its decision, or `'cancel'` if the run is cancelled meanwhile. */
  requestApproval(note?: string): Promise<Decision>;
}

/** What `run` may resolve with: a summary and a JSON body for the origin (both optional). */
export type RunOutput = { readonly summary?: string; readonly body?: unknown } | undefined | void;

export type RunFunction = (task: Readonly<Record<string, unknown>>, ctx: RunContext) => Promise<RunOutput>;

export interface Refused {
  readonly kind: 'refused';
  readonly httpStatus: 400 | 404 | 409 | 503;
  readonly code: string;
  readonly message: string;
}

export type SubmitOutcome = { readonly kind: 'created' | 'existing'; readonly run: { readonly runId: string; readonly status: RunStatus } } | Refused;
export type DecideOutcome = { readonly kind: 'decided'; readonly approvalId: string; readonly decision: Decision } | Refused;
export type CancelOutcome = { readonly kind: 'cancel_requested'; readonly run: { readonly runId: string; readonly status: RunStatus } } | Refused;

export interface EngineOptions {
  readonly run: RunFunction;
  readonly store: RunStore;
  readonly callbacks: CallbackClient;
  readonly log: Log;
  /** The stall window assumed when a submission names none. @default 600 */
  readonly stallHintSeconds?: number | undefined;
  /** @default the system clock */
  readonly clock?: Clock;
}

const refused = (httpStatus: Refused['httpStatus'], code: string, message: string): Refused => ({ kind: 'refused', httpStatus, code, message });

/** Why the signal of a cancelled run was aborted. */
export class RunCancelledError extends Error {
  override readonly name = 'RunCancelledError';
  readonly runId: string;
  constructor(runId: string, why: 'cancel' | 'approval_cancelled', options?: { cause?: unknown }) {
    super(why === 'cancel' ? `the ledger asked to cancel run ${runId}` : `the origin decided to cancel run ${runId}`, options);
    this.runId = runId;
  }
}

interface LiveRun {
  record: RunRecord;
  readonly submission: Submission;
  readonly abort: AbortController;
  readonly heartbeat: HeartbeatCoalescer;
  /** Events of one run go out one at a time, so the ledger sees seq in order. */
  outbox: Promise<unknown>;
  /** Uploads under way: each goes on its own (no seq to keep in order); the final event waits for them. */
  readonly uploads: Set<Promise<unknown>>;
  /** Store writes of one run, in order: the last write is always the latest state. */
  writes: Promise<unknown>;
  approval?: { readonly approvalId: string; readonly settle: (decision: Decision) => void; readonly fail: (error: Error) => void };
  /** The run's code has settled: ctx calls are refused from now on. */
  settled: boolean;
}

export class RunEngine {
  readonly #options: EngineOptions;
  readonly #log: Log;
  readonly #store: RunStore;
  readonly #callbacks: CallbackClient;
  readonly #clock: Clock;
  /** This process's name for itself in the records it writes. */
  readonly owner = `w-${randomUUID()}`;
  readonly #live = new Map<string, LiveRun>();
  /** Submissions being created: a concurrent duplicate waits for the first instead of creating again. */
  readonly #creating = new Map<string, Promise<SubmitOutcome>>();
  /** Every write, callback and restart report under way: close() waits until none is left. */
  readonly #pending = new Set<Promise<unknown>>();
  /** close() has begun: no new submission, no ctx call, no run finished by this process. */
  #closing = false;
  /** close() has drained: nothing is written any more. */
  #closed = false;

  constructor(options: EngineOptions) {
    this.#options = options;
    this.#log = options.log;
    this.#store = options.store;
    this.#callbacks = options.callbacks;
    this.#clock = options.clock ?? systemClock;
  }

  // --- The protocol -------------------------------------------------------------------------------------

  /**
   * `POST /runs`: the same Idempotency-Key always answers with the same run, in this process or after a
   * restart. `traceparent` is the request's header of that name (the ledger sends it there, not in the body).
   */
  async submit(idempotencyKey: string | undefined, body: unknown, traceparent?: string): Promise<SubmitOutcome> {
    if (this.#closing) return refused(503, 'worker_closing', 'the worker is closing; retry');
    if (idempotencyKey === undefined || idempotencyKey === '') {
      return refused(400, 'missing_idempotency_key', 'the Idempotency-Key header ({dispatchId}:{attempt}) is required');
    }
    const parsed = parseSubmission(body);
    if (!parsed.ok) return refused(400, 'invalid_submission', parsed.problem);
    const trace = traceparentOf(traceparent);
    const submission: Submission = trace === undefined ? parsed.value : { ...parsed.value, traceparent: trace };
    const expected = `${submission.dispatchId}:${submission.attempt}`;
    if (idempotencyKey !== expected) return refused(400, 'idempotency_key_mismatch', `Idempotency-Key must be ${expected}`);
    const runId = runIdFor(submission.dispatchId, submission.attempt, sha256);

    const live = this.#live.get(runId);
    if (live) return { kind: 'existing', run: { runId, status: live.record.status } };
    const creating = this.#creating.get(runId);
    if (creating) return existing(await creating);
    const created = this.#create(runId, idempotencyKey, submission);
    this.#creating.set(runId, created);
    try {
      return await created;
    } finally {
      this.#creating.delete(runId);
    }
  }

  async #create(runId: string, idempotencyKey: string, submission: Submission): Promise<SubmitOutcome> {
    const stored = await this.#store.get(runId);
    if (stored) return { kind: 'existing', run: { runId, status: stored.status } };
    const at = this.#now();
    const record: RunRecord = {
      v: 1,
      runId,
      idempotencyKey,
      dispatchId: submission.dispatchId,
      attempt: submission.attempt,
      origin: submission.origin,
      callbackUrl: submission.callbackUrl,
      expectedEvidence: submission.expectedEvidence,
      timeouts: submission.timeouts,
      owner: this.owner,
      createdAt: at,
      updatedAt: at,
      status: 'queued',
      nextSeq: 1,
      evidence: [],
    };
    // The store decides: of two processes creating this run, one wins and the other answers its run.
    const outcome = await this.#store.create(record);
    if (outcome.kind === 'exists') return { kind: 'existing', run: { runId, status: outcome.existing.status } };
    if (this.#closing) return { kind: 'created', run: { runId, status: record.status } };
    const live = this.#start(record, submission);
    this.#log({ level: 'info', msg: 'run_created', runId, dispatchId: record.dispatchId, attempt: record.attempt });
    return { kind: 'created', run: { runId, status: live.record.status } };
  }

  /** `GET /runs/{runId}`: from the store (or the live record, which is what is being written there). */
  async lookup(runId: string): Promise<RunView | undefined> {
    const live = this.#live.get(runId);
    if (live) return viewOf(live.record);
    const stored = await this.#store.get(runId);
    return stored ? viewOf(stored) : undefined;
  }

  /** `POST /runs/{runId}/approval`. Repeating the decision already taken answers it again. */
  async decide(runId: string, body: unknown): Promise<DecideOutcome> {
    const parsed = parseDecision(body);
    const live = this.#live.get(runId);
    const record = live?.record ?? (await this.#store.get(runId));
    if (!record) return refused(404, 'run_not_found', `no run ${clipForMessage(runId)}`);
    if (!parsed.ok) return refused(400, 'invalid_decision', parsed.problem);
    const { approvalId, decision } = parsed.value;
    if (record.decision?.approvalId === approvalId && record.decision.decision === decision) return { kind: 'decided', approvalId, decision };
    if (!live || record.pendingApproval?.approvalId !== approvalId || !live.approval || live.approval.approvalId !== approvalId) {
      return refused(409, 'approval_not_pending', `approval ${clipForMessage(approvalId)} is not pending on run ${clipForMessage(runId)}`);
    }
    const waiter = live.approval;
    delete live.approval;
    this.#log({ level: 'info', msg: 'approval_decided', runId, approvalId, decision });
    if (decision === 'approve') {
      this.#move(live, 'running');
      this.#persist(live, { pendingApproval: undefined, decision: { approvalId, decision } });
    } else {
      this.#persist(live, { pendingApproval: undefined, decision: { approvalId, decision }, cancelRequestedAt: this.#now() });
      live.abort.abort(new RunCancelledError(runId, 'approval_cancelled'));
    }
    waiter.settle(decision);
    return { kind: 'decided', approvalId, decision };
  }

  /**
   * `POST /runs/{runId}/cancel`: aborts the run's signal; the run becomes `cancelled` once its code has
   * returned (or thrown). A run that already ended keeps its final status.
   */
  async cancel(runId: string): Promise<CancelOutcome> {
    const live = this.#live.get(runId);
    if (!live) {
      const stored = await this.#store.get(runId);
      if (!stored) return refused(404, 'run_not_found', `no run ${clipForMessage(runId)}`);
      return { kind: 'cancel_requested', run: { runId, status: stored.status } };
    }
    if (!isFinal(live.record.status) && live.record.cancelRequestedAt === undefined) {
      this.#log({ level: 'info', msg: 'cancel_requested', runId });
      this.#persist(live, { cancelRequestedAt: this.#now() });
      live.abort.abort(new RunCancelledError(runId, 'cancel'));
    }
    return { kind: 'cancel_requested', run: { runId, status: live.record.status } };
  }

  // --- Restarts -----------------------------------------------------------------------------------------

  /**
   * Runs a previous process left unfinished are reported `failed`, `nativeStatus` and summary `worker_restarted` (their
   * code is gone with that process; nothing here can resume it), written to the store before this
   * resolves, so a lookup answers the truth at once; their final events, and any final event a previous
   * process never got through, are sent in the background.
   */
  async recover(): Promise<{ readonly restarted: readonly string[]; readonly resent: readonly string[] }> {
    const { records, unreadable } = await this.#store.list();
    for (const { where, reason } of unreadable) this.#log({ level: 'error', msg: 'store_record_unreadable', where, reason });
    const restarted: string[] = [];
    const resent: string[] = [];
    for (const record of records) {
      if (record.owner === this.owner || this.#live.has(record.runId)) continue;
      if (UNFINISHED.has(record.status)) {
        const seq = record.nextSeq;
        const ended: RunRecord = {
          ...withoutUndefined({ ...record, pendingApproval: undefined }),
          owner: this.owner,
          status: 'failed',
          nativeStatus: WORKER_RESTARTED,
          result: { summary: WORKER_RESTARTED },
          nextSeq: seq + 1,
          finalReport: { seq, state: 'pending' },
          updatedAt: this.#now(),
        };
        await this.#store.put(ended);
        this.#log({ level: 'warn', msg: 'run_orphaned_by_restart', runId: record.runId, dispatchId: record.dispatchId, was: record.status });
        restarted.push(record.runId);
        this.#reportInBackground(ended);
      } else if (record.finalReport?.state === 'pending') {
        resent.push(record.runId);
        this.#reportInBackground(record);
      }
    }
    return { restarted, resent };
  }

  #reportInBackground(record: RunRecord): void {
    const event = finalEventOf(record);
    if (!event) return;
    const work = this.#callbacks.postEvent(record.callbackUrl, record.runId, event).then(async (outcome) => {
      const state = reportState(outcome);
      if (state === 'pending') return;
      const latest = (await this.#store.get(record.runId)) ?? record;
      if (this.#closed || latest.finalReport?.seq !== event.seq) return;
      await this.#store.put({ ...latest, finalReport: { seq: event.seq, state }, updatedAt: this.#now() });
    });
    this.#hold(work.catch((error: unknown) => this.#log({ level: 'error', msg: 'restart_report_failed', runId: record.runId, error: messageOf(error) })));
  }

  // --- Closing --------------------------------------------------------------------------------------------

  /**
   * Stops the engine as a process exit would, but cleanly: every live run's signal is aborted, in-flight
   * callbacks end, and no store write happens after this resolves. Live runs stay as the store last had
   * them (unfinished), for the next process to report as `worker_restarted`.
   */
  async close(): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    for (const live of this.#live.values()) {
      live.heartbeat.stop();
      live.abort.abort(new RunEndedError(live.record.runId, 'worker_closed'));
      live.approval?.fail(new RunEndedError(live.record.runId, 'worker_closed'));
      delete live.approval;
    }
    // What is under way may queue a last write (an upload the ledger took): wait until nothing is left.
    while (this.#pending.size > 0 || this.#creating.size > 0) {
      await Promise.allSettled([...this.#pending, ...this.#creating.values()]);
    }
    this.#closed = true;
  }

  get closed(): boolean {
    return this.#closing;
  }

  // --- One run --------------------------------------------------------------------------------------------

  #start(record: RunRecord, submission: Submission): LiveRun {
    const stallAfterSeconds = submission.timeouts.stallAfterSeconds ?? this.#options.stallHintSeconds ?? DEFAULT_STALL_AFTER_SECONDS;
    const live: LiveRun = {
      record,
      submission,
      abort: new AbortController(),
      // A heartbeat is an event like any other (seq, store, outbox), but does not count as "other activity".
      heartbeat: new HeartbeatCoalescer(heartbeatIntervalMs(stallAfterSeconds), () => void this.#emit(live, { type: 'heartbeat' }, { activity: false }), this.#clock),
      outbox: Promise.resolve(),
      uploads: new Set(),
      writes: Promise.resolve(),
      settled: false,
    };
    this.#live.set(record.runId, live);
    // After the answer to POST /runs is on its way: the run's first callback needs the runId it carries.
    setImmediate(() => void this.#execute(live));
    return live;
  }

  async #execute(live: LiveRun): Promise<void> {
    let output: { readonly kind: 'returned'; readonly value: unknown } | { readonly kind: 'threw'; readonly error: unknown } | { readonly kind: 'skipped' };
    try {
      if (live.abort.signal.aborted) {
        output = { kind: 'skipped' };
      } else {
        this.#move(live, 'running');
        live.heartbeat.request();
        const task = await this.#taskOf(live);
        output = live.abort.signal.aborted ? { kind: 'skipped' } : { kind: 'returned', value: await this.#options.run(task, this.#context(live)) };
      }
    } catch (error) {
      output = { kind: 'threw', error };
    }
    live.settled = true;
    live.heartbeat.stop();
    if (this.#closing) {
      this.#log({ level: 'warn', msg: 'run_left_by_closed_worker', runId: live.record.runId, outcome: output.kind });
      return;
    }
    await this.#finish(live, output);
  }

  async #taskOf(live: LiveRun): Promise<Readonly<Record<string, unknown>>> {
    const { task, dispatchId, callbackUrl } = live.submission;
    if (task) return task;
    // CONTRACT §8 v2: a spilled task is read back from the ledger, for this run.
    const outcome = await this.#enqueue(live, () => this.#callbacks.getTask(callbackUrl, dispatchId, live.record.runId));
    if (outcome.kind !== 'delivered') throw callbackError('reading the spilled task', outcome);
    let value: unknown;
    try {
      value = JSON.parse(outcome.text);
    } catch {
      throw new Error('the spilled task is not JSON');
    }
    // The answer is the task itself (GET /dispatches/{id}/task), as the origin sent it.
    if (!isPlainObject(value)) throw new Error('the spilled task is not a JSON object');
    return value;
  }

  async #finish(
    live: LiveRun,
    output: { readonly kind: 'returned'; readonly value: unknown } | { readonly kind: 'threw'; readonly error: unknown } | { readonly kind: 'skipped' },
  ): Promise<void> {
    const { runId } = live.record;
    let status: FinalStatus;
    let result: RunResult;
    if (live.record.cancelRequestedAt !== undefined) {
      status = 'cancelled';
      result = { summary: 'cancelled on request' };
    } else if (output.kind === 'threw') {
      status = 'failed';
      result = { summary: clip(messageOf(output.error), SUMMARY_CHARS) };
    } else if (output.kind === 'skipped') {
      status = 'cancelled';
      result = { summary: 'cancelled before it started' };
    } else {
      const normalised = resultOf(output.value);
      status = normalised.ok ? 'completed' : 'failed';
      result = normalised.ok ? normalised.result : { summary: clip(normalised.error.message, SUMMARY_CHARS) };
    }
    // An upload the run did not wait for still belongs to it: the final event lists what arrived.
    await Promise.allSettled([...live.uploads]);
    if (this.#closing) return;
    if (!this.#move(live, status)) return;
    const seq = live.record.nextSeq;
    const persisted = this.#persist(live, { result, pendingApproval: undefined, nextSeq: seq + 1, finalReport: { seq, state: 'pending' } });
    const event = finalEventOf(live.record);
    this.#log({ level: status === 'completed' ? 'info' : 'warn', msg: `run_${status}`, runId, dispatchId: live.record.dispatchId, summary: result.summary });
    if (event) {
      const outcome = await this.#enqueue(live, async () => {
        await persisted;
        return this.#callbacks.postEvent(live.record.callbackUrl, runId, event);
      });
      const state = reportState(outcome);
      // Pending (the ledger never took it in the budget): the lookup still answers the final status, and
      // the next process sends it again.
      if (state !== 'pending') this.#persist(live, { finalReport: { seq, state } });
    }
    await live.writes;
    this.#live.delete(runId);
  }

  #context(live: LiveRun): RunContext {
    const { record } = live;
    const active = (): void => {
      if (this.#closing) throw new RunEndedError(record.runId, 'worker_closed');
      if (live.settled || isFinal(live.record.status)) throw new RunEndedError(record.runId, 'ended');
    };
    return {
      dispatchId: record.dispatchId,
      attempt: record.attempt,
      runId: record.runId,
      origin: record.origin,
      expectedEvidence: record.expectedEvidence,
      traceparent: live.submission.traceparent,
      signal: live.abort.signal,
      heartbeat: () => {
        if (this.#closing || live.settled) return 'stopped';
        return live.heartbeat.request();
      },
      progress: async (note) => {
        active();
        this.#persist(live, { note: clip(String(note), NOTE_CHARS) });
        await this.#emit(live, { type: 'progress' });
      },
      putEvidence: async (ref, bytes, options = {}) => {
        active();
        const problem = refProblem(ref);
        if (problem) throw new UnsafeRefError(ref, problem);
        if (typeof bytes !== 'string' && !(bytes instanceof Uint8Array)) throw new TypeError('evidence bytes must be a string or a Uint8Array');
        const size = typeof bytes === 'string' ? Buffer.byteLength(bytes, 'utf8') : bytes.byteLength;
        if (size > MAX_EVIDENCE_BYTES) throw new EvidenceTooLargeError(ref, size, MAX_EVIDENCE_BYTES);
        const contentType = options.contentType ?? (typeof bytes === 'string' ? 'text/plain; charset=utf-8' : 'application/octet-stream');
        const upload = this.#callbacks.putEvidence(record.callbackUrl, record.dispatchId, record.runId, ref, bytes, contentType);
        live.uploads.add(upload);
        this.#hold(upload);
        const outcome = await upload.finally(() => live.uploads.delete(upload));
        if (outcome.kind !== 'delivered') throw callbackError(`uploading ${clipForMessage(ref)}`, outcome, record.runId);
        if (!live.record.evidence.includes(ref)) this.#persist(live, { evidence: [...live.record.evidence, ref] });
      },
      requestApproval: async (note) => {
        active();
        if (live.abort.signal.aborted) return 'cancel';
        if (live.approval) throw new Error(`run ${record.runId} already waits for approval ${live.approval.approvalId}`);
        const approvalId = `a-${randomUUID()}`;
        const decided = new Promise<Decision>((resolve, reject) => {
          const onAbort = (): void => {
            if (live.approval?.approvalId !== approvalId) return;
            delete live.approval;
            resolve('cancel');
          };
          live.abort.signal.addEventListener('abort', onAbort, { once: true });
          live.approval = {
            approvalId,
            settle: (decision) => {
              live.abort.signal.removeEventListener('abort', onAbort);
              resolve(decision);
            },
            fail: (error) => {
              live.abort.signal.removeEventListener('abort', onAbort);
              reject(error);
            },
          };
        });
        if (!this.#move(live, 'waiting_for_approval')) throw new RunEndedError(record.runId, 'ended');
        const pendingApproval = { approvalId, requestedAt: this.#now(), ...(note === undefined ? {} : { note: clip(String(note), NOTE_CHARS) }) };
        this.#persist(live, { pendingApproval });
        // The decision may come before the event is through (the ledger adopts an approval from a lookup too).
        void this.#emit(live, { type: 'approval_requested', approvalId });
        return decided;
      },
    };
  }

  // --- Plumbing -------------------------------------------------------------------------------------------

  /** Takes the next seq, writes the record that carries the seq after it, then sends the event. */
  #emit(live: LiveRun, fields: Omit<RunEvent, 'dispatchId' | 'seq'>, options: { readonly activity: boolean } = { activity: true }): Promise<CallbackOutcome> {
    const seq = live.record.nextSeq;
    const persisted = this.#persist(live, { nextSeq: seq + 1 });
    if (options.activity) live.heartbeat.activity();
    const event: RunEvent = { dispatchId: live.record.dispatchId, seq, ...fields };
    return this.#enqueue(live, async () => {
      await persisted;
      return this.#callbacks.postEvent(live.record.callbackUrl, live.record.runId, event);
    });
  }

  #enqueue(live: LiveRun, send: () => Promise<CallbackOutcome>): Promise<CallbackOutcome> {
    const sent = live.outbox.then(send).catch((error: unknown): CallbackOutcome => {
      this.#log({ level: 'error', msg: 'callback_crashed', runId: live.record.runId, error: messageOf(error) });
      return { kind: 'gave_up', last: messageOf(error), tries: 0 };
    });
    live.outbox = sent;
    this.#hold(sent);
    return sent;
  }

  /**
   * Changes the in-memory record at once and queues a write of the whole record; writes of one run go
   * in order and each writes the latest state, so the store never steps back. Nothing is written once
   * the engine is closed. A failed write is logged: the run carries on, the ledger still hears of it.
   */
  #persist(live: LiveRun, patch: Partial<Omit<RunRecord, 'v' | 'runId'>>): Promise<unknown> {
    live.record = withoutUndefined({ ...live.record, ...patch, updatedAt: this.#now() });
    const written = live.writes.then(async () => {
      if (this.#closed) return;
      try {
        await this.#store.put(live.record);
      } catch (error) {
        this.#log({ level: 'error', msg: 'store_write_failed', runId: live.record.runId, error: messageOf(error) });
      }
    });
    live.writes = written;
    this.#hold(written);
    return written;
  }

  #move(live: LiveRun, to: RunStatus): boolean {
    if (live.record.status === to) return true;
    if (!canMove(live.record.status, to)) return false;
    this.#persist(live, { status: to });
    return true;
  }

  /** Keeps `work` (which never rejects) in view until it settles, for close() to wait on. */
  #hold(work: Promise<unknown>): void {
    this.#pending.add(work);
    void work.finally(() => this.#pending.delete(work));
  }

  #now(): string {
    return new Date(this.#clock.now()).toISOString();
  }
}

function existing(outcome: SubmitOutcome): SubmitOutcome {
  return outcome.kind === 'created' ? { ...outcome, kind: 'existing' } : outcome;
}

function reportState(outcome: CallbackOutcome): 'pending' | 'delivered' | 'refused' {
  if (outcome.kind === 'delivered') return 'delivered';
  if (outcome.kind === 'refused') return 'refused';
  return 'pending';
}

function callbackError(what: string, outcome: Exclude<CallbackOutcome, { kind: 'delivered' }>, runId?: string): Error {
  switch (outcome.kind) {
    case 'refused':
      return new CallbackError(`${what}: the ledger refused it (HTTP ${outcome.status}${outcome.code ? ` ${clipForMessage(outcome.code)}` : ''})`, {
        kind: 'refused',
        status: outcome.status,
        ...(outcome.code === undefined ? {} : { code: outcome.code }),
      });
    case 'gave_up':
      return new CallbackError(`${what}: no answer from the ledger in the retry budget (last: ${outcome.last})`, { kind: 'gave_up' });
    case 'stopped':
      return runId === undefined ? new CallbackError(`${what}: the worker closed`, { kind: 'stopped' }) : new RunEndedError(runId, 'worker_closed');
  }
}

/** What the run resolved with, as a result the ledger takes; anything else is a failed run, said why. */
export function resultOf(value: unknown): { readonly ok: true; readonly result: RunResult } | { readonly ok: false; readonly error: ResultRefusedError } {
  const no = (message: string) => ({ ok: false, error: new ResultRefusedError(message) }) as const;
  if (value === undefined || value === null) return { ok: true, result: { summary: 'completed' } };
  if (!isPlainObject(value)) return no('run must resolve with { summary?, body? } or nothing');
  const { summary, body } = value;
  if (summary !== undefined && typeof summary !== 'string') return no('result.summary must be a string');
  const text = clip(summary ?? 'completed', SUMMARY_CHARS);
  if (body === undefined) return { ok: true, result: { summary: text } };
  if (nestsDeeperThan(body, MAX_RESULT_BODY_DEPTH)) return no(`result_too_deep: result.body nests deeper than ${MAX_RESULT_BODY_DEPTH} levels, the most the ledger takes`);
  let json: string | undefined;
  try {
    json = JSON.stringify(body);
  } catch (error) {
    return no(`result.body is not JSON: ${messageOf(error)}`);
  }
  if (json === undefined) return no('result.body is not JSON');
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > MAX_RESULT_BODY_BYTES) return no(`result_too_large: result.body is ${bytes} bytes; the ledger takes at most ${MAX_RESULT_BODY_BYTES}`);
  // Stored and sent as the JSON it will be read back as (no class instances, no undefined members).
  return { ok: true, result: { summary: text, body: JSON.parse(json) as unknown } };
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

function clip(text: string, chars: number): string {
  if (text.length <= chars) return text;
  let cut = text.slice(0, chars - 1);
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1);
  return `${cut}…`;
}

/** Drops members set to undefined, so a record's JSON and its object agree (`pendingApproval` cleared is absent). */
function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, member]) => member !== undefined)) as T;
}
