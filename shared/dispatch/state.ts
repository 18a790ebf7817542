import type { TargetRunStatus } from './target-answers.js';
import { clip, printable } from '../text.js';
import type { Phase, ResultState } from '@dispatch-ledger/protocol';

/**
 * The dispatch's hot state — one small item (≤ 1 KB) that every write to the dispatch goes through.
 * The state says what the dispatch is; how it is stored (the version a write is conditioned on) travels
 * beside it, in the repository's envelope (`StoredState`, shared/ledger/repository.ts). The task payload
 * lives elsewhere (the accepted message), written once.
 */

/**
 * A dispatch's phase and a result's state in its origin's inbox: the protocol's words. Phase `cancelled`:
 * cancelled before it was ever submitted (CONTRACT §2 v2); a submitted run's cancel is the run's own status.
 */
export type { Phase, ResultState };
export type ExecutionStatus = TargetRunStatus | 'unknown';
export type MonitorStatus = 'stalled' | 'approval_wait_expired' | 'lookup_unavailable' | 'target_not_found';

/** Why a dispatch is blocked: a code people and scripts can match, then a bounded detail. */
export type BlockedCode =
  | 'invalid_fields'
  | 'unknown_target'
  | 'unknown_parent'
  | 'hop_budget_exceeded'
  | 'target_rejected'
  | 'retry_budget_spent'
  /** A person attested that the work of a manual target cannot be done (CONTRACT §13 `manual_blocked`). */
  | 'manual_blocked';

export type DispatchReceipt =
  | { readonly event: 'dispatch_written'; readonly at: string; readonly attempt: number }
  | {
      readonly event: 'dispatch_submitted';
      readonly at: string;
      readonly attempt: number;
      /** Proof: the target's run handle and the id of the submission request. */
      readonly runId: string;
      readonly requestId: string;
    }
  | { readonly event: 'dispatch_blocked'; readonly at: string; readonly attempt: number; readonly reason: string }
  /** The platform found every expected evidence file of this attempt present and valid. */
  | { readonly event: 'dispatch_completed'; readonly at: string; readonly attempt: number; readonly runId: string; readonly evidenceCount: number };

export interface Submission {
  /** Submission calls made for the current attempt. */
  readonly attempts: number;
  readonly nextRetryAt: string | null;
  readonly lastError: string | null;
}

export interface Execution {
  readonly status: ExecutionStatus | null;
  /** The status the target last reported, as the state machine reads it. */
  readonly nativeStatus: TargetRunStatus | null;
  /**
   * CONTRACT V3 §2: the target's own word for a final status when it said more than the status (a
   * final event's or a lookup's `nativeStatus`, e.g. `worker_restarted`); shown as the view's and the
   * events' `nativeStatus` (see {@link nativeStatusOf}). Absent when it said just the status.
   */
  readonly nativeDetail?: string | undefined;
  readonly monitorStatus: MonitorStatus | null;
  readonly lastActivityAt: string | null;
  readonly completedAt: string | null;
  readonly pendingApproval: { readonly approvalId: string; readonly requestedAt: string } | null;
  readonly result: { readonly summary?: string; readonly body?: ResultBodyRef } | null;
  /** The last approval decision the target took for this run (its control record answers it, CONTRACT §12). */
  readonly lastDecision?: { readonly approvalId: string; readonly decision: 'approve' | 'cancel'; readonly at: string } | undefined;
  /** Lookups in a row that left the run unknown (the backoff of the next one doubles with it). */
  readonly unknownLookups?: number | undefined;
  /**
   * The runtime runs this run again after the ledger recorded its end (a state machine's execution
   * redriven outside the ledger, CONTRACT §17): when the ledger learned it, and the runtime's redrive
   * count. The recorded end stands; the dispatch is on the attention list until a redispatch.
   */
  readonly redriven?: { readonly at: string; readonly count: number } | undefined;
}

/** CONTRACT §1's defaults (the protocol's: docs/protocol.md §1). */
export { DEFAULT_TIMEOUTS, DEFAULT_PRIORITY, MAX_HOPS_LIMIT, MAX_PRIORITY } from '@dispatch-ledger/protocol';

