import type { OperatorReceipt } from '../dispatch/receipts.js';
import type { ManualAttestation } from '../dispatch/manual.js';
import type { DispatchState, InlineCheck, ResultRecord } from '../dispatch/state.js';
import type { AttentionKind } from '../dispatch/attention.js';
import type { TargetPort, TargetRegistration } from '../targets/port.js';
import type { RetryPolicy } from '../dispatch/retry.js';
import type { FieldError, UnreadableReason } from '../dispatch/message.js';
import type { SlotShard, WaitingEntry } from '../dispatch/slots.js';
import type { Counts } from '../dispatch/counts.js';
import type { DispatchFilter } from '../dispatch/dispatch-filter.js';

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

export type PutOutcome<T> = { readonly kind: 'written' } | { readonly kind: 'exists'; readonly existing: T };
export type UpdateOutcome = { readonly kind: 'updated' } | { readonly kind: 'conflict' };
/** A state write: committed, or someone changed the dispatch first (`existing`: what a failed create found). */
export type CommitOutcome =
  | { readonly kind: 'committed' }
  | { readonly kind: 'conflict'; readonly existing?: DispatchState | undefined }
  /** A write taking a slot (CONTRACT §11) found its shard at its cap: nothing was written. */
  | { readonly kind: 'slot_full' };

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

export interface Page<T> {
  readonly items: readonly T[];
  /** Opaque; pass back to get the next page. Null on the last page. */
  readonly cursor: string | null;
}

/** One entry of the due index: the dispatch and the due time the index holds for it. */
export interface DueEntry {
  readonly dispatchId: string;
  readonly dueAt: string;
}

/** A pagination cursor that the ledger did not hand out for this list (forged, truncated, another list's): a 400. */
export class InvalidCursorError extends Error {
  override readonly name = 'InvalidCursorError';
  constructor() {
    super('the cursor is not one this API returned');
  }
}

/** A stored record that does not have the shape its key says: an audit failure, reported, never cast. */
export class CorruptItemError extends Error {
  override readonly name = 'CorruptItemError';
  constructor(
    readonly key: string,
    readonly problem: string,
  ) {
    super(`stored item ${key} failed decoding: ${problem}`);
  }
}

/**
 * What only some functions write: intake's accepted message, claims and rejections; the monitor's
 * deferrals; the failures function's records; the operator CLI's registrations and repairs. Kept out of
 * `LedgerStore`, so the API's adapter (`LedgerTableCore`) and its bundle carry none of them.
 */
export interface LedgerWrites {
  putAcceptedMessage(message: AcceptedMessage): Promise<PutOutcome<AcceptedMessage>>;
  /**
   * Puts the registration last written in force when its caps were not written for it (its writer died
   * between the two writes); writes nothing otherwise. The monitor calls it for each limited target each tick.
   */
  alignSlotCaps(target: string): Promise<void>;
  /** Takes over a stale claim; false when someone else changed it first. */
  /** Takes over a lapsed claim for the delivery `claimBy`: only from the claim read, or its own renewal sent again. */
  renewClaim(dispatchId: string, expectedClaimUntil: string, claimUntil: string, claimBy: string): Promise<boolean>;
  /** Keeps an ended attempt record outside a redispatch (fixtures and repairs); idempotent per record. */
  archiveAttempt(past: PastAttempt): Promise<void>;
  /**
   * Records a rejection once (keyed by the SQS message id), and — for `audience` — its entry in the
   * origin's own list and among the dispatch's refusals, written with the stored rejection's time, so a
   * redelivery rewrites the same items.
   */
  putRejection(rejection: Rejection, audience?: RejectionAudience): Promise<PutOutcome<Rejection>>;
  /**
   * Moves a due dispatch the monitor could not act on (it threw: a record that fails decoding, a
   * store error) to `until`, so it cannot hold the head of its due shard tick after tick.
   */
  deferDue(due: DueEntry, until: Date): Promise<void>;
  /** Registers a target; with `maxConcurrentRuns`, its slot shards' caps are set in the same call. */
  putTarget(target: TargetRegistration): Promise<void>;
  putOriginSettings(origin: string, settings: Partial<OriginSettings>): Promise<void>;
  /** Keeps what Lambda's on-failure destination said about an attempt's run (first record stands). */
  putLambdaFailure(failure: LambdaFailureRecord): Promise<PutOutcome<LambdaFailureRecord>>;
}

