/**
 * The worker kit's own model (CONTRACT §2, §8, §12): what a submission carries, what a run's state
 * looks like in the store, which statuses a run moves through, and the errors a run's code may see.
 * Nothing here talks HTTP or touches a disk.
 */

import { isFinalRunStatus, MAX_EVIDENCE_REFS, type FinalRunStatus, type RunStatus } from '@dispatch-ledger/protocol';

/** Run statuses in the contract's vocabulary (§2 `execution.status`, minus the ledger-only `unknown`): the protocol's. */
export { RUN_STATUSES, type RunStatus } from '@dispatch-ledger/protocol';
export type FinalStatus = FinalRunStatus;
export const isFinal = isFinalRunStatus;

/** Legal moves of a run; leaving a final status is never one. */
const TRANSITIONS: Readonly<Record<RunStatus, readonly RunStatus[]>> = {
  queued: ['running', 'failed', 'cancelled'],
  running: ['waiting_for_approval', 'completed', 'failed', 'cancelled'],
  waiting_for_approval: ['running', 'completed', 'failed', 'cancelled'],
  completed: [],
  failed: [],
  cancelled: [],
};

export function canMove(from: RunStatus, to: RunStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

/** The dispatch's clocks as the ledger resolved them (CONTRACT §1, §8 v2); any may be absent. */
export interface Timeouts {
  readonly stallAfterSeconds?: number;
  readonly approvalWaitSeconds?: number;
  readonly deliveryGraceSeconds?: number;
}

/** The body of `POST /runs` (CONTRACT §8): `task` inline, or `taskRef` when the ledger spilled it. */
export interface Submission {
  readonly dispatchId: string;
  readonly attempt: number;
  readonly origin: string;
  readonly task?: Readonly<Record<string, unknown>>;
  readonly taskRef?: unknown;
  readonly expectedEvidence: readonly string[];
  readonly callbackUrl: string;
  readonly timeouts: Timeouts;
  /** The dispatch message's W3C trace context (CONTRACT §1 v2): the `traceparent` header over HTTP, a payload field for a Lambda. */
  readonly traceparent?: string;
}

/** What a run's record keeps of its submission, in the http worker's store and the Lambda kit's table alike. */
export type SubmittedFields = Pick<Submission, 'dispatchId' | 'attempt' | 'origin' | 'callbackUrl' | 'expectedEvidence' | 'timeouts'>;

export const submittedFields = ({ dispatchId, attempt, origin, callbackUrl, expectedEvidence, timeouts }: Submission): SubmittedFields => ({ dispatchId, attempt, origin, callbackUrl, expectedEvidence, timeouts });

/** What a run reports when it ends (CONTRACT §2 `result`; `body` is any JSON ≤ 256 KB, v2 §10). */
export interface RunResult {
  readonly summary: string;
  readonly body?: unknown;
}

export interface PendingApproval {
  readonly approvalId: string;
  readonly requestedAt: string;
  readonly note?: string;
}

export type Decision = 'approve' | 'cancel';

/**
 * One run as the store keeps it. Everything the kit needs to answer `GET /runs/{runId}`, to number the
 * next event, and to tell after a restart what the previous process left behind.
 */
export interface RunRecord extends SubmittedFields {
  /** The record layout's version, so a store written by a later kit is refused, not misread. */
  readonly v: 1;
  readonly runId: string;
  /** `{dispatchId}:{attempt}`: the ledger's Idempotency-Key for this attempt. */
  readonly idempotencyKey: string;
  /** Which worker process (one per `createWorker`) drives the run; another one's non-final run was orphaned by a restart. */
  readonly owner: string;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly status: RunStatus;
  /** A final run's own word for its status when it says more (CONTRACT V3 §2): `worker_restarted`. */
  readonly nativeStatus?: string;
  /** The next event's seq. Taken and persisted before the event is sent, so a restart never reuses one. */
  readonly nextSeq: number;
  /** Refs uploaded and accepted by the ledger, in upload order. */
  readonly evidence: readonly string[];
  readonly result?: RunResult;
  readonly pendingApproval?: PendingApproval;
  readonly decision?: { readonly approvalId: string; readonly decision: Decision };
  readonly cancelRequestedAt?: string;
  /** The last `ctx.progress(note)`, kept for the lookup (the event itself carries no text). */
  readonly note?: string;
  /** Once final: the final event's seq, and whether the ledger has taken it. */
  readonly finalReport?: { readonly seq: number; readonly state: 'pending' | 'delivered' | 'refused' };
}

/** `GET /runs/{runId}` (CONTRACT §8). */
export interface RunView {
  readonly runId: string;
  readonly status: RunStatus;
  readonly nativeStatus?: string;
  readonly result?: RunResult;
  readonly evidence?: readonly string[];
  readonly pendingApproval?: { readonly approvalId: string; readonly requestedAt: string };
  readonly note?: string;
}

/** The ledger takes at most 32 refs in an event's `evidence` and in a lookup's (CONTRACT §1, §8). */
export const MAX_CLAIMED_EVIDENCE = MAX_EVIDENCE_REFS;
/**
 * A lookup answer is read only up to 64 KB by the ledger, which keeps a final run's looked-up body too, so
 * a final event that never got through does not lose it: a body larger than this is left out of
 * `GET /runs/{runId}` to keep the answer readable, and travels with the final event alone.
 */
export const LOOKUP_BODY_BYTES = 16 * 1024;

/**
 * The refs a run's record keeps once `ref` was delivered (undefined: as they are): every expected ref, and
 * the first MAX_CLAIMED_EVIDENCE others — all a final event or a lookup can claim (regression: every
 * distinct ref was kept, so a Lambda run's item, beside a 256 KiB body, could pass DynamoDB's 400 KB and
 * its final write fail).
 */
export function evidenceWith(kept: readonly string[], ref: string, expected: readonly string[]): string[] | undefined {
  if (kept.includes(ref)) return undefined;
  if (!expected.includes(ref) && kept.filter((other) => !expected.includes(other)).length >= MAX_CLAIMED_EVIDENCE) return undefined;
  return [...kept, ref];
}

/** The uploaded refs a run claims: the expected ones first, then the others, at most 32. */
export function claimedEvidence(record: Pick<RunRecord, 'evidence' | 'expectedEvidence'>): readonly string[] {
  const expected = record.evidence.filter((ref) => record.expectedEvidence.includes(ref));
  const others = record.evidence.filter((ref) => !record.expectedEvidence.includes(ref));
  return [...expected, ...others].slice(0, MAX_CLAIMED_EVIDENCE);
}

export function viewOf(record: RunRecord): RunView {
  const evidence = claimedEvidence(record);
  let result = record.result;
  if (result?.body !== undefined && Buffer.byteLength(JSON.stringify(result.body), 'utf8') > LOOKUP_BODY_BYTES) result = { summary: result.summary };
  return {
    runId: record.runId,
    status: record.status,
    ...(record.nativeStatus !== undefined && { nativeStatus: record.nativeStatus }),
    ...(result && { result }),
    ...(evidence.length > 0 && { evidence }),
    ...(record.pendingApproval && { pendingApproval: { approvalId: record.pendingApproval.approvalId, requestedAt: record.pendingApproval.requestedAt } }),
    ...(record.note !== undefined && { note: record.note }),
  };
}

/** A run event as posted to `{callbackUrl}/runs/{runId}/events` (CONTRACT §2). */
export type RunEventType = 'heartbeat' | 'progress' | 'approval_requested' | FinalStatus;

export interface RunEvent {
  readonly dispatchId: string;
  readonly seq: number;
  readonly type: RunEventType;
  readonly approvalId?: string;
  /** A durable function's `approval_requested` (CONTRACT §17): the callback id its `waitForCallback` waits on, in place of an approvalId (the ledger chooses that). */
  readonly callbackId?: string;
  readonly result?: RunResult;
  readonly evidence?: readonly string[];
  /** A final event's own word for its status (CONTRACT V3 §2). */
  readonly nativeStatus?: string;
}

/** The final event a final record stands for: the same one however often it is sent. */
export function finalEventOf(record: RunRecord): RunEvent | undefined {
  if (!isFinal(record.status) || !record.finalReport) return undefined;
  return {
    dispatchId: record.dispatchId,
    seq: record.finalReport.seq,
    type: record.status,
    ...(record.nativeStatus !== undefined && { nativeStatus: record.nativeStatus }),
    ...(record.result && { result: record.result }),
    ...(record.status === 'completed' && { evidence: claimedEvidence(record) }),
  };
}

/** How the kit names a run it failed because the process running it went away (CONTRACT §12, V3 §2). */
export const WORKER_RESTARTED = 'worker_restarted';

/**
 * The run id for a dispatch attempt: `{dispatchId}:{attempt}` (as CONTRACT §12 names lambda runs), or
 * a digest of it when that is longer than the 128 characters a ledger takes as a runId. Derived, not
 * drawn: the same attempt gets the same run id in every process, which is what makes a submission
 * idempotent across restarts.
 */
export function runIdFor(dispatchId: string, attempt: number, digest: (text: string) => string): string {
  const key = `${dispatchId}:${attempt}`;
  return key.length <= 128 ? key : `r-${digest(key).slice(0, 40)}`;
}

/** One structured log line; the kit never writes to stdout itself. */
export type LogLine = { readonly level: 'debug' | 'info' | 'warn' | 'error'; readonly msg: string } & Record<string, unknown>;
export type Log = (line: LogLine) => void;

// --- Errors a run's code (or its caller) may see ------------------------------------------------------

/** The most of one untrusted value an error message quotes, in UTF-16 units. */
export const MAX_QUOTED_CHARS = 128;

/**
 * Untrusted text (a path segment, a runId, a ref, a code the ledger answered) as an error message
 * quotes it: as given when short, else its first {@link MAX_QUOTED_CHARS} characters (a surrogate pair
 * at the cut dropped whole), an ellipsis and its length, so every error text stays within the
 * contract's 1 KB whatever was sent.
 *
 * @example
 * clipForMessage('d-1:1')          // 'd-1:1'
 * clipForMessage('a'.repeat(5000)) // 'aaa…a… (5000 chars)', 128 a's
 */
export function clipForMessage(text: string, max = MAX_QUOTED_CHARS): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  const end = last >= 0xd800 && last <= 0xdbff ? max - 1 : max;
  return `${text.slice(0, end)}… (${text.length} chars)`;
}

