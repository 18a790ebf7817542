import { randomUUID } from 'node:crypto';
import type { CallbackClient, CallbackOutcome } from './callbacks.js';
import type { HeartbeatCoalescer } from './heartbeat.js';
import { RunEndedError, isFinal, type Decision, type RunEvent, type RunRecord, type RunStatus, type Submission } from './model.js';
import { RunCancelledError, runIdentityOf, type RunContext } from './run-api.js';
import { NOTE_CHARS, callbackError, clip, reportingOf } from './results.js';

/**
 * The `ctx` a run's code is given (CONTRACT §12) by the http worker's engine (runs.ts): heartbeats,
 * progress, evidence uploads and approvals, each refused once the run has ended or the worker closes.
 */

export interface LiveRun {
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
  /** The `nextSeq` of the latest record the store took: an event is sent only under a seq below it. */
  storedNextSeq: number;
  approval?: { readonly approvalId: string; readonly settle: (decision: Decision) => void; readonly fail: (error: Error) => void };
  /** The run's code has settled: ctx calls are refused from now on. */
  settled: boolean;
}

/** What a run's context asks of the engine that runs it. */
export interface ContextEngine {
  readonly callbacks: CallbackClient;
  /** close() has begun: no ctx call is taken. */
  closing(): boolean;
  persist(patch: Partial<Omit<RunRecord, 'v' | 'runId'>>): Promise<unknown>;
  emit(fields: Omit<RunEvent, 'dispatchId' | 'seq'>): Promise<CallbackOutcome>;
  move(to: RunStatus): boolean;
  hold(work: Promise<unknown>): void;
  now(): string;
}

export function runContext(live: LiveRun, engine: ContextEngine): RunContext {
  const { record } = live;
  const active = (): void => {
    if (engine.closing()) throw new RunEndedError(record.runId, 'worker_closed');
    if (live.settled || isFinal(live.record.status)) throw new RunEndedError(record.runId, 'ended');
  };
  return {
    ...runIdentityOf({ ...record, traceparent: live.submission.traceparent }),
    signal: live.abort.signal,
    heartbeat: () => {
      if (engine.closing() || live.settled) return 'stopped';
      return live.heartbeat.request();
    },
    ...reportingOf({
      active,
      record: () => live.record,
      persist: (patch) => engine.persist(patch),
      progressed: () => engine.emit({ type: 'progress' }),
      upload: (ref, bytes, contentType) => engine.callbacks.putEvidence(record.callbackUrl, record.dispatchId, record.runId, ref, bytes, contentType),
      uploads: live.uploads,
      hold: (work) => engine.hold(work),
      failed: (what, outcome) => callbackError(what, outcome, record.runId),
    }),
    requestApproval: async (note) => {
      active();
      if (live.abort.signal.aborted) return 'cancel';
      if (live.approval) throw new Error(`run ${record.runId} already waits for approval ${live.approval.approvalId}`);
      const approvalId = `a-${randomUUID()}`;
      const decided = new Promise<Decision>((resolve, reject) => {
        const onAbort = (): void => {
          if (live.approval?.approvalId !== approvalId) return;
          delete live.approval;
          // Cancelled, not waiting any more (regression: the record still showed the approval pending, and
          // deciding it answered 409 approval_not_pending, while the run's code cleaned up). A worker that
          // closes writes nothing more: its runs stay as a process exit would leave them.
          if (live.abort.signal.reason instanceof RunCancelledError && engine.move('running')) engine.persist({ pendingApproval: undefined });
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
      if (!engine.move('waiting_for_approval')) throw new RunEndedError(record.runId, 'ended');
      const pendingApproval = { approvalId, requestedAt: engine.now(), ...(note === undefined ? {} : { note: clip(String(note), NOTE_CHARS) }) };
      engine.persist({ pendingApproval });
      // The decision may come before the event is through (the ledger adopts an approval from a lookup too).
      void engine.emit({ type: 'approval_requested', approvalId });
      return decided;
    },
  };
}