/** The whole ledger table: what the intake, monitor and failures functions (and the CLI) are given. */
export type LedgerStoreWithWrites = LedgerStore & LedgerWrites;

/** Everything the API's use cases ask of the ledger table. One adapter implements it; tests may fake it. */
/** How a change of a target's caps is conditioned (`syncSlotCaps`). */
export interface SlotCapsWrite {
  /** The registration revision the caps are written for: never over caps written for a later one. */
  readonly rev?: number | undefined;
  /** Only for a target with no slot shards yet: caps another writer set are kept (an admission's first look). */
  readonly onlyIfNone?: boolean | undefined;
}

export interface LedgerStore {
  getAcceptedMessage(dispatchId: string): Promise<AcceptedMessage | undefined>;

  /** Strongly consistent read of the hot state. */
  getState(dispatchId: string): Promise<DispatchState | undefined>;
  /**
   * Writes `next` in place of `from` (a state never stored: creates it), conditioned as the state
   * machine derives it (`writeCondition`): an illegal transition throws before anything is sent.
   * `ended`: the attempt a redispatch ends, kept in the same transaction — both are written or neither,
   * so a redispatch that loses its fence (or dies) leaves no record of an attempt that did not end.
   */
  commit(from: DispatchState, next: DispatchState, ended?: PastAttempt): Promise<CommitOutcome>;

  /** Every ended attempt of a dispatch, oldest first (strongly consistent). */
  listPastAttempts(dispatchId: string): Promise<PastAttempt[]>;

  putEvidenceMark(mark: EvidenceMark): Promise<void>;
  listEvidenceMarks(dispatchId: string, attempt: number): Promise<EvidenceMark[]>;

  /** Points an evidence ref at the upload that holds it now (its bytes are in the blob store first); the latest wins. */
  putEvidenceUpload(upload: EvidenceUpload): Promise<void>;
  /** Every ref's current upload of an attempt (strongly consistent). */
  listEvidenceUploads(dispatchId: string, attempt: number): Promise<EvidenceUpload[]>;

  /**
   * Records the final evidence check of an attempt in an item of its own, once (the first writer's
   * outcome stands) — only when it does not fit the settled state (`evidence.check`), which records it otherwise.
   */
  putEvidenceCheck(check: EvidenceCheck): Promise<PutOutcome<EvidenceCheck>>;
  getEvidenceCheck(dispatchId: string, attempt: number): Promise<EvidenceCheck | undefined>;
  /**
   * What an evidence check reads besides the files, strongly consistent: the accepted message (its
   * expected refs), the attempt's check item if one was recorded, and the attempt's marks.
   */
  getEvidenceBasis(dispatchId: string, attempt: number): Promise<EvidenceBasis>;
  /**
   * The hot state with its current attempt's uploads, strongly consistent, as one read: what a
   * completion needs before it settles its evidence in the same write. `uploads` is undefined when a
   * pointer could not be decoded: the state is still read (the completion is recorded), and the check
   * reads the pointers itself, where a failure is the check's (`unverified` at the deadline).
   */
  getStateWithUploads(dispatchId: string): Promise<{ readonly state: DispatchState | undefined; readonly uploads: EvidenceUpload[] | undefined }>;
  /**
   * An eventually consistent read of the hot state: only for an answer a view up to about a second
   * old cannot make wrong, and never for the state a write is conditioned on.
   */
  peekState(dispatchId: string): Promise<DispatchState | undefined>;