export interface Timeouts {
  readonly stallAfterSeconds: number;
  readonly approvalWaitSeconds: number;
  readonly deliveryGraceSeconds: number;
}

/**
 * What a committed version of the state changed. The event publisher turns these into events (one
 * per change that has a detail-type), so an event exists exactly for each committed state change.
 */
export type ChangeKind =
  | 'accepted'
  | 'submitted'
  | 'blocked'
  | 'retry_scheduled'
  | 'claimed'
  | 'activity'
  | 'approval_requested'
  | 'approval_decided'
  | 'completed'
  | 'failed'
  | 'cancelled'
  | 'recovered'
  | 'stalled'
  | 'unobservable'
  | 'approval_wait_expired'
  | 'observed'
  | 'rescheduled'
  | 'superseded'
  | 'handled'
  | 'orphaned'
  | 'evidence_unverified'
  | 'evidence_recheck'
  | 'redispatched'
  | 'result_ready'
  | 'result_claimed'
  | 'result_renewed'
  | 'result_released'
  | 'result_delivered'
  | 'result_dropped'
  | 'waiting'
  | 'dispatch_cancelled'
  | 'cancel_requested'
  | 'cancel_answered'
  | 'slot_released'
  /** The runtime runs an ended run again, outside the ledger (`Execution.redriven`). */
  | 'redriven'
  /** A person attested the result of a manual target's work (CONTRACT §13): the wait for a person ends. */
  | 'manual_result_attested';

/**
 * Why an accepted dispatch is not submitted yet (CONTRACT §11; `retry` is read from `submission.nextRetryAt`).
 * `person`: its target is manual (CONTRACT §13) — it is never submitted; a person does the work and attests it.
 * `parent`: its `parentDispatchId` is not recorded yet (CONTRACT §1 V3): held, its hop not derived yet.
 */
export type WaitingFor = 'capacity' | 'not_before' | 'person' | 'parent';

/**
 * A dispatch to a manual target (CONTRACT §13): set by the one submission path when it finds the target
 * manual, so the view and the gate know the kind from the state itself. What people attest is kept in
 * items of its own; only the attestation that ended the wait for a person is named here.
 */
export interface ManualWork {
  /** When the ledger recorded it as waiting for a person. */
  readonly since: string;
  /** The `manual_result_attested` attestation that ended the wait, when one did. */
  readonly resultAttestation?: { readonly attestationId: string; readonly at: string } | undefined;
  /** The `manual_blocked` attestation that blocked it, when one did (its retry is told from another's). */
  readonly blockAttestation?: { readonly attestationId: string; readonly at: string } | undefined;
}

/** One slot of the target's concurrency limit, held from admission until the run is known to be over (CONTRACT §11). */
export interface SlotHold {
  /** The slot shard it was taken from (its counter is given back to the same shard). */
  readonly shard: number;
  readonly at: string;
}

/** The origin asked for a cancel (CONTRACT §2 v2): who, why, and how asking the target went. */
export interface CancelRequest {
  readonly requestedAt: string;
  readonly reason: string;
  readonly by: string;
  /** Times the target was asked. */
  readonly asks: number;
  /** When to ask the target again (it could not be reached); null: not asking (answered, or never submitted). */
  readonly nextAskAt: string | null;
  /** The target's last answer, in words. */
  readonly answer: string | null;
}

/** An operator freed the slot of a run its target no longer knows (`POST /targets/{t}/slots/release`). */
export interface SlotRelease {
  readonly at: string;
  readonly by: string;
  readonly reason: string;
  readonly runId: string;
}

/** The post-condition: did the expected evidence arrive? Checked by the platform itself (CONTRACT §5). */
export interface EvidenceState {
  readonly outcome: 'pending' | 'handled' | 'orphan_no_delivery' | 'unverified';
  readonly expectedCount: number;
  /** completedAt + deliveryGraceSeconds: missing evidence after this is an orphan. */
  readonly deadline: string | null;
  /** Set when the check settles (the refs its Handled/Orphaned event names); absent before. */
  readonly expected?: readonly string[];
  readonly missing?: readonly string[];
  /**
   * The settled check's record, when it fits the hot item: the files found with their hashes (the
   * seal: a later upload of one of these refs is refused), when it checked, the refs it found marked
   * invalid. Absent on a settled state: the record is an item of its own (many files, long refs, an
   * error), or the state was settled before checks were kept here.
   */
  readonly check?: InlineCheck;
}

