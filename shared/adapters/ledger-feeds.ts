import { BatchGetCommand, QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ATTENTION_KINDS, type AttentionKind } from '../dispatch/attention.js';
import { countsOf, isBucket, type Counts } from '../dispatch/counts.js';
import { isFiltered, matchesFilter, type DispatchFilter } from '../dispatch/dispatch-filter.js';
import type { DispatchState, ResultRecord } from '../dispatch/state.js';
import type { LedgerFeeds, Page, Rejection } from '../ledger/port.js';
import {
  COUNT_KEYS,
  dispatchIdOfKey,
  FEED,
  idHash,
  INDEX,
  isRecentPosition,
  isRejectionItemKey,
  isStateItemKey,
  KEY,
  messageIdOfKey,
  monthKey,
  originKeyOf,
  RECENT_SHARD_KEYS,
  REJECTION_FEED,
  rejectionOf,
  stateOf,
  type Item,
} from './ledger-items.js';

/**
 * The ledger table's lists (CONTRACT §2: an origin's history, rejections, attention; v2: every
 * origin's dispatches and the counts): what only the API reads, kept apart from `LedgerTable` so the
 * intake and monitor bundles carry none of it.
 */

export interface LedgerFeedsOptions {
  readonly tableName: string;
  /** Seconds a final record is kept: how far back the monthly rejection feeds reach. */
  readonly retentionSeconds: number;
  readonly now?: () => Date;
  /** Waits between BatchGetItem rounds (tests pass one that does not). */
  readonly sleep?: (ms: number) => Promise<void>;
}

const encodeCursor = (value: unknown): string => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');

/**
 * A cursor is opaque (CONTRACT §2): only the exact encoding of a value checked by `check` is one this
 * table handed out. Anything else — garbage, truncated, re-encoded, over 2 KB — is refused here, before
 * DynamoDB could refuse it as a ValidationException (a 500).
 */
function decodeCursor<T>(cursor: string | undefined, check: (value: unknown) => value is T): T | undefined {
  if (!cursor) return undefined;
  let value: unknown;
  try {
    if (cursor.length <= 2048) value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    // refused below
  }
  if (!check(value) || encodeCursor(value) !== cursor) throw new InvalidCursorError();
  return value;
}

/** A pagination cursor that this table did not hand out. */
export class InvalidCursorError extends Error {
  override readonly name = 'InvalidCursorError';
  constructor() {
    super('the cursor is not one this API returned');
  }
}

/** Exactly the attributes `names`, each a printable ASCII string of at most 512 characters (as every key part written is). */
function isKey<N extends string>(value: unknown, ...names: N[]): value is Record<N, string> {
  if (typeof value !== 'object' || value === null || Object.keys(value).length !== names.length) return false;
  return names.every((name) => {
    const part: unknown = Object.hasOwn(value, name) ? (value as Record<string, unknown>)[name] : undefined;
    return typeof part === 'string' && /^[!-~]{1,512}$/.test(part);
  });
}
type FeedKey = Record<'pk' | 'sk' | 'feedKey' | 'feedAt', string>;

/** A dispatch state's key, with an index sort key that ends in the hash of its id (as `stateItem` writes it). */
const isStateKey = (pk: string, sk: string, sortKey: string): boolean => isStateItemKey(pk, sk) && sortKey.endsWith(`#${idHash(dispatchIdOfKey(pk))}`);

/** Rounds of index pages one `GET /dispatches` page reads at most while filters skip entries (as an origin's history does). */
const MAX_ROUNDS = 10;
/** Keys read per round while filters are on: a sparse filter fills a page in fewer rounds. */
const FILTERED_PAGE = 25;