  /**
   * Records an operator receipt once per dispatch and receiptId (never touching the hot state); an
   * existing one is returned as stored, so the caller can tell an identical retry from a change.
   */
  putOperatorReceipt(receipt: OperatorReceipt): Promise<PutOutcome<OperatorReceipt>>;
  /** Every operator receipt of a dispatch, as stored (strongly consistent; unvalidated: the view audits them). */
  listOperatorReceipts(dispatchId: string): Promise<OperatorReceipt[]>;
  /** CONTRACT §15 v3: the newest `limit` refused messages of `origin` that named `dispatchId`, newest first (one query). */
  listRefusals(dispatchId: string, origin: string, limit: number): Promise<Refusal[]>;

  /**
   * Records a person's attestation about a manual dispatch (CONTRACT §13) once per dispatch and
   * attestationId, in an item of its own; an existing one is returned as stored (an identical retry or a change).
   */
  putManualAttestation(attestation: ManualAttestation): Promise<PutOutcome<ManualAttestation>>;
  /** Every manual attestation of a dispatch, as stored (strongly consistent; unvalidated: the view audits them). */
  listManualAttestations(dispatchId: string): Promise<ManualAttestation[]>;

  /** Records an event of a superseded run: kept for the record, never applied. Idempotent per run and seq. */
  recordLateEvent(late: LateEvent): Promise<void>;


  getTarget(name: string): Promise<TargetRegistration | undefined>;

  /** CONTRACT §11: a target's slot shards as stored (strongly consistent); none when it never had a limit. */
  slotShards(target: string): Promise<SlotShard[]>;
  /**
   * A change of the target's limit: its shards' caps allotted from what each holds (`allotSlotCaps`:
   * each ≥ its held, summing to `limit`), or drained (every cap 0) while more runs are in flight than
   * `limit`; no limit: every cap 0 and the limit is off. Records the target among the limited ones.
   */
  syncSlotCaps(target: string, limit: number | undefined, options?: SlotCapsWrite): Promise<void>;
  /** Allots a drained (or unevenly allotted) target's caps again once what it holds allows (`wantsAllotment`); else writes nothing. */
  settleSlotCaps(target: string): Promise<void>;
  /** Targets that have (or had) a concurrency limit: the monitor admits their waiting dispatches each tick. */
  limitedTargets(): Promise<string[]>;
  /**
   * The dispatch to admit next for `target` (the order of `nextAdmission`), from the wait index
   * (eventually consistent: the caller re-reads it by key; `exclude` skips entries found stale).
   */
  nextWaiting(target: string, lastOrigin: string | null, exclude: ReadonlySet<string>): Promise<WaitingEntry | undefined>;
  /** How many dispatches wait for a slot of `target`, counted up to `max`. */
  countWaiting(target: string, max: number): Promise<number>;

  /** The origin's delivery settings (the deploy-time registry first, then the table; else the defaults). */
  getOriginSettings(origin: string): Promise<OriginSettings>;
  getLambdaFailure(dispatchId: string, attempt: number): Promise<LambdaFailureRecord | undefined>;
  /** Keeps a final event's result body (idempotent per dispatch, attempt and seq). */
  putResultBody(body: ResultBody): Promise<void>;
  getResultBody(dispatchId: string, attempt: number, seq: number, digest?: string): Promise<ResultBody | undefined>;
}

/**
 * The due index as the monitor works through it (CONTRACT §14): shard by shard, each shard under a
 * claim of one tick, page by page. The monitor's alone (the other functions never read it).
 */
export interface DueIndex {
  /** The due index's shards (the monitor works on each under a claim). */
  readonly dueShards: readonly string[];
  /**
   * What is due (`dueAt` ≤ now) in one shard of the due index, the longest due first, one page at a
   * time: the next page is read only when asked for (eventually consistent: re-read each by key).
   */
  duePages(shard: string, now: Date, pageSize: number): AsyncGenerator<DueEntry[], void, undefined>;
  /**
   * Takes a due shard for one monitor tick until `until`, when it is free or its lease lapsed by `now`
   * (the clock at this write); false when another tick holds it.
   */
  claimDueShard(shard: string, holder: string, now: Date, until: Date): Promise<boolean>;
  /** Gives a due shard back: only the holder's own claim (one taken over after a lapse stays). */
  releaseDueShard(shard: string, holder: string): Promise<void>;
}

