import { randomUUID } from 'node:crypto';
import type { CallbackClient, CallbackOutcome } from './callbacks.js';
import { DEFAULT_STALL_AFTER_SECONDS, HeartbeatCoalescer, heartbeatIntervalMs, systemClock, type Clock } from './heartbeat.js';
import {
  RunEndedError,
  canMove,
  clipForMessage,
  finalEventOf,
  isFinal,
  runIdFor,
  submittedFields,
  viewOf,
  type Log,
  type RunEvent,
  type RunRecord,
  type RunStatus,
  type RunView,
  type Submission,
  WORKER_RESTARTED,
} from './model.js';
import { parseDecision, parseSubmission, spilledTaskOf, traceparentOf } from './parse.js';
import { UNFINISHED, type RunStore } from './store.js';
import { runContext, type LiveRun } from './run-context.js';
import { refused, RunCancelledError, type CancelOutcome, type DecideOutcome, type EngineOptions, type RunContext, type SubmitOutcome } from './run-api.js';
import { SUMMARY_CHARS, verdictOf, type RunEnding, callbackError, clip, messageOf, reportState, sha256, withoutUndefined } from './results.js';

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
      ...submittedFields(submission),
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
      // Running its code's last steps, not waiting (as when a cancel comes while it waits: run-context.ts).
      this.#move(live, 'running');
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
      heartbeat: new HeartbeatCoalescer(heartbeatIntervalMs(stallAfterSeconds), () => this.#emit(live, { type: 'heartbeat' }, { activity: false }), this.#clock),
      outbox: Promise.resolve(),
      uploads: new Set(),
      writes: Promise.resolve(),
      // The record came from the store (created, or recovered): its seq is stored.
      storedNextSeq: record.nextSeq,
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
    return spilledTaskOf(outcome.text);
  }

  async #finish(
    live: LiveRun,
    output: RunEnding,
  ): Promise<void> {
    const { runId } = live.record;
    const { status, result } = verdictOf(live.record.cancelRequestedAt !== undefined, output, (text) => clip(text, SUMMARY_CHARS));
    // An upload the run did not wait for still belongs to it: the final event lists what arrived.
    await Promise.allSettled([...live.uploads]);
    if (this.#closing) return;
    if (!this.#move(live, status)) return;
    const seq = live.record.nextSeq;
    const persisted = this.#persist(live, { result, pendingApproval: undefined, nextSeq: seq + 1, finalReport: { seq, state: 'pending' } });
    const event = finalEventOf(live.record);
    this.#log({ level: status === 'completed' ? 'info' : 'warn', msg: `run_${status}`, runId, dispatchId: live.record.dispatchId, summary: result.summary });
    if (event) {
      // Sent even when its write failed: a restart then reports worker_restarted under this seq, which the
      // ledger, holding this final event already, drops — a seq used first by a final event is safe to reuse.
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
    return runContext(live, {
      callbacks: this.#callbacks,
      closing: () => this.#closing,
      persist: (patch) => this.#persist(live, patch),
      emit: (fields) => this.#emit(live, fields),
      move: (to) => this.#move(live, to),
      hold: (work) => this.#hold(work),
      now: () => this.#now(),
    });
  }

  // --- Plumbing -------------------------------------------------------------------------------------------

  /** Takes the next seq, writes the record that carries the seq after it, then sends the event. */
  #emit(live: LiveRun, fields: Omit<RunEvent, 'dispatchId' | 'seq'>, options: { readonly activity: boolean } = { activity: true }): Promise<CallbackOutcome> {
    const seq = live.record.nextSeq;
    const persisted = this.#persist(live, { nextSeq: seq + 1 });
    if (options.activity) live.heartbeat.activity();
    const event: RunEvent = { dispatchId: live.record.dispatchId, seq, ...fields };
    return this.#enqueue(live, async () => (await this.#seqStored(live, seq, persisted)) ?? this.#callbacks.postEvent(live.record.callbackUrl, live.record.runId, event));
  }

  /**
   * Undefined once the store holds a record past `seq` (the write `persisted`, or one more try); else the
   * event (a heartbeat, a progress, an approval request) is not sent: a restart would read the older record
   * and send `seq` again for its final event, which the ledger would drop as known (regression: a failed
   * write was logged and the event sent all the same).
   */
  async #seqStored(live: LiveRun, seq: number, persisted: Promise<unknown>): Promise<CallbackOutcome | undefined> {
    await persisted;
    if (live.storedNextSeq <= seq) await this.#persist(live, {});
    if (live.storedNextSeq > seq) return undefined;
    this.#log({ level: 'error', msg: 'event_not_sent', runId: live.record.runId, seq, why: 'its seq could not be stored' });
    return { kind: 'gave_up', last: `seq ${seq} could not be stored, so it was not sent (a restart would send it again)`, tries: 0 };
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
   * the engine is closed. A failed write is logged and the run carries on; an event goes out only once a
   * write past its seq has landed (#seqStored).
   */
  #persist(live: LiveRun, patch: Partial<Omit<RunRecord, 'v' | 'runId'>>): Promise<unknown> {
    live.record = withoutUndefined({ ...live.record, ...patch, updatedAt: this.#now() });
    const written = live.writes.then(async () => {
      if (this.#closed) return;
      const record = live.record;
      try {
        await this.#store.put(record);
        live.storedNextSeq = Math.max(live.storedNextSeq, record.nextSeq);
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
