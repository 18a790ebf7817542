import type { CallbackClient } from './callbacks.js';
import type { Clock, HeartbeatDecision } from './heartbeat.js';
import type { Decision, Log, RunStatus } from './model.js';
import type { RunStore } from './store.js';

/** What a worker's run sees and returns, and what the engine answers the ledger (CONTRACT §8, §12). */

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
  /** A sign of life; at most one is sent per fifth of the stall window, the rest folded into one trailing heartbeat (or, while one is on its way, into one sent when it settles). Never blocks. */
  heartbeat(): HeartbeatDecision;
  /** Reports progress (a `progress` event); the note is kept for `GET /runs/{runId}` (the event carries no text). Resolves once sent or logged as undeliverable. */
  progress(note: string): Promise<void>;
  /**
   * Uploads one evidence file into the attempt's evidence root. Refuses an unsafe ref (CONTRACT §6) or
   * a file over 4 MiB before sending anything; rejects with a {@link CallbackError} if the ledger refuses it
   * or cannot be reached in the retry budget.
   */
  putEvidence(ref: string, bytes: string | Uint8Array, options?: { readonly contentType?: string }): Promise<void>;
  /** Asks the origin for approval (`approval_requested`); resolves with its decision, or `'cancel'` if the run is cancelled meanwhile. */
  requestApproval(note?: string): Promise<Decision>;
}

/** Which run a context is about: the fields every runtime's context (HTTP, Lambda, Step Functions, durable) starts with. */
export type RunIdentity = Pick<RunContext, 'dispatchId' | 'attempt' | 'runId' | 'origin' | 'expectedEvidence' | 'traceparent'>;

/** A run's identity taken from what its runtime holds (a stored record, a submission with its run id): those fields and no other. */
export function runIdentityOf(of: RunIdentity): RunIdentity {
  return { dispatchId: of.dispatchId, attempt: of.attempt, runId: of.runId, origin: of.origin, expectedEvidence: of.expectedEvidence, traceparent: of.traceparent };
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

export const refused = (httpStatus: Refused['httpStatus'], code: string, message: string): Refused => ({ kind: 'refused', httpStatus, code, message });

/** Why the signal of a cancelled run was aborted. */
export class RunCancelledError extends Error {
  override readonly name = 'RunCancelledError';
  readonly runId: string;
  constructor(runId: string, why: 'cancel' | 'approval_cancelled', options?: { cause?: unknown }) {
    super(why === 'cancel' ? `the ledger asked to cancel run ${runId}` : `the origin decided to cancel run ${runId}`, options);
    this.runId = runId;
  }
}
