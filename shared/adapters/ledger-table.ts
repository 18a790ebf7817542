import { createHash } from 'node:crypto';
import { ConditionalCheckFailedException, type AttributeDefinition, type GlobalSecondaryIndex, type KeySchemaElement } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import {
  BatchGetCommand,
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
  type PutCommandInput,
  type QueryCommandInput,
} from '@aws-sdk/lib-dynamodb';
import type { OperatorReceipt } from '../dispatch/receipts.js';
import { TERMINAL_STATUSES, type DispatchState } from '../dispatch/state.js';
import { ATTENTION_KINDS, attentionKind, type AttentionKind } from '../dispatch/attention.js';
import type { AcceptedMessage, EvidenceCheck, EvidenceMark, LateEvent, LedgerStore, Page, PutOutcome, Rejection, UpdateOutcome } from '../ledger/port.js';
import type { Principal, PrincipalRegistry } from '../principals/principals.js';
import type { StaticRegistry } from './static-registry.js';
import type { TargetRegistration, TargetRunStatus } from '../targets/port.js';

/**
 * The ledger table: one table, every key shape and access pattern in this module (no other file spells
 * pk, sk or an index name).
 *
 * | item               | pk                | sk          | indexes                                              |
 * | ------------------ | ----------------- | ----------- | ---------------------------------------------------- |
 * | dispatch state     | D#{dispatchId}    | STATE       | due (while something is due), byOrigin (always)      |
 * | accepted message   | D#{dispatchId}    | MSG         | —  (the idempotency anchor, with the task payload)   |
 * | evidence mark      | D#{dispatchId}    | MARK#{attempt}#{ref} | —  (an owner's verdict on one file; latest wins) |
 * | evidence check     | D#{dispatchId}    | CHECK#{attempt} | —  (final post-condition outcome; publishes Handled/Orphaned) |
 * | late run event     | D#{dispatchId}    | LATE#{runId}#{seq} | —  (events of superseded runs, for the record) |
 * | operator receipt   | D#{dispatchId}    | OR#{receiptId} | —  (written once; publishes Receipt Recorded; listed with begins_with) |
 * | rejection          | REJ#{messageId}   | REJECTION   | feed: rejections#{yyyy-mm}, newest first             |
 * | target             | T#{name}          | TARGET      | —                                                    |
 * | principal          | P#{principalId}   | PRINCIPAL   | —                                                    |
 *
 * - `due`: sparse, KEYS_ONLY, partitioned over DUE_SHARDS keys so no partition is hot; sorted by due
 *   time. The monitor queries `dueAt <= now` per shard, so its cost follows what is due, never the size
 *   of the history. GSI reads are eventually consistent: the monitor re-reads each item by key.
 * - `byOrigin`: KEYS_ONLY, written once when the state is created (its keys never change, so later
 *   state writes cost no index write); history is newest-first by `createdAt#dispatchId`.
 * - `feed`: rejections (and later other operator lists) by month, newest first.
 */

export const DUE_SHARDS = 16;
export const INDEX = { due: 'due', byOrigin: 'byOrigin', feed: 'feed' } as const;
export const TTL_ATTRIBUTE = 'expiresAt';

const OPERATOR_RECEIPT_PREFIX = 'OR#';

const KEY = {
  state: (dispatchId: string) => ({ pk: `D#${dispatchId}`, sk: 'STATE' }),
  message: (dispatchId: string) => ({ pk: `D#${dispatchId}`, sk: 'MSG' }),
  rejection: (messageId: string) => ({ pk: `REJ#${messageId}`, sk: 'REJECTION' }),
  evidenceMark: (dispatchId: string, attempt: number, ref: string) => ({ pk: `D#${dispatchId}`, sk: `${markPrefix(attempt)}${ref}` }),
  evidenceCheck: (dispatchId: string, attempt: number) => ({ pk: `D#${dispatchId}`, sk: `CHECK#${String(attempt).padStart(6, '0')}` }),
  lateEvent: (dispatchId: string, runId: string, seq: number) => ({ pk: `D#${dispatchId}`, sk: `LATE#${runId}#${String(seq).padStart(16, '0')}` }),
  operatorReceipt: (dispatchId: string, receiptId: string) => ({ pk: `D#${dispatchId}`, sk: `${OPERATOR_RECEIPT_PREFIX}${receiptId}` }),
  target: (name: string) => ({ pk: `T#${name}`, sk: 'TARGET' }),
  principal: (principalId: string) => ({ pk: `P#${principalId}`, sk: 'PRINCIPAL' }),
} as const;

