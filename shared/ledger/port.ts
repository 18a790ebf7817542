import type { OperatorReceipt } from '../dispatch/receipts.js';
import type { ManualAttestation } from '../dispatch/manual.js';
import type { DispatchState, NextState, ResultRecord } from '../dispatch/state.js';
import type { AttentionKind } from '../dispatch/attention.js';
import type { TargetPort, TargetRegistration } from '../targets/port.js';
import type { RetryPolicy } from '../dispatch/retry.js';
import type { SlotShard, WaitingEntry } from '../dispatch/slots.js';
import type { Counts } from '../dispatch/counts.js';
import type { DispatchFilter } from '../dispatch/dispatch-filter.js';
import type {
  AcceptedMessage,
  EvidenceBasis,
  EvidenceCheck,
  EvidenceMark,
  EvidenceUpload,
  LambdaFailureRecord, ApprovalTokenRecord,
  LateEvent,
  OriginRejection,
  OriginSettings,
  PastAttempt,
  Refusal,
  Rejection,
  RejectionAudience,
  ResultBody,
} from '../dispatch/records.js';

/** The storage ports: what the use cases ask of the ledger's table and blob store (the records they hold: ../dispatch/records.ts). */
export type PutOutcome<T> = { readonly kind: 'written' } | { readonly kind: 'exists'; readonly existing: T };
export type UpdateOutcome = { readonly kind: 'updated' } | { readonly kind: 'conflict' };
/**
 * A dispatch's state as the ledger holds it: the state, and beside it the version every write to it is
 * conditioned on (the repository's envelope: the version is never the state's own).
 */
export interface StoredState {
  readonly state: DispatchState;
  readonly version: number;
}

/** The version of a dispatch not stored yet: its first write creates it (version 1). */
export const NOT_STORED = 0;

/** A state built in memory and never stored (a new dispatch), as the envelope its first write starts from. */
export const notStored = (state: DispatchState): StoredState => ({ state, version: NOT_STORED });

/** A state write: committed, or someone changed the dispatch first (`existing`: what a failed create found). */
export type CommitOutcome =
  | { readonly kind: 'committed' }
  | { readonly kind: 'conflict'; readonly existing?: DispatchState | undefined }
  /** A write taking a slot (CONTRACT §11) found its shard at its cap: nothing was written. */
  | { readonly kind: 'slot_full' };


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
  /** The same read, with the version a write is conditioned on: what a writer reads. */
  getStored(dispatchId: string): Promise<StoredState | undefined>;
  /**
   * Writes `next` as the next version of `from` (a state never stored, version 0: creates it), conditioned
   * on the version read and as the state machine allows (`writeCondition`, ledger/repository.ts): an
   * illegal transition throws before anything is sent.
   * `ended`: the attempt a redispatch ends, kept in the same transaction — both are written or neither,
   * so a redispatch that loses its fence (or dies) leaves no record of an attempt that did not end.
   */
  commit(from: StoredState, next: NextState, ended?: PastAttempt): Promise<CommitOutcome>;

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
  getStateWithUploads(dispatchId: string): Promise<{ readonly stored: StoredState | undefined; readonly uploads: EvidenceUpload[] | undefined }>;
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
  /**
   * Keeps the runtime's token an approval waits on — a state machine's task token, a durable function's
   * callback id (CONTRACT §17) — apart from the dispatch (first record stands: a redelivery changes nothing).
   */
  putApprovalToken(token: ApprovalTokenRecord): Promise<PutOutcome<ApprovalTokenRecord>>;
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
  commitAll(writes: ReadonlyArray<{ readonly from: StoredState; readonly next: NextState }>): Promise<CommitOutcome>;
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