/** `ctx.putEvidence` was given a ref CONTRACT §6 refuses; nothing was sent. */
export class UnsafeRefError extends Error {
  override readonly name = 'UnsafeRefError';
  readonly ref: unknown;
  readonly problem: string;
  constructor(ref: unknown, problem: string, options?: { cause?: unknown }) {
    super(`unsafe evidence ref ${JSON.stringify(clipForMessage(String(ref)))}: ${problem}`, options);
    this.ref = ref;
    this.problem = problem;
  }
}

/** `ctx.putEvidence` was given more than the ledger takes for one file (4 MiB); nothing was sent. */
export class EvidenceTooLargeError extends Error {
  override readonly name = 'EvidenceTooLargeError';
  readonly ref: string;
  readonly bytes: number;
  constructor(ref: string, bytes: number, limit: number, options?: { cause?: unknown }) {
    super(`evidence ${clipForMessage(ref)} is ${bytes} bytes; the ledger takes at most ${limit}`, options);
    this.ref = ref;
    this.bytes = bytes;
  }
}

/** A callback the ledger refused (a 4xx that retrying cannot change), or one that never got through in its time. */
export class CallbackError extends Error {
  override readonly name = 'CallbackError';
  readonly kind: 'refused' | 'gave_up' | 'stopped';
  readonly status: number | undefined;
  readonly code: string | undefined;
  constructor(message: string, fields: { kind: CallbackError['kind']; status?: number; code?: string }, options?: { cause?: unknown }) {
    super(message, options);
    this.kind = fields.kind;
    this.status = fields.status;
    this.code = fields.code;
  }
}

/** A `ctx` call after its run ended, or after the worker closed. */
export class RunEndedError extends Error {
  override readonly name = 'RunEndedError';
  readonly runId: string;
  constructor(runId: string, why: 'ended' | 'worker_closed', options?: { cause?: unknown }) {
    super(why === 'ended' ? `run ${clipForMessage(runId)} has ended` : `the worker closed while run ${clipForMessage(runId)} was running`, options);
    this.runId = runId;
  }
}

/** A run's result the ledger could not take (its body over 256 KB, or not JSON). */
export class ResultRefusedError extends Error {
  override readonly name = 'ResultRefusedError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** An invocation's input the kit cannot run (a state machine task's event, a durable execution's input): nothing was sent. */
export class InputFieldError extends Error {
  /** The field at fault (`submission.<field>`, the run's id field), when one is. */
  readonly field: string | undefined;
  constructor(message: string, field: string | undefined, options?: { cause?: unknown }) {
    super(message, options);
    this.field = field;
  }
}
