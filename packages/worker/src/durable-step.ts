/**
 * `ctx.step` of the kit's durable helper (CONTRACT §17 `durable`): a durable step whose code sends
 * heartbeats and progress while it runs. The SDK refuses a durable operation inside a step, and a
 * checkpoint per heartbeat would cost more than the heartbeat is worth. So the run first reserves a
 * block of seqs with one checkpointed operation in the handler's body (its record, the same at every
 * replay, names the block), and the step's events take their seqs from that block, in order, from its
 * start at every execution of the step. Events the handler posts after the step take seqs after the
 * block: the ledger accepts gaps in seq and refuses only a seq at or below the last it applied.
 *
 * A reused seq is harmless, and only a block's seq is ever reused. The SDK runs a step again when it
 * threw (its retry) or when its result was never checkpointed, and each execution numbers its events
 * from the block's start: a seq the ledger already applied is answered stale, nothing recorded. The
 * block carries nothing but heartbeats and progress (activity, no text), so a reused seq never carries
 * a meaning that matters. A step that completed replays its checkpointed result and posts nothing.
 */
import type { Clock } from './heartbeat.js';
import type { Log } from './model.js';
import { PendingWork } from './pending-work.js';
import { clip, messageOf, NOTE_CHARS } from './results.js';
import type { RunContext } from './run-api.js';

/** A durable step's retry decision (the SDK's `RetryDecision`). */
export interface DurableRetryDecision {
  readonly shouldRetry: boolean;
  readonly delay?: { readonly seconds: number };
}

/** How a failed attempt of a durable operation is retried (the SDK's `retryStrategy`). */
export type DurableRetryStrategy = (error: Error, attempt: number) => DurableRetryDecision;

/** What a step's code is given by `ctx.step`: its events take the seqs of the step's block. */
export interface DurableStepContext extends Pick<RunContext, 'putEvidence'> {
  /** This execution of the step: 1, then 2… when the SDK retries it. */
  readonly attempt: number;
  /**
   * A heartbeat; never blocks. `'sent'`: it took the block's next seq and is on its way (the step's
   * result is checkpointed once it is through). `'coalesced'`, nothing posted: within a fifth of the
   * stall window of the run's last event, the block used up, or the step already over.
   */
  heartbeat(): 'sent' | 'coalesced';
  /**
   * A `progress` event from the block. The note goes to the worker's log only (the event carries no
   * text, and a step's event has no checkpoint of its own to keep it in). Resolves once posted, or
   * logged as not posted (the block used up, the ledger refusing it or out of reach).
   */
  progress(note: string): Promise<void>;
}

/** How `ctx.step` runs a step. */
export interface DurableStepOptions {
  /** How a step that threw is retried (the SDK's `retryStrategy`). @default the SDK's */
  readonly retryStrategy?: DurableRetryStrategy;
  /**
   * The seqs the step's events may take, 1..{@link MAX_STEP_SEQS}; the same at every invocation.
   * @default a heartbeat per fifth of the stall window through the longest invocation Lambda runs (15 min), plus one
   */
  readonly seqs?: number;
}

/** The most seqs one step's block holds. */
export const MAX_STEP_SEQS = 10_000;

/** A step's execution runs inside one invocation, which Lambda ends after 15 minutes at most. */
const LONGEST_INVOCATION_MS = 15 * 60_000;

/**
 * The seqs a step reserves by default: enough for every heartbeat that is not coalesced through the
 * longest invocation.
 *
 * @example
 * defaultStepSeqs(120_000) // 9 (the ledger's default stall window, 600 s)
 */
export function defaultStepSeqs(heartbeatMs: number): number {
  return Math.min(MAX_STEP_SEQS, Math.ceil(LONGEST_INVOCATION_MS / heartbeatMs) + 1);
}

/** Refuses a block size no step can use, before anything is reserved. */
export function checkStepSeqs(seqs: number): number {
  if (!Number.isInteger(seqs) || seqs < 1 || seqs > MAX_STEP_SEQS) throw new RangeError(`a step's seqs must be an integer 1..${MAX_STEP_SEQS}, got ${seqs}`);
  return seqs;
}

/** What the block's reserving operation records: its first seq and how many it holds. */
export interface BlockRecord {
  readonly seq: number;
  readonly seqs: number;
}

/** What a step's context asks of the run it reports for. */
export interface StepRun {
  readonly runId: string;
  readonly heartbeatMs: number;
  readonly clock: Clock;
  readonly log: Log;
  /** Throws once the run has ended. */
  active(): void;
  /** When the run's last event was posted (ms), as far as this invocation knows. */
  lastPostedAt(): number | undefined;
  /** Posts one event after those before it; rejects when the ledger refused it or could not be reached. */
  send(seq: number, type: 'heartbeat' | 'progress'): Promise<void>;
  /** Keeps `work` until the run's end is reported. */
  hold(work: Promise<unknown>): void;
  putEvidence: RunContext['putEvidence'];
}

/**
 * One execution of a step's code, given a context whose events take the block's seqs from its start
 * (a counter local to this execution). It settles once the events it posted are through, so the
 * step's checkpoint never comes before them and an invocation never suspends with one half-sent.
 */
export async function runInBlock<T>(run: StepRun, block: BlockRecord, name: string, attempt: number, fn: (step: DurableStepContext) => Promise<T>): Promise<T> {
  const posted = new PendingWork();
  let taken = 0;
  let lastTakenAt: number | undefined;
  let open = true;
  let usedUp = false;
  const post = (type: 'heartbeat' | 'progress'): Promise<boolean> | undefined => {
    if (!open) return undefined;
    if (taken >= block.seqs) {
      // Past the block nothing is posted: its seqs are all this execution of the step may take.
      if (!usedUp) run.log({ level: 'warn', msg: 'step_seqs_used_up', runId: run.runId, step: name, seqs: block.seqs });
      usedUp = true;
      return undefined;
    }
    const seq = block.seq + taken;
    taken += 1;
    lastTakenAt = run.clock.now();
    // A lost heartbeat costs at most an `unknown` verdict, never the step's work: logged, not thrown.
    const sent = run.send(seq, type).then(
      () => true,
      (error: unknown) => {
        run.log({ level: 'warn', msg: 'step_event_not_sent', runId: run.runId, step: name, seq, type, error: messageOf(error) });
        return false;
      },
    );
    posted.hold(sent);
    run.hold(sent);
    return sent;
  };
  const step: DurableStepContext = {
    attempt,
    heartbeat: () => {
      run.active();
      const last = Math.max(run.lastPostedAt() ?? Number.NEGATIVE_INFINITY, lastTakenAt ?? Number.NEGATIVE_INFINITY);
      if (run.clock.now() - last < run.heartbeatMs) return 'coalesced';
      return post('heartbeat') === undefined ? 'coalesced' : 'sent';
    },
    progress: async (note) => {
      run.active();
      run.log({ level: 'info', msg: 'step_progress', runId: run.runId, step: name, note: clip(String(note), NOTE_CHARS) });
      await post('progress');
    },
    putEvidence: run.putEvidence,
  };
  try {
    return await fn(step);
  } finally {
    open = false;
    await posted.drain();
  }
}