const dispatchIdOfKey = (pk: string): string => pk.slice(2);
const markPrefix = (attempt: number): string => `MARK#${String(attempt).padStart(6, '0')}#`;

export function dueShardOf(dispatchId: string): string {
  const shard = createHash('sha256').update(dispatchId).digest().readUInt8(0) % DUE_SHARDS;
  return `due#${String(shard).padStart(2, '0')}`;
}

/** The table's key schema, indexes, stream and TTL: used by the CDK construct and the local platform alike. */
export const LEDGER_TABLE_DEFINITION: {
  readonly attributeDefinitions: AttributeDefinition[];
  readonly keySchema: KeySchemaElement[];
  readonly globalSecondaryIndexes: GlobalSecondaryIndex[];
  readonly ttlAttribute: string;
} = {
  attributeDefinitions: ['pk', 'sk', 'dueShard', 'dueAt', 'originKey', 'createdKey', 'feedKey', 'feedAt'].map((name) => ({
    AttributeName: name,
    AttributeType: 'S',
  })),
  keySchema: [
    { AttributeName: 'pk', KeyType: 'HASH' },
    { AttributeName: 'sk', KeyType: 'RANGE' },
  ],
  globalSecondaryIndexes: [
    { IndexName: INDEX.due, KeySchema: [{ AttributeName: 'dueShard', KeyType: 'HASH' }, { AttributeName: 'dueAt', KeyType: 'RANGE' }], Projection: { ProjectionType: 'KEYS_ONLY' } },
    { IndexName: INDEX.byOrigin, KeySchema: [{ AttributeName: 'originKey', KeyType: 'HASH' }, { AttributeName: 'createdKey', KeyType: 'RANGE' }], Projection: { ProjectionType: 'KEYS_ONLY' } },
    { IndexName: INDEX.feed, KeySchema: [{ AttributeName: 'feedKey', KeyType: 'HASH' }, { AttributeName: 'feedAt', KeyType: 'RANGE' }], Projection: { ProjectionType: 'ALL' } },
  ],
  ttlAttribute: TTL_ATTRIBUTE,
};

/** The item a failed condition returns (ALL_OLD) comes back in wire format, even through the document client. */
const unmarshallItem = (item: NonNullable<ConditionalCheckFailedException['Item']>): Item => unmarshall(item);

const isConditionFailure = (error: unknown): error is ConditionalCheckFailedException => error instanceof ConditionalCheckFailedException;

type Item = Record<string, unknown>;

/** Null fields are left out of the stored item (they cost bytes on every write) and restored on read. */
function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== null).map(([name, field]) => [name, withoutNulls(field)]));
}

/** A short, stable tie-breaker for sort keys, instead of repeating a 128-character id. */
const idHash = (id: string): string => createHash('sha256').update(id).digest('base64url').slice(0, 10);

/**
 * The hot state item. Kept small (≤ 1 KB for usual ids): the dispatch id and origin live only in the
 * keys, nulls are not stored, and the history sort key carries a hash of the id rather than the id.
 */
function stateItem(state: DispatchState, retentionSeconds: number): Item {
  const { dispatchId, origin, dueAt, ...rest } = state;
  const item: Item = {
    ...KEY.state(dispatchId),
    ...(withoutNulls(rest) as Item),
    originKey: `O#${origin}`,
    createdKey: `${state.createdAt}#${idHash(dispatchId)}`,
  };
  if (dueAt) {
    item.dueShard = dueShardOf(dispatchId);
    item.dueAt = dueAt;
  }
  // On the operator's attention list while it needs a person (sparse: out of the index otherwise).
  const attention = attentionKind(state);
  if (attention) {
    item.feedKey = `attention#${attention}`;
    item.feedAt = `${state.updatedAt}#${idHash(dispatchId)}`;
  }
  // Retention starts when the dispatch reaches a final state: blocked, or a final run whose evidence is settled.
  const settled = state.phase === 'submitted' && TERMINAL_STATUSES.has(state.execution.status as TargetRunStatus) && state.evidence.outcome !== 'pending';
  if (state.phase === 'blocked' || settled) item[TTL_ATTRIBUTE] = Math.floor(Date.parse(state.updatedAt) / 1000) + retentionSeconds;
  return item;
}

