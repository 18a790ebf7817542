import { APPROVAL_TOKEN_ITEM, COLLECTION, EVIDENCE_CHECK_ITEM, EVIDENCE_MARK_ITEM, EVIDENCE_UPLOAD_ITEM, LAMBDA_FAILURE_ITEM, LATE_EVENT_ITEM, LIMITED_TARGETS_ITEM, MESSAGE_ITEM, ORIGIN_SETTINGS_ITEM, PRINCIPAL_ITEM, RANGE, RESULT_BODY_ITEM, SLOT_SHARD_ITEM, STATE_ITEM, TARGET_ITEM, isCheckKey, isMarkKey, isUploadKey, expiryFields, type ItemKey, type ItemKind } from './item-kinds.js';
import { countWaiting, nextWaiting } from './wait-index.js';
import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import {
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  type DynamoDBDocumentClient,
  type QueryCommandInput,
} from '@aws-sdk/lib-dynamodb';
import type { OperatorReceipt } from '../dispatch/receipts.js';
import { type ManualAttestation } from '../dispatch/manual.js';
import type { DispatchState, NextState } from '../dispatch/state.js';
import { allotSlotCaps, slotLimit, slotShardCaps, wantsAllotment, type SlotShard, type WaitingEntry } from '../dispatch/slots.js';
import type { CommitOutcome, SlotCapsWrite, LedgerStore, PutOutcome, StoredState } from '../ledger/port.js';
import type { AcceptedMessage, ApprovalTokenRecord, EvidenceBasis, EvidenceCheck, EvidenceMark, EvidenceUpload, LambdaFailureRecord, LateEvent, OriginSettings, PastAttempt, Refusal, ResultBody } from '../dispatch/records.js';
import type { Principal, PrincipalRegistry } from '../principals/principals.js';
import type { StaticRegistry } from './static-registry.js';
import type { TargetRegistration } from '../targets/port.js';
import { ttlCache } from '../ttl-cache.js';
import { batchReadAll } from './batch-read.js';
import { approvalTokenOf, checkOf, markOf, uploadOf, principalOf, targetOf, messageOf, lambdaFailureOf, originSettingsOf, resultBodyItem, resultBodyOf, operatorReceiptOf, pastAttemptItem, pastAttemptOf, refusalOf, slotShardOf } from './ledger-items.js';
import { withoutNulls, type Item } from './item-codec.js';
import { stateOf, storedOf } from './state-item.js';
import { type SinglePut, type TransactItem, collectionQuery, decodedOrUndefined, isConditionFailure, isTransactionConflict, manualAttestationPut, onceOnly, operatorReceiptPut, operatorReceiptsQuery, rangeQuery, shardCountUpdate, slotCapUpdates, slotUpdates, statePut, transactPut, unmarshallItem } from './ledger-commands.js';
import { StoredManualAttestation } from '../dispatch/manual.js';
import { validationProblems } from '../dispatch/receipts.js';
import { CorruptItemError } from '../ledger/port.js';
import { writtenAttestationOf } from './ledger-items.js';

export { CorruptItemError, decodeItem } from './ledger-items.js';
export { DUE_SHARDS, dueShardOf, INDEX, LEDGER_TABLE_DEFINITION, TTL_ATTRIBUTE } from './ledger-keys.js';

/** Access patterns of the ledger table; key shapes and item codecs live in `ledger-items.ts`. */

