/**
 * The records the ledger keeps besides the hot state (shared/dispatch/state.ts): what each one holds,
 * in the domain's words. The storage port (shared/ledger/port.ts) reads and writes them; how each is
 * stored is the adapters' business (docs/architecture.md "Items").
 */
import type { DispatchState, InlineCheck, ResultRecord } from './state.js';
import type { FieldError, UnreadableReason } from './message.js';

/**
 * The accepted message: written once, first, as the idempotency anchor of a dispatchId (conditional on
 * its absence), holding the content hash and the task payload (or its S3 reference when large).
 */
export interface AcceptedMessage {
  readonly dispatchId: string;
  readonly origin: string;
  readonly contentHash: string;
  readonly messageId: string;
  readonly senderId: string | null;
  readonly receivedAt: string;
  /** Until when the writer of this record is presumed to be submitting it (a duplicate waits, then takes over). */
  readonly claimUntil: string;
  /**
   * Which delivery holds the claim: a token of its own, drawn when it wrote or renewed the claim. A write
   * whose answer was lost is told from another delivery's by it, never by the clock (two deliveries of
   * one message can read the same millisecond). Absent on anchors written before it existed.
   */
  readonly claimBy?: string | undefined;
  readonly content:
    | {
        readonly valid: true;
        readonly target: string;
        /** The task inline, or null when it was spilled to the blob store under `taskRef`. */
        readonly task: Readonly<Record<string, unknown>> | null;
        readonly taskRef: string | null;
        /** A bounded preview of a spilled task (null when the task is inline). */
        readonly taskPreview: string | null;
        readonly taskBytes: number;
        readonly expectedEvidence: readonly string[];
        readonly deliveryMode: 'callback' | 'detached';
        readonly timeouts: DispatchState['timeouts'];
        readonly parentDispatchId: string | null;
        readonly maxHops: number;
        /** CONTRACT v2 §1 (absent on records written before v2: the defaults). */
        readonly resultDelivery?: 'inject' | 'after_turn';
        readonly notBefore?: string | null;
        readonly priority?: number;
        readonly traceparent?: string | null;
      }
    | {
        readonly valid: false;
        readonly target: string | null;
        readonly errors: readonly FieldError[];
        /** The original body when small; else a preview, the rest under `bodyRef` in the blob store. */
        readonly bodyPreview: string;
        readonly bodyRef: string | null;
        readonly bodyBytes: number;
      };
}

/** A message that did not become a dispatch (CONTRACT §1 "rejection"), listed by `GET /rejections`. */
export interface Rejection {
  readonly messageId: string;
  readonly at: string;
  readonly reason: UnreadableReason | 'origin_not_allowed' | 'conflict';
  readonly dispatchId: string | null;
  readonly origin: string | null;
  readonly senderId: string | null;
  readonly bodyPreview: string;
  readonly bodyRef: string | null;
  readonly bodyBytes: number;
}

/**
 * Who else a rejection is shown to besides the operator (CONTRACT §15 v3), as the intake decides it:
 * `origin` — the message's origin could be read and its sender may speak for it, so it is that origin's
 * own refused message (`GET /origins/{origin}/rejections`); `dispatch` — it also named a dispatch of that
 * very origin (the owner's view lists it among `conflicts`).
 */
export interface RejectionAudience {
  readonly origin: boolean;
  readonly dispatch: boolean;
}

/** One of an origin's own refused messages, as that origin is told (never anything of another origin's dispatch). */
export interface OriginRejection {
  readonly messageId: string;
  readonly at: string;
  readonly reason: Rejection['reason'];
  /** The dispatchId the message named, when one could be read. */
  readonly dispatchId: string | null;
  readonly origin: string;
  /** The message's own body, bounded (PREVIEW_CHARS). */
  readonly bodyPreview: string;
  readonly bodyBytes: number;
}

/** A refused message of a dispatch's own origin that named its id: the view's `conflicts`. */
export interface Refusal {
  readonly messageId: string;
  readonly at: string;
  readonly reason: Rejection['reason'];
}

/** A run event that arrived from a run the dispatch no longer follows. */
export interface LateEvent {
  readonly dispatchId: string;
  readonly runId: string;
  readonly seq: number;
  readonly type: string;
  readonly at: string;
}

/**
 * The platform's own post-condition check of one attempt's evidence (CONTRACT §5), written once when
 * it reaches a final outcome. Its stream record publishes Dispatch Handled or Dispatch Orphaned.
 */
export interface EvidenceCheck {
  readonly dispatchId: string;
  readonly origin: string;
  readonly target: string;
  readonly runId: string;
  readonly attempt: number;
  readonly outcome: 'handled' | 'orphan_no_delivery' | 'unverified';
  readonly expected: readonly string[];
  readonly found: readonly string[];
  readonly missing: readonly string[];
  readonly invalid: readonly string[];
  readonly checkedAt: string;
  /** Each file found: its SHA-256 and size as checked — sealed: a later upload of the ref is refused. */
  readonly files: readonly EvidenceFile[];
  /** Why the check could not run, when the outcome is `unverified` for that reason. */
  readonly error: string | null;
}

/** What readers of a settled check use (the view, a claimed result, an upload's seal), wherever it is recorded. */
export type SettledCheck = Pick<EvidenceCheck, 'missing' | 'invalid' | 'files'>;

