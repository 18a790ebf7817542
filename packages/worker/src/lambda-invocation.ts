import { randomUUID } from 'node:crypto';
import { CallbackClient, type CallbackOutcome, type RetryPolicy, type Transport } from './callbacks.js';
import { DEFAULT_STALL_AFTER_SECONDS, HeartbeatCoalescer, heartbeatIntervalMs, type Clock, type Timer } from './heartbeat.js';
import { compact, type LambdaRunItem, type LambdaRunStore } from './lambda-store.js';
import {
  RunEndedError,
  claimedEvidence,
  isFinal,
  type Decision,
  type Log,
  type RunEvent,
} from './model.js';
import { isPlainObject } from './parse.js';
import { RunCancelledError, runIdentityOf, type RunContext, type RunFunction } from './run-api.js';
import { NOTE_CHARS, SUMMARY_CHARS, callbackError, clip, verdictOf, messageOf, reportState, reportingOf } from './results.js';
import type { Signer } from './signer.js';
import { PendingWork } from './pending-work.js';
import { readTask, type LambdaContextLike } from './invocation-callbacks.js';

export type { LambdaContextLike } from './invocation-callbacks.js';

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

/**
 * One invocation of a Lambda worker's run (CONTRACT §12): its task, its control record polled once a
 * heartbeat interval, the `ctx` its code is given, and the final event — what lambda.ts drives for each event.
 */

export interface Env {
  readonly store: LambdaRunStore;
  readonly callbacks: CallbackClient;
  readonly log: Log;
  readonly requestId: string;
  readonly leaseUntil: string;
  readonly nowIso: () => string;
  readonly clock: Clock;
  readonly options: LambdaHandlerOptions;
}

export type Output = { readonly kind: 'returned'; readonly value: unknown } | { readonly kind: 'threw'; readonly error: unknown } | { readonly kind: 'suspended' };

export class Invocation {
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
  readonly #pending = new PendingWork();
  #approvalIndex = 0;
  readonly #controlEveryMs: number;
  #controlTimer: Timer | undefined;
  #controlStopped = false;
  #suspend: (output: Output) => void = () => undefined;
  readonly suspended: Promise<Output>;

  constructor(env: Env, item: LambdaRunItem) {
    this.env = env;
    this.item = item;
    this.suspended = new Promise<Output>((resolve) => {
      this.#suspend = resolve;
    });
    const stall = item.timeouts.stallAfterSeconds ?? env.options.stallHintSeconds ?? DEFAULT_STALL_AFTER_SECONDS;
    this.#controlEveryMs = heartbeatIntervalMs(stall);
    this.heartbeat = new HeartbeatCoalescer(this.#controlEveryMs, () => this.emit({ type: 'heartbeat' }, false), env.clock);
  }

  /**
   * Polls the control record now, then once a heartbeat interval while the run goes on, whatever the run
   * sends (regression: it was polled with each heartbeat sent, and a run whose progress events came more
   * often than that interval — each one putting the next heartbeat off — never learned of a cancel or a
   * supersede).
   */
  watchControl(): void {
    if (this.settled || this.lost || this.#controlStopped) return;
    // The next poll is timed from this one's end: a slow ledger never has polls pile up.
    const poll = this.pollControl().finally(() => {
      if (!this.settled && !this.lost && !this.#controlStopped) this.#controlTimer = this.env.clock.setTimer(this.#controlEveryMs, () => this.watchControl());
    });
    this.#hold(poll);
  }

  /** No more polls: the run ended, or this invocation ends (an approval asked). */
  stopWatchingControl(): void {
    this.#controlStopped = true;
    this.#controlTimer?.cancel();
  }

  task(): Promise<Readonly<Record<string, unknown>>> {
    return readTask(this.env.callbacks, this.item);
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
      ...runIdentityOf(item),
      signal: this.abort.signal,
      heartbeat: () => (this.settled ? 'stopped' : this.heartbeat.request()),
      ...reportingOf({
        active,
        record: () => this.item,
        persist: (patch) => this.persist(patch),
        progressed: () => this.emit({ type: 'progress' }),
        upload: (ref, bytes, contentType) => this.env.callbacks.putEvidence(item.callbackUrl, item.dispatchId, item.runId, ref, bytes, contentType),
        uploads: this.#uploads,
        hold: (work) => this.#hold(work),
        // The http worker's error, code and all (`err.code === 'evidence_sealed'`); "stopped": the invocation ended.
        failed: (what, outcome) => callbackError(what, outcome, undefined, 'the invocation ended'),
      }),
      requestApproval: async (note) => {
        active();
        if (this.abort.signal.aborted) return 'cancel';
        const index = this.#approvalIndex++;
        const known = this.item.approvals[index];
        // A re-entered run: this approval was asked for and decided in an earlier invocation.
        if (known?.decision) return known.decision;
        const approvalId = `a-${randomUUID()}`;
        const requestedAt = this.env.nowIso();
        const approvals = [...this.item.approvals.slice(0, index), { approvalId, requestedAt, ...(note === undefined ? {} : { note: clip(String(note), NOTE_CHARS) }) }];
        this.persist({ status: 'waiting_for_approval', pendingApproval: { approvalId, requestedAt }, approvals });
        this.heartbeat.stop();
        this.stopWatchingControl();
        await this.emit({ type: 'approval_requested', approvalId });
        this.env.log({ level: 'info', msg: 'approval_requested_invocation_ends', runId: item.runId, approvalId });
        // The invocation ends here; the decision re-invokes the function, which runs `run` again.
        this.#suspend({ kind: 'suspended' });
        return new Promise<Decision>(() => undefined);
      },
    };
  }

  async finish(output: Exclude<Output, { kind: 'suspended' }>): Promise<void> {
    const { status, result } = verdictOf(this.item.cancelRequestedAt !== undefined, output, (text) => clip(text, SUMMARY_CHARS));
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
    this.#pending.hold(work);
  }

  /** Waits for every write, event and upload under way: Lambda freezes the process once the handler returns. */
  async drain(): Promise<void> {
    await this.#pending.drain();
  }
}

export function finalEventOf(item: LambdaRunItem): RunEvent | undefined {
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