function stateOf(item: Item): DispatchState {
  const { pk, sk: _sk, dueShard: _shard, originKey, createdKey: _created, expiresAt: _expires, feedKey: _feed, feedAt: _feedAt, dueAt, ...rest } = item;
  const stored = rest as Partial<DispatchState>;
  const execution = (stored.execution ?? {}) as Partial<DispatchState['execution']>;
  const submission = (stored.submission ?? {}) as Partial<DispatchState['submission']>;
  return {
    ...(stored as DispatchState),
    dispatchId: dispatchIdOfKey(String(pk)),
    origin: String(originKey).slice(2),
    blockedReason: stored.blockedReason ?? null,
    runId: stored.runId ?? null,
    lastSeq: stored.lastSeq ?? null,
    supersededRuns: stored.supersededRuns ?? [],
    evidence: { outcome: stored.evidence?.outcome ?? 'unverified', expectedCount: stored.evidence?.expectedCount ?? 0, deadline: stored.evidence?.deadline ?? null },
    parentDispatchId: stored.parentDispatchId ?? null,
    submission: { attempts: submission.attempts ?? 0, nextRetryAt: submission.nextRetryAt ?? null, lastError: submission.lastError ?? null },
    execution: {
      status: execution.status ?? null,
      nativeStatus: execution.nativeStatus ?? null,
      monitorStatus: execution.monitorStatus ?? null,
      lastActivityAt: execution.lastActivityAt ?? null,
      completedAt: execution.completedAt ?? null,
      pendingApproval: execution.pendingApproval ?? null,
      result: execution.result ?? null,
    },
    dueAt: typeof dueAt === 'string' ? dueAt : null,
  };
}

function messageOf(item: Item): AcceptedMessage {
  const { pk: _pk, sk: _sk, ...rest } = item;
  return rest as unknown as AcceptedMessage;
}

function checkOf(item: Item): EvidenceCheck {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = item;
  return rest as unknown as EvidenceCheck;
}

/** Nulls were left out when it was written (withoutNulls): restored here, anything else as stored. */
function operatorReceiptOf(item: Item): OperatorReceipt {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = item;
  return { ...rest, evidenceRef: rest.evidenceRef ?? null, note: rest.note ?? null } as unknown as OperatorReceipt;
}

function rejectionOf(item: Item): Rejection {
  const { pk: _pk, sk: _sk, feedKey: _feed, feedAt: _at, expiresAt: _expires, ...rest } = item;
  return rest as unknown as Rejection;
}

/**
 * The write of one operator receipt: one small item beside the state (never the hot state item), once
 * per dispatch and receiptId. First writer wins; a retry or a concurrent writer gets the stored receipt
 * back (ALL_OLD) to compare payload hashes.
 */
export function operatorReceiptPut(tableName: string, receipt: OperatorReceipt, retentionSeconds: number): PutCommandInput {
  return {
    TableName: tableName,
    Item: {
      ...KEY.operatorReceipt(receipt.dispatchId, receipt.receiptId),
      ...(withoutNulls(receipt) as Item),
      [TTL_ATTRIBUTE]: Math.floor(Date.parse(receipt.recordedAt) / 1000) + retentionSeconds,
    },
    ConditionExpression: 'attribute_not_exists(pk)',
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  };
}

/** Every operator receipt of a dispatch: its partition, sort keys with the receipt prefix, strongly consistent. */
export function operatorReceiptsQuery(tableName: string, dispatchId: string, startKey?: Record<string, unknown>): QueryCommandInput {
  return {
    TableName: tableName,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
    ExpressionAttributeValues: { ':pk': `D#${dispatchId}`, ':prefix': OPERATOR_RECEIPT_PREFIX },
    ConsistentRead: true,
    ExclusiveStartKey: startKey,
  };
}

const encodeCursor = (value: unknown): string => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');

function decodeCursor<T>(cursor: string | undefined, check: (value: unknown) => value is T): T | undefined {
  if (!cursor) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new InvalidCursorError();
  }
  if (!check(value)) throw new InvalidCursorError();
  return value;
}