/** A settled check as the state carries it (each file's `checkedAt` is `at`). */
export interface InlineCheck {
  readonly at: string;
  readonly files: readonly { readonly ref: string; readonly sha256: string; readonly bytes: number }[];
  readonly invalid?: readonly string[];
}

export interface DispatchState {
  readonly dispatchId: string;
  readonly origin: string;
  readonly target: string;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly phase: Phase;
  /** Why it is blocked, as a code scripts match (never parsed back out of the text). */
  readonly blockedCode: BlockedCode | null;
  /** `code: detail`, bounded and printable, for people. */
  readonly blockedReason: string | null;
  readonly attempt: number;
  readonly runId: string | null;
  /** Highest run-event seq applied for the current run (null before the first event). */
  readonly lastSeq: number | null;
  /** Earlier runs of this dispatch, superseded by a forced redispatch: their events are late, never applied. */
  readonly supersededRuns: readonly string[];
  readonly hop: number;
  readonly maxHops: number;
  readonly parentDispatchId: string | null;
  readonly deliveryMode: 'callback' | 'detached';
  readonly timeouts: Timeouts;
  readonly submission: Submission;
  readonly execution: Execution;
  readonly receipts: readonly DispatchReceipt[];
  readonly evidence: EvidenceState;
  /** When the monitor must look at this dispatch next (retry, stall watch…); null: nothing due. */
  readonly dueAt: string | null;
  /** The last forced or unforced redispatch: who asked why, and what became of the old run. */
  readonly redispatch?: { readonly at: string; readonly reason: string; readonly supersededRunId: string | null; readonly cancel: string | null } | undefined;
  /** Since when the dispatch has needed a person for its current attention kind (the attention feed's order). */
  readonly attentionSince?: string | null;
  /** When a refresh last looked the run up (CONTRACT §2 V3: at most one lookup per 10 s); written with what it found. */
  readonly lastRefreshAt?: string | undefined;
  /** CONTRACT §10: how the result reaches the origin (absent: after_turn). */
  readonly resultDelivery?: ResultDelivery | undefined;
  /** The result of the current attempt, once it exists (callback delivery only; CONTRACT §10). */
  readonly result?: ResultRecord | null | undefined;
  /** Results made again for an attempt that already had one (a blocked dispatch redispatched on the same attempt). */
  readonly resultRound?: number | undefined;
  /** CONTRACT §1 v2: order among waiting dispatches, 0..9 (absent: 5). */
  readonly priority?: number | undefined;
  /**
   * When the origin sent it (SQS SentTimestamp): the order waiting dispatches of one origin are admitted
   * in ("oldest first"), where intake's own clock would follow the order a batch happened to be taken in.
   * Stored only while it waits.
   */
  readonly sentAt?: string | undefined;
  /** CONTRACT §1 v2: not submitted before this instant. */
  readonly notBefore?: string | null | undefined;
  /** Waiting for a slot or for `notBefore` (CONTRACT §11); null or absent otherwise. */
  readonly waitingFor?: WaitingFor | null | undefined;
  /** The target slot this attempt holds (targets with `maxConcurrentRuns` only). */
  readonly slot?: SlotHold | null | undefined;
  /** A cancel the origin asked for. */
  readonly cancel?: CancelRequest | null | undefined;
  /** The last slot an operator freed by hand. */
  readonly slotRelease?: SlotRelease | null | undefined;
  /** CONTRACT §13: the dispatch's target is manual; a person does the work (absent for every other kind). */
  readonly manual?: ManualWork | undefined;
}

/**
 * A state a transition made and nothing has written yet: what the transitions since the state was read
 * changed, in order (the events the write means: `ChangeKind`), and the due time the state had when it
 * was read. Every transition returns one; the repository commits it on the version it read and hands
 * back the state alone, so the next transition starts a write of its own.
 */