export interface EvidenceFile {
  readonly ref: string;
  readonly sha256: string;
  readonly bytes: number;
  readonly checkedAt: string;
}

/**
 * Which bytes an evidence ref holds now (CONTRACT §2 PUT evidence): each upload puts its bytes once,
 * immutable, under a key named by their hash (`OBJECTS.evidence`), then records this pointer — the
 * latest upload wins until the check seals one. The check reads the pointers and hashes the bytes they
 * name itself: the pointer's hash is a claim, never the seal.
 */
export interface EvidenceUpload {
  readonly dispatchId: string;
  readonly attempt: number;
  readonly ref: string;
  readonly sha256: string;
  readonly bytes: number;
  readonly at: string;
}

/** `LedgerStore.getEvidenceBasis`: the check's inputs other than the files and their pointers. */
export interface EvidenceBasis {
  readonly message: AcceptedMessage | undefined;
  readonly check: EvidenceCheck | undefined;
  /** Undefined when a mark could not be decoded: the check reads them itself, and a failure there is the check's. */
  readonly marks: EvidenceMark[] | undefined;
}

/** An owner's verdict on one evidence file of an attempt (CONTRACT §2 evidence-status); the latest wins. */
export interface EvidenceMark {
  readonly dispatchId: string;
  readonly attempt: number;
  readonly ref: string;
  readonly status: 'valid' | 'invalid' | 'superseded' | 'rejected';
  readonly reason: string;
  readonly at: string;
}


/**
 * What a redispatch ended: the attempt's run (if it had one), its receipts and last execution leave
 * the hot state (which stays small) and are kept here, one item per redispatch — none is forgotten,
 * and a superseded run stays answerable however many redispatches ago it was.
 */
export interface PastAttempt {
  readonly dispatchId: string;
  readonly attempt: number;
  readonly runId: string | null;
  readonly receipts: readonly DispatchState['receipts'][number][];
  readonly execution: DispatchState['execution'];
  readonly endedAt: string;
  /** Why it ended: the redispatch's reason, and whether its run was superseded while it may have been active. */
  readonly reason: string;
  readonly superseded: boolean;
  /** The state version this record was taken from: a newer record of the attempt replaces an older one. */
  readonly stateVersion: number;
  /** The attempt's result, as it ended (a live one dropped `superseded`). */
  readonly result?: ResultRecord | null | undefined;
  /** The attempt's settled evidence check, when its state carried it (else it is the attempt's `CHECK#` item). */
  readonly check?: InlineCheck | undefined;
}

/** What a redispatch ends, as its use case decides it: the repository adds the version it ended at (`stateVersion`) when it commits it. */
export type EndedAttempt = Omit<PastAttempt, 'stateVersion'>;

/** A final event's `result.body`, or (spilled) its preview and blob key; written before the state that refers to it. */
export interface ResultBody {
  readonly dispatchId: string;
  readonly attempt: number;
  readonly seq: number;
  readonly bytes: number;
  /** The body's JSON text when inline; null when spilled. */
  readonly json: string | null;
  readonly preview: string | null;
  readonly bodyRef: string | null;
  readonly at: string;
  /** Its content digest (ResultBodyRef.digest), part of its key; absent on bodies stored before it existed. */
  readonly digest?: string | undefined;
}

/**
 * The task token a state machine's execution waits on for an approval (CONTRACT §17), kept apart from
 * the dispatch, in a partition of its own (never published, never listed), under the approval id the
 * ledger chose: only the target adapter reads it, to answer the decision, and then erases it
 * (`decidedAt` set, the token gone). It never appears in a view, an event or a log.
 */
export interface ApprovalTokenRecord {
  readonly dispatchId: string;
  readonly attempt: number;
  readonly runId: string;
  readonly approvalId: string;
  /** Absent once the decision was sent: a used token is kept by no one. */
  readonly taskToken?: string;
  readonly at: string;
  /** When the decision was sent (the request, redelivered, then asks nothing again). */
  readonly decidedAt?: string;
}

/** A lambda run's failure as Lambda's on-failure destination reported it, after its own retries (CONTRACT §12). */
export interface LambdaFailureRecord {
  readonly dispatchId: string;
  readonly attempt: number;
  readonly runId: string;
  readonly errorType: string;
  readonly errorMessage: string;
  /** Lambda's request id of the failed invocation, and why it gave up (`RetriesExhausted`, `EventAgeExceeded`). */
  readonly requestId: string;
  readonly condition: string;
  readonly at: string;
}

/** Per-origin delivery settings (CONTRACT §10: set in the principal registry; defaults 5 and 48). */
export interface OriginSettings {
  readonly maxDeliveryAttempts: number;
  readonly resultTtlHours: number;
}
export const DEFAULT_ORIGIN_SETTINGS: OriginSettings = { maxDeliveryAttempts: 5, resultTtlHours: 48 };
/** The most an origin's settings may be (the registry, `ledger registry origin` and `addOrigin` refuse more). */
export const MAX_ORIGIN_SETTINGS: OriginSettings = { maxDeliveryAttempts: 100, resultTtlHours: 30 * 24 };
/** The longest lease one claim or renewal takes (CONTRACT §10): the protocol's bound. */
export { MAX_LEASE_SECONDS } from '@dispatch-ledger/protocol';
