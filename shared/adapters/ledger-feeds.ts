import { BatchGetCommand, QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ATTENTION_KINDS, type AttentionKind } from '../dispatch/attention.js';
import type { DispatchState } from '../dispatch/state.js';
import type { LedgerFeeds, Page, Rejection } from '../ledger/port.js';
import { dispatchIdOfKey, INDEX, KEY, monthKey, rejectionOf, stateOf, type Item } from './ledger-items.js';

/**
 * The ledger table's lists (CONTRACT §2: an origin's history, rejections, attention): what only the
 * API reads, kept apart from `LedgerTable` so the intake and monitor bundles carry none of it.
 */

export interface LedgerFeedsOptions {
  readonly tableName: string;
  /** Seconds a final record is kept: how far back the monthly rejection feeds reach. */
  readonly retentionSeconds: number;
  readonly now?: () => Date;
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

export class LedgerFeedsTable implements LedgerFeeds {
  private readonly now: () => Date;

  constructor(
    private readonly db: DynamoDBDocumentClient,
    private readonly options: LedgerFeedsOptions,
  ) {
    this.now = options.now ?? (() => new Date());
  }

  private get table(): string {
    return this.options.tableName;
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
}