/** A pagination cursor that this table did not hand out. */
export class InvalidCursorError extends Error {
  override readonly name = 'InvalidCursorError';
  constructor() {
    super('the cursor is not one this API returned');
  }
}

const isKey = (value: unknown): value is Record<string, string> =>
  typeof value === 'object' && value !== null && Object.values(value).every((part) => typeof part === 'string');

const monthKey = (date: Date): string => date.toISOString().slice(0, 7);

/** Months from `from` back `count` months, newest first (`2026-12`, `2026-11`, …). */
function monthsBack(from: Date, count: number): string[] {
  const months: string[] = [];
  const cursor = new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), 1));
  for (let index = 0; index < count; index += 1) {
    months.push(monthKey(cursor));
    cursor.setUTCMonth(cursor.getUTCMonth() - 1);
  }
  return months;
}

export interface LedgerTableOptions {
  readonly tableName: string;
  /** Seconds a final record is kept (CONTRACT §7: default 90 days). */
  readonly retentionSeconds: number;
  readonly now?: () => Date;
  /** Deploy-time principals and targets, consulted before the table's own entries. */
  readonly registry?: StaticRegistry;
}

/** The DynamoDB implementation of the ledger's store, principal registry included. */
export class LedgerTable implements LedgerStore, PrincipalRegistry {
  private readonly now: () => Date;

  constructor(
    private readonly db: DynamoDBDocumentClient,
    private readonly options: LedgerTableOptions,
  ) {
    this.now = options.now ?? (() => new Date());
  }

  private get table(): string {
    return this.options.tableName;
  }