/** Tries of one change of a limit's allotment lost to takes before it drains instead; tries of one settle. */
export const ALLOT_ROUNDS = 4;
/** The registration item's revision: each `putTarget` writes the next one, and the caps record the one they were written for. */
export const REGISTRATION_REV = 'registrationRev';
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
    const Item = await this.getItem(MESSAGE_ITEM.key(dispatchId), true);
    return Item ? messageOf(Item) : undefined;
  }

  async getState(dispatchId: string): Promise<DispatchState | undefined> {
    return (await this.getStored(dispatchId))?.state;
  }

  async getStored(dispatchId: string): Promise<StoredState | undefined> {
    const Item = await this.getItem(STATE_ITEM.key(dispatchId), true);
    return Item ? storedOf(Item) : undefined;
  }

  async commit(from: StoredState, next: NextState, ended?: PastAttempt): Promise<CommitOutcome> {
    const put = statePut(this.table, from, next, this.options.retentionSeconds, this.options.inboxShards);
    const slots = slotUpdates(this.table, from.state, next);
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
    await this.putLatest(EVIDENCE_MARK_ITEM, EVIDENCE_MARK_ITEM.key(mark.dispatchId, mark.attempt, mark.ref), mark);
  }

  async listEvidenceMarks(dispatchId: string, attempt: number): Promise<EvidenceMark[]> {
    return this.listAll(collectionQuery(this.table, COLLECTION.evidenceMarks(dispatchId, attempt)), markOf);
  }

  async putEvidenceUpload(upload: EvidenceUpload): Promise<void> {
    await this.putLatest(EVIDENCE_UPLOAD_ITEM, EVIDENCE_UPLOAD_ITEM.key(upload.dispatchId, upload.attempt, upload.ref), upload);
  }

  /** A per-ref record of an attempt's evidence whose latest write wins, kept for the retention after it. */
  protected async putLatest(kind: Pick<ItemKind<never>, 'ttl'>, key: ItemKey, record: { readonly at: string }): Promise<void> {
    await this.putItem({ TableName: this.table, Item: { ...key, ...record, ...expiryFields(kind, record, this.options.retentionSeconds) } });
  }

  async listEvidenceUploads(dispatchId: string, attempt: number): Promise<EvidenceUpload[]> {
    return this.listAll(collectionQuery(this.table, COLLECTION.evidenceUploads(dispatchId, attempt)), uploadOf);
  }

  async putEvidenceCheck(check: EvidenceCheck): Promise<PutOutcome<EvidenceCheck>> {
    const Item = { ...EVIDENCE_CHECK_ITEM.key(check.dispatchId, check.attempt), ...(withoutNulls(check) as Item), ...expiryFields(EVIDENCE_CHECK_ITEM, check, this.options.retentionSeconds) };
    return this.putOnce(onceOnly(this.table, Item), checkOf);
  }

  async getEvidenceCheck(dispatchId: string, attempt: number): Promise<EvidenceCheck | undefined> {
    const Item = await this.getItem(EVIDENCE_CHECK_ITEM.key(dispatchId, attempt), true);
    return Item ? checkOf(Item) : undefined;
  }

  async getEvidenceBasis(dispatchId: string, attempt: number): Promise<EvidenceBasis> {
    if (attempt === 1) {
      // One query (RANGE.evidenceBasis): the message's bytes and a few small items, rounded up once.
      const items = await this.listAll(rangeQuery(this.table, RANGE.evidenceBasis(dispatchId)), (item) => item);
      const message = items.find((item) => item.sk === MESSAGE_ITEM.key(dispatchId).sk);
      const check = items.find((item) => isCheckKey(String(item.sk), attempt));
      return { message: message ? messageOf(message) : undefined, check: check ? checkOf(check) : undefined, marks: decodedOrUndefined(items.filter((item) => isMarkKey(String(item.sk), attempt)), markOf) };
    }
    const [message, check, marks] = await Promise.all([this.getAcceptedMessage(dispatchId), this.getEvidenceCheck(dispatchId, attempt), this.listEvidenceMarks(dispatchId, attempt)]);
    return { message, check, marks };
  }

  async getStateWithUploads(dispatchId: string): Promise<{ readonly stored: StoredState | undefined; readonly uploads: EvidenceUpload[] | undefined }> {
    const items = await this.listAll(rangeQuery(this.table, RANGE.stateWithUploads(dispatchId)), (item) => item);
    const stateItem = items.find((item) => item.sk === STATE_ITEM.key(dispatchId).sk);
    const stored = stateItem ? storedOf(stateItem) : undefined;
    return { stored, uploads: stored ? decodedOrUndefined(items.filter((item) => isUploadKey(String(item.sk), stored.state.attempt)), uploadOf) : [] };
  }

  async peekState(dispatchId: string): Promise<DispatchState | undefined> {
    const Item = await this.getItem(STATE_ITEM.key(dispatchId));
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
  async putApprovalToken(token: ApprovalTokenRecord): Promise<PutOutcome<ApprovalTokenRecord>> {
    const item = { ...APPROVAL_TOKEN_ITEM.key(token.dispatchId, token.approvalId), ...token, ...expiryFields(APPROVAL_TOKEN_ITEM, token, this.options.retentionSeconds) };
    return this.putOnce(onceOnly(this.table, item), approvalTokenOf);
  }

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
        Item: { ...LATE_EVENT_ITEM.key(late.dispatchId, late.runId, late.seq), ...late, ...expiryFields(LATE_EVENT_ITEM, late, this.options.retentionSeconds) },
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
        const Item = await this.getItem(TARGET_ITEM.key(key));
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
    const Item = await this.getItem(LIMITED_TARGETS_ITEM.key(), true);
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
    const items = [...slotCapUpdates(this.table, target, { caps, limit, held: allotted === undefined ? undefined : shards.map((shard) => shard.held), settle: change === 'settle', at }), shardCountUpdate(this.table, target, { count, rev, onlyIfNone })];
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
    const keys = Array.from({ length: count }, (_, shard) => SLOT_SHARD_ITEM.key(target, shard));
    const found = new Map<string, Item>();
    for (const item of await batchReadAll(this.db, this.table, keys, this.options.sleep)) found.set(String(item.pk), item);
    return keys.map((key, shard) => slotShardOf(shard, found.get(key.pk)));
  }

  async nextWaiting(target: string, lastOrigin: string | null, exclude: ReadonlySet<string>): Promise<WaitingEntry | undefined> {
    return nextWaiting(this.db, this.table, target, lastOrigin, exclude);
  }

  async countWaiting(target: string, max: number): Promise<number> {
    return countWaiting(this.db, this.table, target, max);
  }

  async getOriginSettings(origin: string): Promise<OriginSettings> {
    const deployed = this.options.registry?.origins?.get(origin);
    if (deployed) return deployed;
    const Item = await this.getItem(ORIGIN_SETTINGS_ITEM.key(origin));
    return originSettingsOf(Item ?? {});
  }

  async getLambdaFailure(dispatchId: string, attempt: number): Promise<LambdaFailureRecord | undefined> {
    const Item = await this.getItem(LAMBDA_FAILURE_ITEM.key(dispatchId, attempt), true);
    return Item ? lambdaFailureOf(Item) : undefined;
  }

  async putResultBody(body: ResultBody): Promise<void> {
    await this.putItem({ TableName: this.table, Item: resultBodyItem(body, this.options.retentionSeconds) });
  }

  async getResultBody(dispatchId: string, attempt: number, seq: number, digest?: string): Promise<ResultBody | undefined> {
    const Item = await this.getItem(RESULT_BODY_ITEM.key(dispatchId, attempt, seq, digest), true);
    return Item ? resultBodyOf(Item) : undefined;
  }

  async resolve(principalId: string): Promise<Principal | undefined> {
    const deployed = this.options.registry?.principals.get(principalId);
    if (deployed) return deployed;
    const Item = await this.getItem(PRINCIPAL_ITEM.key(principalId));
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