/** Which of an origin's inbox entries to read (`InboxStore.inboxEntries`). */
export type InboxRange =
  | { readonly range: 'claimable'; readonly now: Date; readonly injectOnly: boolean; readonly pageSize: number }
  | { readonly range: 'pending' | 'claimed'; readonly after?: string | undefined; readonly pageSize: number };

/** What the results inbox reads and writes beyond single states (CONTRACT §10). */
export interface InboxStore {
  /**
   * Dispatch ids with a result out in the origin's inbox, across its shards, read lazily page by page
   * (eventually consistent: each is re-read by key before it is claimed). `claimable`: the pending
   * results, oldest ready first, then the leases lapsed by `now` — never a lease that lives, so a claim
   * reads nothing of what is held (CONTRACT §10 V3); `pending` / `claimed`: the list of that state
   * (claimed: by when the lease ends), after the position `after`.
   */
  inboxEntries(origin: string, options: InboxRange): AsyncIterable<{ readonly dispatchId: string; readonly at: string }>;
  /** Several state writes, all or none (a group claim): conflict when any condition fails. */
  commitAll(writes: ReadonlyArray<{ readonly from: DispatchState; readonly next: DispatchState }>): Promise<CommitOutcome>;
}

/** The lists the API pages through (read from the table's indexes: eventually consistent). */
export interface LedgerFeeds {
  listRejections(options: { limit: number; cursor?: string | undefined }): Promise<Page<Rejection>>;
  /** CONTRACT §15 v3 `GET /origins/{origin}/rejections`: that origin's own refused messages, newest first. */
  listOriginRejections(origin: string, options: { limit: number; cursor?: string | undefined }): Promise<Page<OriginRejection>>;
  listOriginDispatches(origin: string, options: { limit: number; cursor?: string | undefined; status?: string | undefined }): Promise<Page<DispatchState>>;
  /** An origin's dispatches that have a result (in `state`, if given), oldest first, read from its history. */
  listResults(origin: string, options: { readonly state: ResultRecord['state'] | undefined; readonly limit: number; readonly cursor?: string | undefined }): Promise<Page<DispatchState>>;
  /** Dispatches that need a person, across origins (eventually consistent index: a moment behind). */
  listAttention(options: { kind?: AttentionKind | undefined; limit: number; cursor?: string | undefined }): Promise<Page<DispatchState>>;
  /** CONTRACT §2 v2 `GET /dispatches`: every origin's dispatches, newest first, filtered (eventually consistent index). */
  listDispatches(options: { readonly limit: number; readonly cursor?: string | undefined; readonly filter?: DispatchFilter | undefined }): Promise<Page<DispatchState>>;
  /** CONTRACT §2 v2 `GET /counts`: what the ledger holds now, by phase, execution status and evidence outcome (kept by the publisher). */
  readCounts(): Promise<Counts>;
}

/** Large bodies and payloads: S3 in AWS (fauxqs locally). */
export interface BlobStore {
  put(key: string, body: string | Uint8Array, contentType: string): Promise<void>;
  getText(key: string): Promise<string>;
  /** The object's bytes; undefined when it does not exist. Throws when the store cannot be asked. */
  getBytes(key: string): Promise<Uint8Array | undefined>;
}

/**
 * What every use case that writes a dispatch and talks to its target needs (intake's first
 * submission aside): the monitor and the API's lifecycle routes share it.
 */
export interface DispatchWorkDeps {
  readonly store: LedgerStore;
  readonly blobs: BlobStore;
  readonly targetFor: (registration: TargetRegistration) => TargetPort;
  /** The ledger API's base URL, given to targets as `callbackUrl`. */
  readonly callbackUrl: string;
  readonly retryPolicy: RetryPolicy;
  readonly now: () => Date;
  /** How long an actor holds a dispatch while it calls the target; at least twice the target timeout. */
  readonly claimSeconds: number;
  /** How long a child whose parent is not recorded yet is held before it is blocked (CONTRACT §1 V3: at most, and by default, PARENT_WAIT_SECONDS). */
  readonly parentWaitSeconds?: number;
}