/** One entry of the `recent` index: its dispatch and its position (`createdKey`). */
interface RecentEntry {
  readonly dispatchId: string;
  readonly position: string;
}

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
    const feeds = months.map((month) => FEED.rejections(month));
    return this.readFeeds(feeds, options, rejectionOf, (key) => isRejectionItemKey(key.pk, key.sk) && key.feedAt.endsWith(`#${messageIdOfKey(key.pk)}`),
      // A cursor of a month the retention has since passed: nothing is left to list.
      (feed) => REJECTION_FEED.test(feed) && feed < (feeds[feeds.length - 1] as string));
  }

  /**
   * The operator's attention list: one kind, or every kind in turn (unknown, approval_wait_expired,
   * orphan_no_delivery, blocked, retrying), newest first within a kind. Reads the sparse feed index:
   * only what needs attention is in it.
   */
  async listAttention(options: { kind?: AttentionKind | undefined; limit: number; cursor?: string | undefined }): Promise<Page<DispatchState>> {
    const kinds = options.kind ? [options.kind] : [...ATTENTION_KINDS];
    return this.readFeeds(kinds.map((kind) => FEED.attention(kind)), options, stateOf, (key) => isStateKey(key.pk, key.sk, key.feedAt));
  }

  /**
   * Pages through feed partitions in the order given, newest first within each; the cursor names the
   * partition and the position in it: one of `feeds` (or one `agedOut`), and a key of an entry of it.
   */
  private async readFeeds<T>(
    feeds: readonly string[],
    options: { limit: number; cursor?: string | undefined },
    decode: (item: Item) => T,
    isEntry: (key: FeedKey) => boolean,
    agedOut = (_feed: string) => false,
  ): Promise<Page<T>> {
    const isFeedCursor = (value: unknown): value is { feed: string; key?: FeedKey } => {
      if (typeof value !== 'object' || value === null) return false;
      const { feed, key, ...rest } = value as { feed?: unknown; key?: unknown };
      return typeof feed === 'string' && Object.keys(rest).length === 0 && (feeds.includes(feed) || agedOut(feed)) &&
        (key === undefined || (isKey(key, 'pk', 'sk', 'feedKey', 'feedAt') && key.feedKey === feed && isEntry(key)));
    };
    const cursor = decodeCursor(options.cursor, isFeedCursor);
    const startIndex = cursor ? feeds.indexOf(cursor.feed) : 0;
    if (startIndex < 0) return { items: [], cursor: null };
    const items: T[] = [];
    let startKey: Record<string, string> | undefined = cursor?.key;
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
    return this.readHistory(origin, options, false, (state) => !options.status || state.execution.status === options.status || state.phase === options.status);
  }

  /** CONTRACT §10 `GET /origins/{origin}/inbox`: the origin's results, oldest first, in one state if asked. */
  async listResults(origin: string, options: { limit: number; cursor?: string | undefined; state: ResultRecord['state'] | undefined }): Promise<Page<DispatchState>> {
    return this.readHistory(origin, options, true, (state) => state.result !== null && state.result !== undefined && (!options.state || state.result.state === options.state));
  }

  /**
   * CONTRACT §2 v2 `GET /dispatches`: every origin's dispatches, newest first (the `recent` index; with
   * `origin`, that origin's history instead). The cursor is the position of the last entry looked at:
   * the next page starts below it, so nothing is listed twice or skipped. Filters are applied to the
   * states read (strongly consistent), in at most MAX_ROUNDS rounds; a page may come back short with a
   * cursor when they skip many.
   */
  async listDispatches(options: { limit: number; cursor?: string | undefined; filter?: DispatchFilter | undefined }): Promise<Page<DispatchState>> {
    const filter = options.filter ?? {};
    const keep = (state: DispatchState) => matchesFilter(state, filter);
    if (filter.origin !== undefined) return this.readHistory(filter.origin, options, false, keep);
    const isPosition = (value: unknown): value is { before: string } => isKey(value, 'before') && isRecentPosition(value.before);
    let before = decodeCursor(options.cursor, isPosition)?.before;
    const items: DispatchState[] = [];
    let more = true;
    for (let round = 0; round < MAX_ROUNDS && more && items.length < options.limit; round += 1) {
      const wanted = options.limit - items.length;
      const page = await this.recentPage(before, isFiltered(filter) ? Math.max(wanted, FILTERED_PAGE) : wanted);
      const states = new Map((await this.getStates(page.entries.map((entry) => entry.dispatchId))).map((state) => [state.dispatchId, state]));
      let looked = 0;
      for (const entry of page.entries) {
        if (items.length >= options.limit) break;
        looked += 1;
        before = entry.position;
        // Missing: deleted (TTL) since the index was read.
        const state = states.get(entry.dispatchId);
        if (state && keep(state)) items.push(state);
      }
      more = looked < page.entries.length || !page.complete;
    }
    return { items, cursor: more && before !== undefined ? encodeCursor({ before }) : null };
  }

  /**
   * The newest `size` entries below `before` across every shard of the `recent` index: each shard's
   * newest `size`, merged. `complete`: nothing older is left in any shard.
   */
  private async recentPage(before: string | undefined, size: number): Promise<{ readonly entries: readonly RecentEntry[]; readonly complete: boolean }> {
    const pages = await Promise.all(
      RECENT_SHARD_KEYS.map((shard) =>
        this.db.send(
          new QueryCommand({
            TableName: this.table,
            IndexName: INDEX.recent,
            KeyConditionExpression: before === undefined ? 'recentShard = :shard' : 'recentShard = :shard AND createdKey < :before',
            ExpressionAttributeValues: { ':shard': shard, ...(before === undefined ? {} : { ':before': before }) },
            ScanIndexForward: false,
            Limit: size,
          }),
        ),
      ),
    );
    const merged = pages
      .flatMap((page) => (page.Items ?? []).map((item) => ({ dispatchId: dispatchIdOfKey(String(item.pk)), position: String(item.createdKey) })))
      .sort((a, b) => (a.position < b.position ? 1 : a.position > b.position ? -1 : 0));
    return { entries: merged.slice(0, size), complete: merged.length <= size && pages.every((page) => !page.LastEvaluatedKey) };
  }

  /**
   * CONTRACT §2 v2 `GET /counts`: the sum of the counter items the publisher keeps (one strongly
   * consistent BatchGetItem of COUNT_SHARDS keys, never a Scan). Approximate as the publisher is: a
   * stream batch it counted but could not checkpoint (a crash between the two) is counted again.
   */
  async readCounts(): Promise<Counts> {
    const totals: Record<string, number> = {};
    for (const item of await this.batchGet(COUNT_KEYS)) {
      for (const [name, value] of Object.entries(item)) if (isBucket(name) && typeof value === 'number') totals[name] = (totals[name] ?? 0) + value;
    }
    return countsOf(totals);
  }

  /** An origin's history (newest first, or oldest first), filtered, in bounded rounds of key pages. */
  private async readHistory(origin: string, options: { limit: number; cursor?: string | undefined }, oldestFirst: boolean, keep: (state: DispatchState) => boolean): Promise<Page<DispatchState>> {
    // Only a key of this origin's partition of the index, as DynamoDB handed it out.
    const isOriginKey = (value: unknown): value is Record<string, string> =>
      isKey(value, 'pk', 'sk', 'originKey', 'createdKey') && value.originKey === originKeyOf(origin) && isStateKey(value.pk, value.sk, value.createdKey);
    let startKey = decodeCursor(options.cursor, isOriginKey);
    const items: DispatchState[] = [];
    // A status filter may skip many entries: read pages of keys until the page is full, within a bound.
    for (let round = 0; round < MAX_ROUNDS; round += 1) {
      const page = await this.db.send(
        new QueryCommand({
          TableName: this.table,
          IndexName: INDEX.byOrigin,
          KeyConditionExpression: 'originKey = :origin',
          ExpressionAttributeValues: { ':origin': originKeyOf(origin) },
          ScanIndexForward: oldestFirst,
          Limit: options.limit - items.length,
          ExclusiveStartKey: startKey,
        }),
      );
      const states = await this.getStates((page.Items ?? []).map((item) => dispatchIdOfKey(String(item.pk))));
      for (const state of states) if (keep(state)) items.push(state);
      startKey = page.LastEvaluatedKey as Record<string, string> | undefined;
      if (!startKey || items.length >= options.limit) break;
    }
    return { items, cursor: startKey ? encodeCursor(startKey) : null };
  }

  /** States by id, in the order asked (strongly consistent batch read). */
  private async getStates(dispatchIds: readonly string[]): Promise<DispatchState[]> {
    const found = new Map<string, DispatchState>();
    for (const item of await this.batchGet(dispatchIds.map((id) => KEY.state(id)))) {
      const state = stateOf(item);
      found.set(state.dispatchId, state);
    }
    // Only a state deleted (TTL) between the index read and this one is missing here.
    return dispatchIds.flatMap((id) => {
      const state = found.get(id);
      return state ? [state] : [];
    });
  }

  /**
   * The items of up to 100 keys, in no order (strongly consistent batch read). Keys DynamoDB leaves
   * unprocessed (throttling, 16 MB) are read again after 50, 100, 200, 400, 800 ms; still unprocessed
   * after that, the request fails (a 5xx the caller retries) rather than answer with entries missing.
   */
  private async batchGet(wanted: ReadonlyArray<{ readonly pk: string; readonly sk: string }>): Promise<Item[]> {
    const items: Item[] = [];
    let keys: Array<Record<string, string>> = wanted.map((key) => ({ ...key }));
    for (let round = 0; keys.length > 0; round += 1) {
      if (round === 6) throw new Error(`${keys.length} of ${wanted.length} items stayed unprocessed after ${round} BatchGetItem rounds`);
      if (round > 0) await (this.options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))))(25 * 2 ** round);
      const result = await this.db.send(new BatchGetCommand({ RequestItems: { [this.table]: { Keys: keys, ConsistentRead: true } } }));
      items.push(...(result.Responses?.[this.table] ?? []));
      keys = (result.UnprocessedKeys?.[this.table]?.Keys ?? []) as Array<Record<string, string>>;
    }
    return items;
  }
}