  async putAcceptedMessage(message: AcceptedMessage): Promise<PutOutcome<AcceptedMessage>> {
    try {
      await this.db.send(
        new PutCommand({
          TableName: this.table,
          Item: { ...KEY.message(message.dispatchId), ...message },
          ConditionExpression: 'attribute_not_exists(pk)',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { kind: 'written' };
    } catch (error) {
      if (isConditionFailure(error) && error.Item) return { kind: 'exists', existing: messageOf(unmarshallItem(error.Item)) };
      throw error;
    }
  }

  async getAcceptedMessage(dispatchId: string): Promise<AcceptedMessage | undefined> {
    const { Item } = await this.db.send(new GetCommand({ TableName: this.table, Key: KEY.message(dispatchId), ConsistentRead: true }));
    return Item ? messageOf(Item) : undefined;
  }

  async renewClaim(dispatchId: string, expectedClaimUntil: string, claimUntil: string): Promise<boolean> {
    try {
      await this.db.send(
        new UpdateCommand({
          TableName: this.table,
          Key: KEY.message(dispatchId),
          UpdateExpression: 'SET claimUntil = :next',
          ConditionExpression: 'claimUntil = :expected',
          ExpressionAttributeValues: { ':next': claimUntil, ':expected': expectedClaimUntil },
        }),
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }

  async getState(dispatchId: string): Promise<DispatchState | undefined> {
    const { Item } = await this.db.send(new GetCommand({ TableName: this.table, Key: KEY.state(dispatchId), ConsistentRead: true }));
    return Item ? stateOf(Item) : undefined;
  }

  async createState(state: DispatchState): Promise<PutOutcome<DispatchState>> {
    try {
      await this.db.send(
        new PutCommand({
          TableName: this.table,
          Item: stateItem(state, this.options.retentionSeconds),
          ConditionExpression: 'attribute_not_exists(pk)',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { kind: 'written' };
    } catch (error) {
      if (isConditionFailure(error) && error.Item) return { kind: 'exists', existing: stateOf(unmarshallItem(error.Item)) };
      throw error;
    }
  }

  async replaceState(next: DispatchState, expectedVersion: number): Promise<UpdateOutcome> {
    if (next.version !== expectedVersion + 1) throw new RangeError(`version must advance by one: ${expectedVersion} → ${next.version}`);
    try {
      await this.db.send(
        new PutCommand({
          TableName: this.table,
          Item: stateItem(next, this.options.retentionSeconds),
          ConditionExpression: 'version = :expected',
          ExpressionAttributeValues: { ':expected': expectedVersion },
        }),
      );
      return { kind: 'updated' };
    } catch (error) {
      if (isConditionFailure(error)) return { kind: 'conflict' };
      throw error;
    }
  }

  async putEvidenceMark(mark: EvidenceMark): Promise<void> {
    await this.db.send(
      new PutCommand({
        TableName: this.table,
        Item: { ...KEY.evidenceMark(mark.dispatchId, mark.attempt, mark.ref), ...mark, [TTL_ATTRIBUTE]: Math.floor(Date.parse(mark.at) / 1000) + this.options.retentionSeconds },
      }),
    );
  }

  async listEvidenceMarks(dispatchId: string, attempt: number): Promise<EvidenceMark[]> {
    const marks: EvidenceMark[] = [];
    let startKey: Record<string, unknown> | undefined;
    do {
      const page = await this.db.send(
        new QueryCommand({
          TableName: this.table,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
          ExpressionAttributeValues: { ':pk': KEY.state(dispatchId).pk, ':prefix': markPrefix(attempt) },
          ConsistentRead: true,
          ExclusiveStartKey: startKey,
        }),
      );
      for (const item of page.Items ?? []) {
        const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = item;
        marks.push(rest as EvidenceMark);
      }
      startKey = page.LastEvaluatedKey;
    } while (startKey);
    return marks;
  }

  async putEvidenceCheck(check: EvidenceCheck): Promise<PutOutcome<EvidenceCheck>> {
    try {
      await this.db.send(
        new PutCommand({
          TableName: this.table,
          Item: { ...KEY.evidenceCheck(check.dispatchId, check.attempt), ...check, [TTL_ATTRIBUTE]: Math.floor(Date.parse(check.checkedAt) / 1000) + this.options.retentionSeconds },
          ConditionExpression: 'attribute_not_exists(pk)',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { kind: 'written' };
    } catch (error) {
      if (isConditionFailure(error) && error.Item) return { kind: 'exists', existing: checkOf(unmarshallItem(error.Item)) };
      throw error;
    }
  }

  async getEvidenceCheck(dispatchId: string, attempt: number): Promise<EvidenceCheck | undefined> {
    const { Item } = await this.db.send(new GetCommand({ TableName: this.table, Key: KEY.evidenceCheck(dispatchId, attempt), ConsistentRead: true }));
    return Item ? checkOf(Item) : undefined;
  }

  async putOperatorReceipt(receipt: OperatorReceipt): Promise<PutOutcome<OperatorReceipt>> {
    try {
      await this.db.send(new PutCommand(operatorReceiptPut(this.table, receipt, this.options.retentionSeconds)));
      return { kind: 'written' };
    } catch (error) {
      if (isConditionFailure(error) && error.Item) return { kind: 'exists', existing: operatorReceiptOf(unmarshallItem(error.Item)) };
      throw error;
    }
  }

  async listOperatorReceipts(dispatchId: string): Promise<OperatorReceipt[]> {
    const receipts: OperatorReceipt[] = [];
    let startKey: Record<string, unknown> | undefined;
    // One page for any usual dispatch (receipts are small); more only past 1 MB of them.
    do {
      const page = await this.db.send(new QueryCommand(operatorReceiptsQuery(this.table, dispatchId, startKey)));
      receipts.push(...(page.Items ?? []).map(operatorReceiptOf));
      startKey = page.LastEvaluatedKey;
    } while (startKey);
    return receipts;
  }

  async recordLateEvent(late: LateEvent): Promise<void> {
    try {
      await this.db.send(
        new PutCommand({
          TableName: this.table,
          Item: { ...KEY.lateEvent(late.dispatchId, late.runId, late.seq), ...late, [TTL_ATTRIBUTE]: Math.floor(Date.parse(late.at) / 1000) + this.options.retentionSeconds },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
  }

  async putRejection(rejection: Rejection): Promise<PutOutcome<Rejection>> {
    const at = new Date(rejection.at);
    try {
      await this.db.send(
        new PutCommand({
          TableName: this.table,
          Item: {
            ...KEY.rejection(rejection.messageId),
            ...rejection,
            feedKey: `rejections#${monthKey(at)}`,
            feedAt: `${rejection.at}#${rejection.messageId}`,
            [TTL_ATTRIBUTE]: Math.floor(at.getTime() / 1000) + this.options.retentionSeconds,
          },
          ConditionExpression: 'attribute_not_exists(pk)',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { kind: 'written' };
    } catch (error) {
      if (isConditionFailure(error) && error.Item) return { kind: 'exists', existing: rejectionOf(unmarshallItem(error.Item)) };
      throw error;
    }
  }

  async listRejections(options: { limit: number; cursor?: string | undefined }): Promise<Page<Rejection>> {
    // Rejections live as long as the retention: look back that many months, and one more.
    const months = monthsBack(this.now(), Math.ceil(this.options.retentionSeconds / (30 * 86_400)) + 1);
    return this.readFeeds(months.map((month) => `rejections#${month}`), options, rejectionOf);
  }

  /**
   * The operator's attention list: one kind, or every kind in turn (unknown, approval_wait_expired,
   * orphan_no_delivery, blocked, retrying), newest first within a kind. Reads the sparse feed index:
   * only what needs attention is in it.
   */
  async listAttention(options: { kind?: AttentionKind | undefined; limit: number; cursor?: string | undefined }): Promise<Page<DispatchState>> {
    const kinds = options.kind ? [options.kind] : [...ATTENTION_KINDS];
    return this.readFeeds(kinds.map((kind) => `attention#${kind}`), options, stateOf);
  }

  /**
   * Pages through feed partitions in the order given, newest first within each; the cursor names the
   * partition and the position in it.
   */
  private async readFeeds<T>(feeds: readonly string[], options: { limit: number; cursor?: string | undefined }, decode: (item: Item) => T): Promise<Page<T>> {
    const isFeedCursor = (value: unknown): value is { feed: string; key?: Record<string, string> } =>
      typeof value === 'object' && value !== null && typeof (value as { feed?: unknown }).feed === 'string' &&
      ((value as { key?: unknown }).key === undefined || isKey((value as { key?: unknown }).key));
    const cursor = decodeCursor(options.cursor, isFeedCursor);
    const startIndex = cursor ? feeds.indexOf(cursor.feed) : 0;
    if (startIndex < 0) return { items: [], cursor: null };
    const items: T[] = [];
    let startKey = cursor?.key;
    for (let index = startIndex; index < feeds.length; index += 1) {
      const feed = feeds[index] as string;
      do {
        const page = await this.db.send(
          new QueryCommand({
            TableName: this.table,
            IndexName: INDEX.feed,
            KeyConditionExpression: 'feedKey = :feed',
            ExpressionAttributeValues: { ':feed': feed },
            ScanIndexForward: false,
            Limit: options.limit - items.length,
            ExclusiveStartKey: startKey,
          }),
        );
        items.push(...(page.Items ?? []).map(decode));
        startKey = page.LastEvaluatedKey as Record<string, string> | undefined;
        if (items.length >= options.limit) {
          const next = startKey ? { feed, key: startKey } : feeds[index + 1] ? { feed: feeds[index + 1] as string } : undefined;
          return { items, cursor: next ? encodeCursor(next) : null };
        }
      } while (startKey);
    }
    return { items, cursor: null };
  }

  async listOriginDispatches(
    origin: string,
    options: { limit: number; cursor?: string | undefined; status?: string | undefined },
  ): Promise<Page<DispatchState>> {
    let startKey = decodeCursor(options.cursor, isKey);
    const items: DispatchState[] = [];
    // A status filter may skip many entries: read pages of keys until the page is full, within a bound.
    for (let round = 0; round < 10; round += 1) {
      const page = await this.db.send(
        new QueryCommand({
          TableName: this.table,
          IndexName: INDEX.byOrigin,
          KeyConditionExpression: 'originKey = :origin',
          ExpressionAttributeValues: { ':origin': `O#${origin}` },
          ScanIndexForward: false,
          Limit: options.limit - items.length,
          ExclusiveStartKey: startKey,
        }),
      );
      const states = await this.getStates((page.Items ?? []).map((item) => dispatchIdOfKey(String(item.pk))));
      for (const state of states) {
        if (!options.status || state.execution.status === options.status || state.phase === options.status) items.push(state);
      }
      startKey = page.LastEvaluatedKey as Record<string, string> | undefined;
      if (!startKey || items.length >= options.limit) break;
    }
    return { items, cursor: startKey ? encodeCursor(startKey) : null };
  }

  /** States by id, in the order asked (strongly consistent batch read). */
  private async getStates(dispatchIds: readonly string[]): Promise<DispatchState[]> {
    if (dispatchIds.length === 0) return [];
    const found = new Map<string, DispatchState>();
    let keys: Array<Record<string, string>> = dispatchIds.map((id) => KEY.state(id));
    for (let round = 0; keys.length > 0 && round < 5; round += 1) {
      const result = await this.db.send(
        new BatchGetCommand({ RequestItems: { [this.table]: { Keys: keys, ConsistentRead: true } } }),
      );
      for (const item of result.Responses?.[this.table] ?? []) {
        const state = stateOf(item);
        found.set(state.dispatchId, state);
      }
      keys = (result.UnprocessedKeys?.[this.table]?.Keys ?? []) as Array<Record<string, string>>;
    }
    return dispatchIds.flatMap((id) => {
      const state = found.get(id);
      return state ? [state] : [];
    });
  }

  async listDue(now: Date, limitPerShard: number): Promise<string[]> {
    const shards = Array.from({ length: DUE_SHARDS }, (_, shard) => `due#${String(shard).padStart(2, '0')}`);
    const pages = await Promise.all(
      shards.map((shard) =>
        this.db.send(
          new QueryCommand({
            TableName: this.table,
            IndexName: INDEX.due,
            KeyConditionExpression: 'dueShard = :shard AND dueAt <= :now',
            ExpressionAttributeValues: { ':shard': shard, ':now': now.toISOString() },
            Limit: limitPerShard,
          }),
        ),
      ),
    );
    return pages.flatMap((page) => (page.Items ?? []).map((item) => dispatchIdOfKey(String(item.pk))));
  }

  async getTarget(name: string): Promise<TargetRegistration | undefined> {
    const deployed = this.options.registry?.targets.get(name);
    if (deployed) return deployed;
    const { Item } = await this.db.send(new GetCommand({ TableName: this.table, Key: KEY.target(name) }));
    if (!Item) return undefined;
    const { pk: _pk, sk: _sk, ...rest } = Item;
    return rest as TargetRegistration;
  }

  async putTarget(target: TargetRegistration): Promise<void> {
    await this.db.send(new PutCommand({ TableName: this.table, Item: { ...KEY.target(target.name), ...target } }));
  }

  async resolve(principalId: string): Promise<Principal | undefined> {
    const deployed = this.options.registry?.principals.get(principalId);
    if (deployed) return deployed;
    const { Item } = await this.db.send(new GetCommand({ TableName: this.table, Key: KEY.principal(principalId) }));
    if (!Item) return undefined;
    const { pk: _pk, sk: _sk, principalId: _id, ...rest } = Item;
    return rest as Principal;
  }

  async putPrincipal(principalId: string, principal: Principal): Promise<void> {
    await this.db.send(new PutCommand({ TableName: this.table, Item: { ...KEY.principal(principalId), principalId, ...principal } }));
  }
}

/** What a stream image of the ledger table holds, decoded (the publisher reads the stream). */
export type DecodedItem =
  | { readonly kind: 'state'; readonly state: DispatchState }
  | { readonly kind: 'rejection'; readonly rejection: Rejection }
  | { readonly kind: 'check'; readonly check: EvidenceCheck }
  | { readonly kind: 'operator_receipt'; readonly receipt: OperatorReceipt }
  | { readonly kind: 'other' };

/** Decodes an unmarshalled item (e.g. a stream record's NewImage/OldImage) by its key shape. */
export function decodeItem(item: Record<string, unknown> | undefined): DecodedItem {
  if (!item) return { kind: 'other' };
  const pk = String(item.pk ?? '');
  const sk = String(item.sk ?? '');
  if (pk.startsWith('D#') && sk === 'STATE') return { kind: 'state', state: stateOf(item) };
  if (pk.startsWith('REJ#') && sk === 'REJECTION') return { kind: 'rejection', rejection: rejectionOf(item) };
  if (pk.startsWith('D#') && sk.startsWith('CHECK#')) return { kind: 'check', check: checkOf(item) };
  if (pk.startsWith('D#') && sk.startsWith(OPERATOR_RECEIPT_PREFIX)) return { kind: 'operator_receipt', receipt: operatorReceiptOf(item) };
  return { kind: 'other' };
}
