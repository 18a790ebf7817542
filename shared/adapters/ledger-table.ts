import { ConditionalCheckFailedException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import {
  DeleteCommand,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
  type PutCommandInput,
  type QueryCommandInput,
  type UpdateCommandInput,
} from '@aws-sdk/lib-dynamodb';
import type { OperatorReceipt } from '../dispatch/receipts.js';
import { StoredManualAttestation, type ManualAttestation } from '../dispatch/manual.js';
import { validationProblems } from '../dispatch/receipts.js';
import { CorruptItemError } from '../ledger/port.js';
import type { DispatchState } from '../dispatch/state.js';
import { writeCondition } from '../dispatch/transitions/legal.js';
import { allotSlotCaps, compareOrigins, slotLimit, slotShardCaps, wantsAllotment, type SlotShard, type WaitingEntry } from '../dispatch/slots.js';
import type { CommitOutcome, SlotCapsWrite, DueEntry, DueIndex, LedgerStore, LedgerWrites, PutOutcome } from '../ledger/port.js';
import type { AcceptedMessage, EvidenceBasis, EvidenceCheck, EvidenceMark, EvidenceUpload, LambdaFailureRecord, LateEvent, OriginSettings, PastAttempt, Refusal, Rejection, RejectionAudience, ResultBody } from '../dispatch/records.js';
import type { Principal, PrincipalRegistry } from '../principals/principals.js';
import type { StaticRegistry } from './static-registry.js';
import type { TargetRegistration } from '../targets/port.js';
import { ttlCache } from '../ttl-cache.js';
import { batchReadAll } from './batch-read.js';
import {
  ANCHOR_RETENTION_FACTOR,
  checkOf,
  COLLECTION,
  isCheckKey,
  isMarkKey,
  isUploadKey,
  markOf,
  RANGE,
  uploadOf,
  principalOf,
  targetOf,
  dispatchIdOfKey,
  DUE_SHARD_KEYS,
  expiryOf,
  INDEX,
  KEY,
  messageItem,
  messageOf,
  lambdaFailureOf,
  originSettingsOf,
  resultBodyItem,
  resultBodyOf,
  operatorReceiptOf,
  writtenAttestationOf,
  pastAttemptItem,
  pastAttemptOf,
  rejectionItem,
  rejectionOf,
  originRejectionItem,
  refusalItem,
  refusalOf,
  slotShardOf,
  stateItem,
  WAIT_RANGE,
  waitingEntryOf,
  waitKeysOf,
  stateOf,
  TTL_ATTRIBUTE,
  withoutNulls,
  newWriteId,
  WRITE_ID_ATTRIBUTE,
  type Item,
} from './ledger-items.js';

export { CorruptItemError, decodeItem, DUE_SHARDS, dueShardOf, INDEX, LEDGER_TABLE_DEFINITION, TTL_ATTRIBUTE, type DecodedItem } from './ledger-items.js';

/** Access patterns of the ledger table; key shapes and item codecs live in `ledger-items.ts`. */

type TransactItem = NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']>[number];

const isUnknown = (state: DispatchState): boolean => state.execution.status === 'unknown';

/**
 * The slot counter updates a state write implies (CONTRACT §11), derived from the two versions — never
 * asked for by a caller: a slot taken (conditioned on the shard's own cap: a cached registration can
 * never let a run past it), given back, or its holder lost or regained sight of (the count of slots
 * unknown runs hold). Written in the same transaction as the state: both or neither, so no slot leaks.
 */
export function slotUpdates(tableName: string, from: DispatchState, next: DispatchState): { readonly items: TransactItem[]; readonly takes: boolean } {
  const taken = next.slot && !from.slot ? next.slot : undefined;
  const freed = from.slot && !next.slot ? from.slot : undefined;
  if (taken) {
    return {
      takes: true,
      items: [{
        Update: {
          TableName: tableName,
          Key: KEY.slotShard(next.target, taken.shard),
          // `takenAt`: a full shard became full at its last take or allotment (`slotTotals`' `fullSince`).
          UpdateExpression: 'SET lastOrigin = :origin, takenAt = :at ADD held :one',
          ConditionExpression: 'held < cap',
          ExpressionAttributeValues: { ':origin': next.origin, ':at': taken.at, ':one': 1 },
        },
      }],
    };
  }
  if (freed) {
    return {
      takes: false,
      items: [{
        Update: {
          TableName: tableName,
          Key: KEY.slotShard(from.target, freed.shard),
          UpdateExpression: isUnknown(from) ? 'ADD held :minus, unknownHeld :minus' : 'ADD held :minus',
          ExpressionAttributeValues: { ':minus': -1 },
        },
      }],
    };
  }
  if (from.slot && next.slot && isUnknown(from) !== isUnknown(next)) {
    return {
      takes: false,
      items: [{ Update: { TableName: tableName, Key: KEY.slotShard(next.target, next.slot.shard), UpdateExpression: 'ADD unknownHeld :delta', ExpressionAttributeValues: { ':delta': isUnknown(next) ? 1 : -1 } } }],
    };
  }
  return { takes: false, items: [] };
}

/** A put of one whole item, as `putItem` sends it: an `Item` always, and no legacy `Expected` (conditions are expressions). */
export type SinglePut = Omit<PutCommandInput, 'Expected' | 'Item'> & { readonly Item: Item };

const unmarshallItem = (item: NonNullable<ConditionalCheckFailedException['Item']>): Item => unmarshall(item);

const isConditionFailure = (error: unknown): error is ConditionalCheckFailedException => error instanceof ConditionalCheckFailedException;
/**
 * A state write that overlapped a redispatch's transaction on the same item: the SDK does not retry
 * it, and it is nothing but a lost race — a conflict the caller re-reads and decides again.
 */
const isTransactionConflict = (error: unknown): boolean => error instanceof Error && error.name === 'TransactionConflictException';


/**
 * The write of one operator receipt: one small item beside the state (never the hot state item), once
 * per dispatch and receiptId. First writer wins; a retry or a concurrent writer gets the stored receipt
 * back (ALL_OLD) to compare payload hashes.
 */
export function operatorReceiptPut(tableName: string, receipt: OperatorReceipt, retentionSeconds: number): SinglePut {
  return writtenOnce(tableName, KEY.operatorReceipt(receipt.dispatchId, receipt.receiptId), receipt, retentionSeconds);
}

/** A record people wrote (an operator receipt, a manual attestation) as its own item, once per key; the stored one back when it exists. */
function writtenOnce(tableName: string, key: { readonly pk: string; readonly sk: string }, record: { readonly recordedAt: string }, retentionSeconds: number): SinglePut {
  return onceOnly(tableName, { ...key, ...(withoutNulls(record) as Item), [TTL_ATTRIBUTE]: expiryOf(record.recordedAt, retentionSeconds) });
}

/** A put of an item that is written once: refused when its key exists, with the stored item back (ALL_OLD). */
const onceOnly = (tableName: string, item: Item): SinglePut => ({ TableName: tableName, Item: item, ConditionExpression: 'attribute_not_exists(pk)', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' });

/** Every operator receipt of a dispatch: its partition, sort keys with the receipt prefix, strongly consistent. */
export function operatorReceiptsQuery(tableName: string, dispatchId: string, startKey?: Record<string, unknown>): QueryCommandInput {
  return collectionQuery(tableName, COLLECTION.operatorReceipts(dispatchId), startKey);
}

/**
 * A manual attestation (CONTRACT §13), written once per dispatch and attestationId; the existing one
 * back when it was not. It must outlive the state it moved (whose retention starts only when a person
 * ends the wait), so it expires like the anchor: twice the retention.
 */
export function manualAttestationPut(tableName: string, attestation: ManualAttestation, retentionSeconds: number): SinglePut {
  return writtenOnce(tableName, KEY.manualAttestation(attestation.dispatchId, attestation.attestationId), attestation, retentionSeconds * ANCHOR_RETENTION_FACTOR);
}

/** One kind of item of a dispatch's partition, in sort-key order, strongly consistent. */
function collectionQuery(tableName: string, collection: { readonly pk: string; readonly prefix: string }, startKey?: Record<string, unknown>): QueryCommandInput {
  return {
    TableName: tableName,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
    ExpressionAttributeValues: { ':pk': collection.pk, ':prefix': collection.prefix },
    ConsistentRead: true,
    ExclusiveStartKey: startKey,
  };
}

/** Items read along with others, decoded; undefined when one is corrupt (its own read reports it where it is handled). */
function decodedOrUndefined<T>(items: readonly Item[], decode: (item: Item) => T): T[] | undefined {
  try {
    return items.map(decode);
  } catch (error) {
    if (error instanceof CorruptItemError) return undefined;
    throw error;
  }
}

/** A range of a dispatch's partition (`RANGE`), both ends included, strongly consistent. */
function rangeQuery(tableName: string, range: { readonly pk: string; readonly from: string; readonly to: string }): QueryCommandInput {
  return {
    TableName: tableName,
    KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
    ExpressionAttributeValues: { ':pk': range.pk, ':from': range.from, ':to': range.to },
    ConsistentRead: true,
  };
}

/**
 * The write of a state transition. Its condition is the state machine's (`writeCondition`): the version
 * and phase read, or, for a state never stored, that none exists — an illegal move throws before any
 * request is sent. Or the item is this very write (its write id): a write DynamoDB applied but whose
 * answer was lost is sent again by the SDK, and must succeed, not meet itself as another's conflict.
 */
export function statePut(tableName: string, from: DispatchState, next: DispatchState, retentionSeconds: number, inboxShards = 1): SinglePut {
  const condition = writeCondition(from, next);
  const w = newWriteId();
  return {
    TableName: tableName,
    Item: { ...stateItem(next, retentionSeconds, inboxShards), [WRITE_ID_ATTRIBUTE]: w },
    // The write itself, still as it wrote it: its id and its version (a writer of an earlier release keeps
    // an id it read, so the id alone could put this version back over that writer's newer one).
    ...(condition.create
      ? { ConditionExpression: 'attribute_not_exists(pk) OR (w = :w AND version = :n)', ExpressionAttributeValues: { ':w': w, ':n': next.version }, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' }
      : { ConditionExpression: '(version = :v AND phase = :p) OR (w = :w AND version = :n)', ExpressionAttributeValues: { ':w': w, ':n': next.version, ':v': condition.version, ':p': condition.phase } }),
  };
}

/** A state write (`statePut`) inside a transaction: the same item, condition and values. */
export const transactPut = ({ TableName, Item, ConditionExpression, ExpressionAttributeValues }: SinglePut): TransactItem => ({ Put: { TableName, Item, ConditionExpression, ExpressionAttributeValues } });

/**
 * One page of a due shard: `dueAt <= now`, the longest due first, from where the last page ended. The
 * index is eventually consistent; the monitor re-reads each entry by key. An entry the tick moves out
 * of the range does not move the position: a page never returns what an earlier page of the tick did.
 */
export function duePageQuery(tableName: string, shard: string, now: Date, pageSize: number, startKey?: Record<string, unknown>): QueryCommandInput {
  return {
    TableName: tableName,
    IndexName: INDEX.due,
    KeyConditionExpression: 'dueShard = :shard AND dueAt <= :now',
    ExpressionAttributeValues: { ':shard': shard, ':now': now.toISOString() },
    Limit: pageSize,
    ExclusiveStartKey: startKey,
  };
}

/**
 * A monitor tick's claim on a due shard (CONTRACT §14: a tick never overlaps its own work on a shard).
 * Timeline: tick A claims (until its invocation's end) → tick B's claim fails the condition and B skips
 * the shard → A releases (REMOVE holder) → the next claim succeeds. If A dies, its lease lapses: a claim
 * whose `now` (the clock at that write, never a tick's start) is past `leaseUntil` takes it over.
 */
export function dueShardClaimUpdate(tableName: string, shard: string, holder: string, now: Date, until: Date): UpdateCommandInput {
  return {
    TableName: tableName,
    Key: KEY.dueShardClaim(shard),
    UpdateExpression: 'SET holder = :holder, leaseUntil = :until',
    // The holder's own claim too: a claim whose answer was lost is sent again and must not meet itself as another's.
    ConditionExpression: 'attribute_not_exists(holder) OR leaseUntil < :now OR holder = :holder',
    ExpressionAttributeValues: { ':holder': holder, ':until': until.toISOString(), ':now': now.toISOString() },
  };
}

/** Ends a due shard's claim, only the holder's own (one taken over after a lapse is another tick's). */
export function dueShardReleaseUpdate(tableName: string, shard: string, holder: string): UpdateCommandInput {
  return {
    TableName: tableName,
    Key: KEY.dueShardClaim(shard),
    UpdateExpression: 'REMOVE holder, leaseUntil',
    ConditionExpression: 'holder = :holder',
    ExpressionAttributeValues: { ':holder': holder },
  };
}

/** Tries of one change of a limit's allotment lost to takes before it drains instead; tries of one settle. */
const ALLOT_ROUNDS = 4;
/** The registration item's revision: each `putTarget` writes the next one, and the caps record the one they were written for. */
const REGISTRATION_REV = 'registrationRev';
/** How long admissions reuse the targets' slot shard counts. */
const SHARD_COUNT_CACHE_MS = 30_000;

export interface LedgerTableOptions {
  readonly tableName: string;
  /** Seconds a final record is kept (CONTRACT §7: default 90 days). */
  readonly retentionSeconds: number;
  /** Deploy-time principals and targets, consulted before the table's own entries. */
  readonly registry?: StaticRegistry;
  /**
   * How long a target registration read from the table is reused: intake reads it for every message,
   * and registrations change rarely. A change is seen within this time. @default 0 (always read)
   */
  readonly targetCacheMs?: number;
  /** Partitions of each origin's inbox (CONTRACT §10; ~250 results/s each, claimed and acked). Only ever raise it. @default 1 */
  readonly inboxShards?: number;
  /** Waits between BatchGetItem rounds (tests pass one that does not). */
  readonly sleep?: (ms: number) => Promise<void>;
}

/** The DynamoDB implementation of the ledger's store, principal registry included. */
/**
 * The ledger table as the API uses it (`LedgerStore`): every read, the state machine's writes, the
 * evidence and receipt records. `LedgerTable` adds the writes only other functions make
 * (`LedgerWrites`), so the API's bundle carries none of them.
 */
export class LedgerTableCore implements LedgerStore, PrincipalRegistry {
  constructor(
    protected readonly db: DynamoDBDocumentClient,
    protected readonly options: LedgerTableOptions,
  ) {}

  protected get table(): string {
    return this.options.tableName;
  }

  /** One item by its key, or undefined; strongly consistent when `consistent`. */
  protected async getItem(Key: Record<string, unknown>, consistent = false): Promise<Item | undefined> {
    return (await this.db.send(new GetCommand({ TableName: this.table, Key, ConsistentRead: consistent }))).Item;
  }

  async getAcceptedMessage(dispatchId: string): Promise<AcceptedMessage | undefined> {
    const Item = await this.getItem(KEY.message(dispatchId), true);
    return Item ? messageOf(Item) : undefined;
  }

  async getState(dispatchId: string): Promise<DispatchState | undefined> {
    const Item = await this.getItem(KEY.state(dispatchId), true);
    return Item ? stateOf(Item) : undefined;
  }

  async commit(from: DispatchState, next: DispatchState, ended?: PastAttempt): Promise<CommitOutcome> {
    const put = statePut(this.table, from, next, this.options.retentionSeconds, this.options.inboxShards);
    const slots = slotUpdates(this.table, from, next);
    if (ended || slots.items.length > 0) return this.commitInTransaction(put, ended, slots);
    try {
      await this.putItem(put);
      return { kind: 'committed' };
    } catch (error) {
      if (isConditionFailure(error)) return { kind: 'conflict', existing: error.Item ? stateOf(unmarshallItem(error.Item)) : undefined };
      if (isTransactionConflict(error)) return { kind: 'conflict' };
      throw error;
    }
  }

  /**
   * The state write with what must commit with it, in one transaction (2 × the write units: only on a
   * redispatch, which keeps the ended attempt's record, and on a slot taken or given back).
   */
  protected async commitInTransaction(put: SinglePut, ended: PastAttempt | undefined, slots: ReturnType<typeof slotUpdates>): Promise<CommitOutcome> {
    const items: TransactItem[] = [
      transactPut(put),
      ...(ended ? [{ Put: { TableName: this.table, Item: pastAttemptItem(ended, this.options.retentionSeconds) } }] : []),
      ...slots.items,
    ];
    const slotIndex = items.length - slots.items.length;
    // Two admissions racing for one shard collide as a TransactionConflict on the counter: tried again.
    for (let round = 0; ; round += 1) {
      try {
        await this.db.send(new TransactWriteCommand({ TransactItems: items }));
        return { kind: 'committed' };
      } catch (error) {
        const reasons = error instanceof TransactionCanceledException ? (error.CancellationReasons ?? []).map((reason) => reason.Code) : undefined;
        if (!reasons) {
          if (isTransactionConflict(error)) return { kind: 'conflict' };
          throw error;
        }
        // The state's condition failed, or another write to it was under way: a lost race either way.
        if (reasons[0] === 'ConditionalCheckFailed' || reasons[0] === 'TransactionConflict') return { kind: 'conflict' };
        if (slots.takes && reasons[slotIndex] === 'ConditionalCheckFailed') return { kind: 'slot_full' };
        if (reasons.slice(slotIndex).includes('TransactionConflict') && round < 3) continue;
        if (reasons.includes('TransactionConflict')) return slots.takes ? { kind: 'slot_full' } : { kind: 'conflict' };
        throw error;
      }
    }
  }

  async listPastAttempts(dispatchId: string): Promise<PastAttempt[]> {
    return this.listAll(collectionQuery(this.table, COLLECTION.pastAttempts(dispatchId)), pastAttemptOf);
  }

  async putEvidenceMark(mark: EvidenceMark): Promise<void> {
    await this.putLatest(KEY.evidenceMark(mark.dispatchId, mark.attempt, mark.ref), mark);
  }

  async listEvidenceMarks(dispatchId: string, attempt: number): Promise<EvidenceMark[]> {
    return this.listAll(collectionQuery(this.table, COLLECTION.evidenceMarks(dispatchId, attempt)), markOf);
  }

  async putEvidenceUpload(upload: EvidenceUpload): Promise<void> {
    await this.putLatest(KEY.evidenceUpload(upload.dispatchId, upload.attempt, upload.ref), upload);
  }

  /** A per-ref record of an attempt's evidence whose latest write wins, kept for the retention after it. */
  protected async putLatest(key: { readonly pk: string; readonly sk: string }, record: { readonly at: string }): Promise<void> {
    await this.putItem({ TableName: this.table, Item: { ...key, ...record, [TTL_ATTRIBUTE]: expiryOf(record.at, this.options.retentionSeconds) } });
  }

  async listEvidenceUploads(dispatchId: string, attempt: number): Promise<EvidenceUpload[]> {
    return this.listAll(collectionQuery(this.table, COLLECTION.evidenceUploads(dispatchId, attempt)), uploadOf);
  }

  async putEvidenceCheck(check: EvidenceCheck): Promise<PutOutcome<EvidenceCheck>> {
    const Item = { ...KEY.evidenceCheck(check.dispatchId, check.attempt), ...(withoutNulls(check) as Item), [TTL_ATTRIBUTE]: expiryOf(check.checkedAt, this.options.retentionSeconds) };
    return this.putOnce(onceOnly(this.table, Item), checkOf);
  }

  async getEvidenceCheck(dispatchId: string, attempt: number): Promise<EvidenceCheck | undefined> {
    const Item = await this.getItem(KEY.evidenceCheck(dispatchId, attempt), true);
    return Item ? checkOf(Item) : undefined;
  }

  async getEvidenceBasis(dispatchId: string, attempt: number): Promise<EvidenceBasis> {
    if (attempt === 1) {
      // One query (RANGE.evidenceBasis): the message's bytes and a few small items, rounded up once.
      const items = await this.listAll(rangeQuery(this.table, RANGE.evidenceBasis(dispatchId)), (item) => item);
      const message = items.find((item) => item.sk === KEY.message(dispatchId).sk);
      const check = items.find((item) => isCheckKey(String(item.sk), attempt));
      return { message: message ? messageOf(message) : undefined, check: check ? checkOf(check) : undefined, marks: decodedOrUndefined(items.filter((item) => isMarkKey(String(item.sk), attempt)), markOf) };
    }
    const [message, check, marks] = await Promise.all([this.getAcceptedMessage(dispatchId), this.getEvidenceCheck(dispatchId, attempt), this.listEvidenceMarks(dispatchId, attempt)]);
    return { message, check, marks };
  }

  async getStateWithUploads(dispatchId: string): Promise<{ readonly state: DispatchState | undefined; readonly uploads: EvidenceUpload[] | undefined }> {
    const items = await this.listAll(rangeQuery(this.table, RANGE.stateWithUploads(dispatchId)), (item) => item);
    const stateItem = items.find((item) => item.sk === KEY.state(dispatchId).sk);
    const state = stateItem ? stateOf(stateItem) : undefined;
    return { state, uploads: state ? decodedOrUndefined(items.filter((item) => isUploadKey(String(item.sk), state.attempt)), uploadOf) : [] };
  }

  async peekState(dispatchId: string): Promise<DispatchState | undefined> {
    const Item = await this.getItem(KEY.state(dispatchId));
    return Item ? stateOf(Item) : undefined;
  }

  async putOperatorReceipt(receipt: OperatorReceipt): Promise<PutOutcome<OperatorReceipt>> {
    return this.putOnce(operatorReceiptPut(this.table, receipt, this.options.retentionSeconds), operatorReceiptOf);
  }

  async listRefusals(dispatchId: string, origin: string, limit: number): Promise<Refusal[]> {
    // Newest first, `limit` at most: one query of the id's own partition, whatever it holds.
    const page = await this.db.send(new QueryCommand({ ...collectionQuery(this.table, COLLECTION.refusals(dispatchId, origin)), ScanIndexForward: false, Limit: limit }));
    return (page.Items ?? []).map(refusalOf);
  }

  async listOperatorReceipts(dispatchId: string): Promise<OperatorReceipt[]> {
    return this.listAll(operatorReceiptsQuery(this.table, dispatchId), operatorReceiptOf);
  }

  async putManualAttestation(attestation: ManualAttestation): Promise<PutOutcome<ManualAttestation>> {
    return this.putOnce(manualAttestationPut(this.table, attestation, this.options.retentionSeconds), manualAttestationOf);
  }

  async listManualAttestations(dispatchId: string): Promise<ManualAttestation[]> {
    return this.listAll(collectionQuery(this.table, COLLECTION.manualAttestations(dispatchId)), manualAttestationOf);
  }

  /**
   * Every single-item put goes through here: `HotPathTable` (the intake's) sends it on a low-level
   * client instead of the document client.
   */
  protected async putItem(put: SinglePut): Promise<void> {
    await this.db.send(new PutCommand(put));
  }

  /** A write-once put (`writtenOnce`): written, or the stored record as it is. */
  protected async putOnce<T>(put: SinglePut, decode: (item: Item) => T): Promise<PutOutcome<T>> {
    try {
      await this.putItem(put);
      return { kind: 'written' };
    } catch (error) {
      if (isConditionFailure(error) && error.Item) return { kind: 'exists', existing: decode(unmarshallItem(error.Item)) };
      throw error;
    }
  }

  /** Every page of a collection query, decoded: one page for any usual dispatch (these records are small), more only past 1 MB. */
  protected async listAll<T>(query: QueryCommandInput, decode: (item: Item) => T): Promise<T[]> {
    const records: T[] = [];
    let startKey: Record<string, unknown> | undefined;
    do {
      const page = await this.db.send(new QueryCommand({ ...query, ExclusiveStartKey: startKey }));
      records.push(...(page.Items ?? []).map(decode));
      startKey = page.LastEvaluatedKey;
    } while (startKey);
    return records;
  }

  async recordLateEvent(late: LateEvent): Promise<void> {
    try {
      await this.putItem({
        TableName: this.table,
        Item: { ...KEY.lateEvent(late.dispatchId, late.runId, late.seq), ...late, [TTL_ATTRIBUTE]: expiryOf(late.at, this.options.retentionSeconds * 2) },
        ConditionExpression: 'attribute_not_exists(pk)',
      });
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
  }

  protected cachedTarget: ((name: string) => Promise<TargetRegistration | undefined>) | undefined;

  async getTarget(name: string): Promise<TargetRegistration | undefined> {
    return (
      this.options.registry?.targets.get(name) ??
      (this.cachedTarget ??= ttlCache(this.options.targetCacheMs ?? 0, async (key: string) => {
        const Item = await this.getItem(KEY.target(key));
        return Item ? targetOf(Item) : undefined;
      }))(name)
    );
  }

  /**
   * The shard counts, reused for a while by admissions (a count only ever grows: one missed for a
   * moment just leaves new slots unused, never lets a run past a cap); the monitor's tick reads afresh.
   */
  protected shardCountCache: { readonly counts: Map<string, number>; readonly until: number } | undefined;

  /** Targets that have or had a limit, each with how many slot shards it has had at most. */
  protected async limitedShardCounts(fresh = true): Promise<Map<string, number>> {
    return (await this.limitedItem(fresh)).counts;
  }

  /**
   * The limited targets' item: each target's shard count, and the registration revision its caps were
   * last written for (`capsRev`: none for a deploy-time limit, or caps written before revisions).
   */
  protected async limitedItem(fresh = true): Promise<{ readonly counts: Map<string, number>; readonly capsRevs: Map<string, number> }> {
    if (!fresh && this.shardCountCache && this.shardCountCache.until > Date.now()) return { counts: this.shardCountCache.counts, capsRevs: new Map() };
    const Item = await this.getItem(KEY.limitedTargets(), true);
    const counts = new Map<string, number>();
    const capsRevs = new Map<string, number>();
    for (const [name, value] of Object.entries(Item ?? {})) {
      if (name.startsWith('shards:') && typeof value === 'number') counts.set(name.slice('shards:'.length), value);
      if (name.startsWith('rev:') && typeof value === 'number') capsRevs.set(name.slice('rev:'.length), value);
    }
    for (const target of this.options.registry?.targets.values() ?? []) {
      if (target.maxConcurrentRuns !== undefined) counts.set(target.name, Math.max(counts.get(target.name) ?? 0, slotShardCaps(target.maxConcurrentRuns).length));
    }
    this.shardCountCache = { counts, until: Date.now() + SHARD_COUNT_CACHE_MS };
    return { counts, capsRevs };
  }

  /**
   * A change of the target's limit (CONTRACT §11): its caps allotted from what each shard holds
   * (`allotSlotCaps`), or, lowered under what is in flight, drained (every cap 0) until the monitor
   * allots again (`settleSlotCaps`). A take racing the allotment makes it read again; after a few
   * rounds lost to takes it drains instead, which needs no read to be right.
   */
  async syncSlotCaps(target: string, limit: number | undefined, options: SlotCapsWrite = {}): Promise<void> {
    for (let round = 0; round < 2 * ALLOT_ROUNDS; round += 1) {
      if ((await this.allotSlots(target, { ...options, limit, drain: round >= ALLOT_ROUNDS })) !== 'lost') return;
    }
    throw new Error(`the slot caps of ${target} could not be written: ${2 * ALLOT_ROUNDS} rounds lost to concurrent writes`);
  }

  /** Allots the caps of a draining (or unevenly allotted) target again when what it holds allows (the monitor, each admission pass). */
  async settleSlotCaps(target: string): Promise<void> {
    for (let round = 0; round < ALLOT_ROUNDS && (await this.allotSlots(target, 'settle')) === 'lost'; round += 1);
  }

  /**
   * One allotment, in one transaction over every shard. Caps allotted from the holds are each written
   * conditioned on the shard holding no more than was read (so at commit each cap is ≥ what its shard
   * holds and they sum to the limit); caps of 0 (a drain, or no limit) are right whatever is held and
   * are conditioned on nothing. The shard count is conditioned on no other allotment having made more
   * shards meanwhile. A settle keeps the limit in force, conditioned on it being the one read, and writes
   * nothing unless the shards want it (`wantsAllotment`).
   */
  protected async allotSlots(target: string, change: 'settle' | (SlotCapsWrite & { readonly limit: number | undefined; readonly drain: boolean })): Promise<'written' | 'settled' | 'lost'> {
    const { counts, capsRevs } = await this.limitedItem();
    const existing = counts.get(target) ?? 0;
    const rev = change === 'settle' ? undefined : change.rev;
    const onlyIfNone = change !== 'settle' && change.onlyIfNone === true;
    // A newer registration's caps are written already (or its writer will write them): this one is superseded.
    if (rev !== undefined && (capsRevs.get(target) ?? 0) > rev) return 'settled';
    // Caps only for a target with none: another writer set them meanwhile.
    if (onlyIfNone && existing > 0) return 'settled';
    const shards = await this.readSlotShards(target, existing);
    if (change === 'settle' && !wantsAllotment(shards)) return 'settled';
    const limit = change === 'settle' ? slotLimit(shards) : change.limit;
    const allotted = limit === undefined || (change !== 'settle' && change.drain) ? undefined : allotSlotCaps(limit, shards.map((shard) => shard.held));
    const caps = allotted ?? Array.from({ length: existing }, () => 0);
    const count = Math.max(caps.length, existing);
    const at = new Date().toISOString();
    const items: TransactItem[] = caps.map((cap, shard) => ({
      Update: {
        TableName: this.table,
        Key: KEY.slotShard(target, shard),
        UpdateExpression: 'SET cap = :cap, #limit = :limit, allottedAt = :at, held = if_not_exists(held, :zero), unknownHeld = if_not_exists(unknownHeld, :zero)',
        ExpressionAttributeNames: { '#limit': 'limit' },
        ...(allotted === undefined
          ? { ExpressionAttributeValues: { ':cap': cap, ':limit': limit ?? 0, ':zero': 0, ':at': at } }
          : {
              ConditionExpression: `(attribute_not_exists(held) OR held <= :held)${change === 'settle' ? ' AND (attribute_not_exists(#limit) OR #limit = :limit)' : ''}`,
              ExpressionAttributeValues: { ':cap': cap, ':limit': limit ?? 0, ':zero': 0, ':at': at, ':held': shards[shard]?.held ?? 0 },
            }),
      },
    }));
    // The count never shrinks under another allotment's; a registration's caps never replace a newer one's.
    const countCondition = onlyIfNone ? 'attribute_not_exists(#count)' : '(attribute_not_exists(#count) OR #count <= :count)';
    items.push({
      Update: {
        TableName: this.table,
        Key: KEY.limitedTargets(),
        ...(rev === undefined
          ? {
              UpdateExpression: 'SET #count = :count',
              ConditionExpression: countCondition,
              ExpressionAttributeNames: { '#count': `shards:${target}` },
              ExpressionAttributeValues: { ':count': count },
            }
          : {
              UpdateExpression: 'SET #count = :count, #rev = :rev',
              ConditionExpression: `${countCondition} AND (attribute_not_exists(#rev) OR #rev <= :rev)`,
              ExpressionAttributeNames: { '#count': `shards:${target}`, '#rev': `rev:${target}` },
              ExpressionAttributeValues: { ':count': count, ':rev': rev },
            }),
      },
    });
    try {
      await this.db.send(new TransactWriteCommand({ TransactItems: items }));
    } catch (error) {
      const reasons = error instanceof TransactionCanceledException ? (error.CancellationReasons ?? []).map((reason) => reason.Code) : [];
      if (reasons.includes('ConditionalCheckFailed') || reasons.includes('TransactionConflict') || isTransactionConflict(error)) return 'lost';
      throw error;
    }
    this.shardCountCache?.counts.set(target, count);
    return 'written';
  }

  async limitedTargets(): Promise<string[]> {
    return [...(await this.limitedShardCounts()).keys()].sort();
  }

  async slotShards(target: string): Promise<SlotShard[]> {
    const shards = await this.readSlotShards(target);
    // A deploy-time limit is the deployment's word: its caps are written by the first reader after a
    // deploy. (A limit registered in the table is written by putTarget alone: a cached registration
    // never rewrites caps.)
    const deployed = this.options.registry?.targets.get(target)?.maxConcurrentRuns;
    if (deployed === undefined || (shards.length > 0 && slotLimit(shards) === deployed)) return shards;
    await this.syncSlotCaps(target, deployed);
    return this.readSlotShards(target);
  }

  /** The target's shards (`count`: how many it has; by default the cached count admissions use). */
  protected async readSlotShards(target: string, known?: number): Promise<SlotShard[]> {
    const count = known ?? (await this.limitedShardCounts(false)).get(target) ?? 0;
    if (count === 0) return [];
    const keys = Array.from({ length: count }, (_, shard) => KEY.slotShard(target, shard));
    const found = new Map<string, Item>();
    for (const item of await batchReadAll(this.db, this.table, keys, this.options.sleep)) found.set(String(item.pk), item);
    return keys.map((key, shard) => slotShardOf(shard, found.get(key.pk)));
  }

  /** Up to `limit` wait index entries of one partition in a key range, in order, without those in `exclude`. */
  protected async waitPage(key: string, range: { readonly from?: string; readonly to?: string; readonly prefix?: string }, exclude: ReadonlySet<string>): Promise<WaitingEntry | undefined> {
    const values: Record<string, string> = { ':key': key };
    let condition = 'waitKey = :key';
    if (range.prefix !== undefined) {
      condition += ' AND begins_with(waitAt, :prefix)';
      values[':prefix'] = range.prefix;
    } else if (range.from !== undefined && range.to !== undefined) {
      condition += ' AND waitAt BETWEEN :from AND :to';
      values[':from'] = range.from;
      values[':to'] = range.to;
    }
    const page = await this.db.send(new QueryCommand({ TableName: this.table, IndexName: INDEX.waiting, KeyConditionExpression: condition, ExpressionAttributeValues: values, Limit: exclude.size + 1 }));
    for (const item of page.Items ?? []) {
      const entry = waitingEntryOf(String(item.pk), String(item.waitAt));
      if (entry && !exclude.has(entry.dispatchId)) return entry;
    }
    return undefined;
  }

  async nextWaiting(target: string, lastOrigin: string | null, exclude: ReadonlySet<string>): Promise<WaitingEntry | undefined> {
    const keys = waitKeysOf(target);
    // The head of each partition: the highest priority waiting, and its first origin by name.
    const heads = (await Promise.all(keys.map((key) => this.waitPage(key, {}, exclude)))).filter((entry): entry is WaitingEntry => entry !== undefined);
    if (heads.length === 0) return undefined;
    const priority = Math.max(...heads.map((entry) => entry.priority));
    const inBand = heads.filter((entry) => entry.priority === priority);
    // Round-robin: the first origin after the last one admitted, else (wrapping) the first of all.
    const after = lastOrigin === null ? [] : (await Promise.all(keys.map((key) => this.waitPage(key, WAIT_RANGE.afterOrigin(priority, lastOrigin), exclude)))).filter((entry): entry is WaitingEntry => entry !== undefined);
    const firstOf = (entries: readonly WaitingEntry[]) => [...entries].sort((a, b) => compareOrigins(a.origin, b.origin))[0] as WaitingEntry;
    const origin = (after.length > 0 ? firstOf(after) : firstOf(inBand)).origin;
    // That origin's oldest, across the partitions.
    const oldest = (await Promise.all(keys.map((key) => this.waitPage(key, WAIT_RANGE.ofOrigin(priority, origin), exclude)))).filter((entry): entry is WaitingEntry => entry !== undefined);
    return oldest.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.dispatchId < b.dispatchId ? -1 : 1))[0];
  }

  async countWaiting(target: string, max: number): Promise<number> {
    let total = 0;
    for (const key of waitKeysOf(target)) {
      let startKey: Record<string, unknown> | undefined;
      do {
        const page = await this.db.send(new QueryCommand({ TableName: this.table, IndexName: INDEX.waiting, KeyConditionExpression: 'waitKey = :key', ExpressionAttributeValues: { ':key': key }, Select: 'COUNT', Limit: max - total, ExclusiveStartKey: startKey }));
        total += page.Count ?? 0;
        startKey = page.LastEvaluatedKey;
      } while (startKey && total < max);
      if (total >= max) return max;
    }
    return total;
  }

  async getOriginSettings(origin: string): Promise<OriginSettings> {
    const deployed = this.options.registry?.origins?.get(origin);
    if (deployed) return deployed;
    const Item = await this.getItem(KEY.originSettings(origin));
    return originSettingsOf(Item ?? {});
  }

  async getLambdaFailure(dispatchId: string, attempt: number): Promise<LambdaFailureRecord | undefined> {
    const Item = await this.getItem(KEY.lambdaFailure(dispatchId, attempt), true);
    return Item ? lambdaFailureOf(Item) : undefined;
  }

  async putResultBody(body: ResultBody): Promise<void> {
    await this.putItem({ TableName: this.table, Item: resultBodyItem(body, this.options.retentionSeconds) });
  }

  async getResultBody(dispatchId: string, attempt: number, seq: number, digest?: string): Promise<ResultBody | undefined> {
    const Item = await this.getItem(KEY.resultBody(dispatchId, attempt, seq, digest), true);
    return Item ? resultBodyOf(Item) : undefined;
  }

  async resolve(principalId: string): Promise<Principal | undefined> {
    const deployed = this.options.registry?.principals.get(principalId);
    if (deployed) return deployed;
    const Item = await this.getItem(KEY.principal(principalId));
    return Item ? principalOf(Item) : undefined;
  }
}

/** Decoded through its stored schema (its payload hash too): the use case moves a dispatch by what it says. */
export function manualAttestationOf(item: Record<string, unknown>): ManualAttestation {
  const { key, record } = writtenAttestationOf(item);
  const decoded = StoredManualAttestation().safeParse(record);
  if (!decoded.success) throw new CorruptItemError(key, validationProblems(decoded.error));
  return { ...decoded.data, evidenceRef: decoded.data.evidenceRef ?? null };
}

/** The whole ledger table: the intake, monitor and failures functions', the CLI's and the tests' (`LedgerStore` and `LedgerWrites`). */
export class LedgerTable extends LedgerTableCore implements LedgerWrites {
  async putAcceptedMessage(message: AcceptedMessage): Promise<PutOutcome<AcceptedMessage>> {
    return this.putOnce(onceOnly(this.table, messageItem(message, this.options.retentionSeconds)), messageOf);
  }

  async renewClaim(dispatchId: string, expectedClaimUntil: string, claimUntil: string, claimBy: string): Promise<boolean> {
    try {
      await this.db.send(
        new UpdateCommand({
          TableName: this.table,
          Key: KEY.message(dispatchId),
          UpdateExpression: 'SET claimUntil = :next, claimBy = :by',
          // Or already this delivery's: its renewal, the answer lost and sent again by the SDK.
          ConditionExpression: 'claimUntil = :expected OR claimBy = :by',
          ExpressionAttributeValues: { ':next': claimUntil, ':expected': expectedClaimUntil, ':by': claimBy },
        }),
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }

  async archiveAttempt(past: PastAttempt): Promise<void> {
    await this.putItem({ TableName: this.table, Item: pastAttemptItem(past, this.options.retentionSeconds) });
  }

  async putRejection(rejection: Rejection, audience: RejectionAudience = { origin: false, dispatch: false }): Promise<PutOutcome<Rejection>> {
    const outcome = await this.putOnce(onceOnly(this.table, rejectionItem(rejection, this.options.retentionSeconds)), rejectionOf);
    if (!rejection.origin || !audience.origin) return outcome;
    // The stored rejection's time (a redelivery recomputes its own): the same keys, rewritten with the
    // same content — a crash between these puts and the first is made good by the redelivery.
    const at = outcome.kind === 'exists' ? outcome.existing.at : rejection.at;
    const { messageId, reason, dispatchId, origin } = rejection;
    const puts = [originRejectionItem({ messageId, at, reason, dispatchId, origin, bodyPreview: rejection.bodyPreview, bodyBytes: rejection.bodyBytes }, this.options.retentionSeconds)];
    if (dispatchId && audience.dispatch) puts.push(refusalItem(dispatchId, origin, { messageId, at, reason }, this.options.retentionSeconds));
    await Promise.all(puts.map((Item) => this.putItem({ TableName: this.table, Item })));
    return outcome;
  }

  async deferDue(due: DueEntry, until: Date): Promise<void> {
    try {
      await this.db.send(
        new UpdateCommand({
          TableName: this.table,
          Key: KEY.state(due.dispatchId),
          UpdateExpression: 'SET dueAt = :until',
          // Only the due time the monitor saw: a state written meanwhile has set its own.
          ConditionExpression: 'attribute_exists(dueShard) AND dueAt = :seen',
          ExpressionAttributeValues: { ':until': until.toISOString(), ':seen': due.dueAt },
        }),
      );
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
  }

  /**
   * Registers a target. Each write gets the next revision of its registration (conditioned on the one
   * read, so two writers are ordered); the limit lives in the slot counters' own caps (what the slot
   * write is conditioned on), written for that revision — a write that lost the race, or died before its
   * caps, never leaves them other than the registration last written (the monitor's `alignSlotCaps`).
   */
  async putTarget(target: TargetRegistration): Promise<void> {
    let rev = 0;
    for (let round = 0; ; round += 1) {
      const stored = await this.getItem(KEY.target(target.name), true);
      const seen = typeof stored?.[REGISTRATION_REV] === 'number' ? (stored[REGISTRATION_REV] as number) : undefined;
      rev = (seen ?? 0) + 1;
      try {
        await this.putItem({
          TableName: this.table,
          Item: { ...KEY.target(target.name), ...target, [REGISTRATION_REV]: rev },
          ...(seen === undefined
            ? { ConditionExpression: 'attribute_not_exists(#rev)', ExpressionAttributeNames: { '#rev': REGISTRATION_REV } }
            : { ConditionExpression: '#rev = :seen', ExpressionAttributeNames: { '#rev': REGISTRATION_REV }, ExpressionAttributeValues: { ':seen': seen } }),
        });
        break;
      } catch (error) {
        if (!isConditionFailure(error) || round >= ALLOT_ROUNDS) throw error;
      }
    }
    if (target.maxConcurrentRuns !== undefined || (await this.limitedShardCounts()).has(target.name)) await this.syncSlotCaps(target.name, target.maxConcurrentRuns, { rev });
  }

  /**
   * Takes a target's registration away (the local platform's `ledger local target remove`). Its runs in
   * flight are then looked up as unavailable, so they go `unknown`, never failed; what waits for it is
   * blocked `unknown_target` at the next admission.
   */
  async deleteTarget(name: string): Promise<void> {
    await this.db.send(new DeleteCommand({ TableName: this.table, Key: KEY.target(name) }));
  }

  /**
   * Puts the registration last written in force when its caps were not written for it (its writer died
   * between the two writes): a fresh read of both, and the caps written for that revision. A deploy-time
   * limit is put in force by `slotShards` instead. Called by the monitor for each limited target each tick.
   */
  async alignSlotCaps(target: string): Promise<void> {
    if (this.options.registry?.targets.has(target)) return;
    const stored = await this.getItem(KEY.target(target), true);
    const rev = typeof stored?.[REGISTRATION_REV] === 'number' ? (stored[REGISTRATION_REV] as number) : undefined;
    if (!stored || rev === undefined || ((await this.limitedItem()).capsRevs.get(target) ?? 0) >= rev) return;
    await this.syncSlotCaps(target, targetOf(stored).maxConcurrentRuns, { rev });
  }

  async putOriginSettings(origin: string, settings: Partial<OriginSettings>): Promise<void> {
    await this.putItem({ TableName: this.table, Item: { ...KEY.originSettings(origin), origin, ...settings } });
  }

  async putLambdaFailure(failure: LambdaFailureRecord): Promise<PutOutcome<LambdaFailureRecord>> {
    const item = { ...KEY.lambdaFailure(failure.dispatchId, failure.attempt), ...failure, [TTL_ATTRIBUTE]: expiryOf(failure.at, this.options.retentionSeconds) };
    return this.putOnce(onceOnly(this.table, item), lambdaFailureOf);
  }

  async putPrincipal(principalId: string, principal: Principal): Promise<void> {
    await this.putItem({ TableName: this.table, Item: { ...KEY.principal(principalId), principalId, ...principal } });
  }
}

/**
 * The due index as the monitor works through it (CONTRACT §14). Apart from LedgerTable because only
 * the monitor uses it: no other function's bundle carries it (as InboxTable, the API's alone).
 */
export class LedgerDueIndex implements DueIndex {
  constructor(
    private readonly db: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  readonly dueShards: readonly string[] = DUE_SHARD_KEYS;

  async *duePages(shard: string, now: Date, pageSize: number): AsyncGenerator<DueEntry[], void, undefined> {
    let startKey: Record<string, unknown> | undefined;
    do {
      const page = await this.db.send(new QueryCommand(duePageQuery(this.tableName, shard, now, pageSize, startKey)));
      startKey = page.LastEvaluatedKey;
      yield (page.Items ?? []).map((item) => ({ dispatchId: dispatchIdOfKey(String(item.pk)), dueAt: String(item.dueAt) }));
    } while (startKey);
  }

  async claimDueShard(shard: string, holder: string, now: Date, until: Date): Promise<boolean> {
    try {
      await this.db.send(new UpdateCommand(dueShardClaimUpdate(this.tableName, shard, holder, now, until)));
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }

  async releaseDueShard(shard: string, holder: string): Promise<void> {
    try {
      await this.db.send(new UpdateCommand(dueShardReleaseUpdate(this.tableName, shard, holder)));
    } catch (error) {
      // Taken over after its lease lapsed: that tick's claim is not ours to end.
      if (!isConditionFailure(error)) throw error;
    }
  }
}