export interface NextState extends DispatchState {
  readonly changes: readonly ChangeKind[];
  /** The due time of the state as read (null: a dispatch not stored yet). A result's watch keeps it: no index write when nothing else is due. */
  readonly dueAtRead: string | null;
}

/** A state some transition made in this write (its changes not written yet). */
export const isNextState = (state: DispatchState): state is NextState => 'changes' in state && 'dueAtRead' in state;

/** The state alone, without what made it: what a write leaves stored, and where the next write's transitions start. */
export function stateOnly(state: DispatchState): DispatchState {
  if (!isNextState(state)) return state;
  const { changes: _changes, dueAtRead: _dueAtRead, ...rest } = state;
  return rest;
}

/** CONTRACT §1 V3: how long a child whose parent is not recorded yet is held before it is blocked `unknown_parent`. */
export const PARENT_WAIT_SECONDS = 300;
/** CONTRACT §1: a task nests at most this many levels (the task object is level 1). dispatch/message.ts says how a message is held to it. */
export { MAX_TASK_DEPTH } from '@dispatch-ledger/protocol';

/** Final statuses: a run that reached one never changes again. */
export const TERMINAL_STATUSES: ReadonlySet<TargetRunStatus> = new Set(['completed', 'failed', 'cancelled']);
export const isTerminal = (status: string | null): boolean => status !== null && TERMINAL_STATUSES.has(status as TargetRunStatus);

/**
 * Whether the dispatch is final, so its retention has started: blocked or cancelled, a final run whose
 * evidence is settled, or a manual dispatch whose result a person attested (nothing else will ever
 * happen to it). Until then it never expires, however long it takes.
 */
export function retentionStarted(state: DispatchState): boolean {
  if (state.phase === 'blocked' || state.phase === 'cancelled') return true;
  if (state.phase === 'submitted') return isTerminal(state.execution.status) && state.evidence.outcome !== 'pending';
  return !!state.manual?.resultAttestation;
}

export type ResultDelivery = 'inject' | 'after_turn';
export type ResultDropReason = 'attempts' | 'expired' | 'superseded';

/** Where a final event's `result.body` was stored (before the state write that refers to it). */
export interface ResultBodyRef {
  /** The seq of the final event that carried it: the body record's key. */
  readonly seq: number;
  readonly bytes: number;
  /** Above the inline limit: kept once in the blob store, the record holds a preview and the ref. */
  readonly spilled: boolean;
  /**
   * The body's content digest, part of its record's and object's keys: two reports of one seq with
   * different bodies each store their own, and the state names the one it recorded. Absent on bodies
   * stored before it existed (keyed by the seq alone).
   */
  readonly digest?: string | undefined;
}

/**
 * The durable result of one attempt (CONTRACT §10), kept in the state item so it is created in the very
 * write that settles the attempt. Claims, acks and releases are named transitions like any other.
 */
export interface ResultRecord {
  readonly id: string;
  readonly attempt: number;
  readonly state: ResultState;
  readonly readyAt: string;
  /** Releases and lapsed leases so far. */
  readonly deliveryAttempts: number;
  readonly claimToken: string | null;
  readonly leaseUntil: string | null;
  readonly deliveredAt: string | null;
  /** Who acknowledged it (the caller's principal, or the origin locally). */
  readonly deliveredBy: string | null;
  readonly droppedReason: ResultDropReason | null;
  readonly droppedAt: string | null;
}

/** `nativeStatus` as the view and the events show it: the target's own word where it gave one (CONTRACT V3 §2). */
export const nativeStatusOf = (execution: Pick<Execution, 'nativeStatus' | 'nativeDetail'>): string | null => execution.nativeDetail ?? execution.nativeStatus;

export const NO_EXECUTION: Execution = {
  status: null,
  nativeStatus: null,
  monitorStatus: null,
  lastActivityAt: null,
  completedAt: null,
  pendingApproval: null,
  result: null,
};

const MAX_REASON = 300;

/** `code: detail`, bounded and printable: a reason is shown to people and stored in small items. */
export function blockedReason(code: BlockedCode, detail: string): string {
  const clean = printable(detail);
  return clip(clean ? `${code}: ${clean}` : code, MAX_REASON);
}
