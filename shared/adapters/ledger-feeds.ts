import { COUNT_KEYS, STATE_ITEM } from './item-kinds.js';
import { QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ATTENTION_KINDS, type AttentionKind } from '../dispatch/attention.js';
import { countsOf, isBucket, type Counts } from '../dispatch/counts.js';
import { isFiltered, matchesFilter, type DispatchFilter } from '../dispatch/dispatch-filter.js';
import type { DispatchState, ResultRecord } from '../dispatch/state.js';
import { InvalidCursorError, type LedgerFeeds, type Page } from '../ledger/port.js';
import { type OriginRejection, type Rejection } from '../dispatch/records.js';
import { originRejectionOf, rejectionOf } from './ledger-items.js';
import { type Item } from './item-codec.js';
import { stateOf } from './state-item.js';
import { originRejectionListOf } from './ledger-keys.js';
import { dispatchIdOfKey, FEED, feedPartitionsOf, INDEX, isRecentPosition, isRejectionPosition, monthKey, originListOf, originPartitionsOf, originRejectionPartitionsOf, RECENT_SHARD_KEYS, REJECTION_FEED } from './ledger-keys.js';
import { batchReadAll } from './batch-read.js';

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

export { InvalidCursorError };

/** Rounds of index pages one page of a list reads at most while filters skip entries. */
const MAX_ROUNDS = 10;

/**
 * One list over sharded index partitions (CONTRACT §14: no key takes a busy origin's or feed's every
 * write), read back in one order by a k-way merge: an origin's history, every origin's dispatches, the
 * attention list, the rejections. A list is groups listed in turn (attention kinds, months), each one or
 * more partitions merged by the index sort key — the unsharded key of a group among them, so what
 * deployed stacks wrote before the sharding is listed too.
 */
interface MergedList<T> {
  readonly index: string;
  readonly partitionAttribute: string;
  readonly sortAttribute: string;
  /**
   * In list order; `name` is what a cursor names: the group's unsharded key (`O#{origin}`, `attention#{kind}`,
   * `rejections#{month}`), or a name of its own for a list read over the same partitions in the other
   * order (an origin's results, oldest first), so a cursor of one list is refused by another.
   */
  readonly groups: ReadonlyArray<{ readonly name: string; readonly partitions: readonly string[] }>;
  /** Oldest first (ascending sort key) rather than newest first. */
  readonly oldestFirst?: boolean;
  /** A sort key this list's entries have: the only position a cursor may name. */
  readonly isPosition: (value: string) => boolean;
  /** A group a cursor may name that the list no longer has (a month past the retention): nothing is left after it. */
  readonly agedOut?: (name: string) => boolean;
  /** The items of a page of index entries, one per entry (undefined: deleted since, or filtered out). */
  readonly load: (entries: readonly Item[]) => Promise<ReadonlyArray<T | undefined>>;
  /** Some entries are filtered out: each round reads `limit` entries per partition, not only those still wanted. */
  readonly filtered?: boolean;
}

/** Where a page of a list ended: the group, and the sort key of the last entry handed out or skipped (none: the group's top). */
interface ListCursor {
  readonly group: string;
  readonly after?: string;
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
    const oldest = feeds[feeds.length - 1] as string;
    return this.readList(
      {
        ...this.feedList(feeds),
        isPosition: isRejectionPosition,
        // A cursor of a month the retention has since passed: nothing is left to list.
        agedOut: (feed) => REJECTION_FEED.test(feed) && feed < oldest,
        load: async (entries) => entries.map(rejectionOf),
      },
      options,
    );
  }

  /**
   * CONTRACT §15 v3 `GET /origins/{origin}/rejections`: the origin's own refused messages, newest first —
   * one query per shard of its list a page (ORIGIN_SHARDS), never a Scan. The list is named by the origin,
   * so another origin's cursor is refused.
   */
  async listOriginRejections(origin: string, options: { limit: number; cursor?: string | undefined }): Promise<Page<OriginRejection>> {
    return this.readList(
      {
        index: INDEX.feed,
        partitionAttribute: 'feedKey',
        sortAttribute: 'feedAt',
        groups: [{ name: originRejectionListOf(origin), partitions: originRejectionPartitionsOf(origin) }],
        isPosition: isRejectionPosition,
        load: async (entries) => entries.map(originRejectionOf),
      },
      options,
    );
  }

  /**
   * The operator's attention list: one kind, or every kind in turn (unknown, approval_wait_expired,
   * orphan_no_delivery, blocked, retrying), newest first within a kind (by when the problem began).
   * Reads the sparse feed index: only what needs attention is in it.
   */
  async listAttention(options: { kind?: AttentionKind | undefined; limit: number; cursor?: string | undefined }): Promise<Page<DispatchState>> {
    const kinds = options.kind ? [options.kind] : [...ATTENTION_KINDS];
    return this.readList({ ...this.feedList(kinds.map((kind) => FEED.attention(kind))), isPosition: isRecentPosition, load: async (entries) => entries.map(stateOf) }, options);
  }

  /** The feed index over the shards of `feeds`, each feed a group (the index projects ALL: entries are the items). */
  private feedList(feeds: readonly string[]): Pick<MergedList<never>, 'index' | 'partitionAttribute' | 'sortAttribute' | 'groups'> {
    return { index: INDEX.feed, partitionAttribute: 'feedKey', sortAttribute: 'feedAt', groups: feeds.map((feed) => ({ name: feed, partitions: feedPartitionsOf(feed) })) };
  }

  async listOriginDispatches(
    origin: string,
    options: { limit: number; cursor?: string | undefined; status?: string | undefined },
  ): Promise<Page<DispatchState>> {
    return this.readHistory(origin, options, false, options.status ? (state) => state.execution.status === options.status || state.phase === options.status : undefined);
  }

  /** CONTRACT §10 `GET /origins/{origin}/inbox`: the origin's results, oldest first, in one state if asked. */
  async listResults(origin: string, options: { limit: number; cursor?: string | undefined; state: ResultRecord['state'] | undefined }): Promise<Page<DispatchState>> {
    return this.readHistory(origin, options, true, (state) => state.result !== null && state.result !== undefined && (!options.state || state.result.state === options.state));
  }

  /**
   * CONTRACT §2 v2 `GET /dispatches`: every origin's dispatches, newest first (the `recent` index; with
   * `origin`, that origin's history instead). Filters are applied to the states read (strongly
   * consistent), in at most MAX_ROUNDS rounds; a page may come back short with a cursor when they skip many.
   */
  async listDispatches(options: { limit: number; cursor?: string | undefined; filter?: DispatchFilter | undefined }): Promise<Page<DispatchState>> {
    const filter = options.filter ?? {};
    const keep = isFiltered(filter) ? (state: DispatchState) => matchesFilter(state, filter) : undefined;
    if (filter.origin !== undefined) return this.readHistory(filter.origin, options, false, keep);
    return this.readList(
      { index: INDEX.recent, partitionAttribute: 'recentShard', sortAttribute: 'createdKey', groups: [{ name: 'recent', partitions: RECENT_SHARD_KEYS }], isPosition: isRecentPosition, load: this.statesOf(keep), filtered: keep !== undefined },
      options,
    );
  }

  /** An origin's history (the `byOrigin` index, its shards merged), newest first or oldest first, filtered. */
  private readHistory(origin: string, options: { limit: number; cursor?: string | undefined }, oldestFirst: boolean, keep: ((state: DispatchState) => boolean) | undefined): Promise<Page<DispatchState>> {
    return this.readList(
      {
        index: INDEX.byOrigin,
        partitionAttribute: 'originKey',
        sortAttribute: 'createdKey',
        // The history's cursor read oldest first would resume at the wrong end, skipping entries unseen: its own name.
        groups: [{ name: oldestFirst ? `oldest-first ${originListOf(origin)}` : originListOf(origin), partitions: originPartitionsOf(origin) }],
        oldestFirst,
        isPosition: isRecentPosition,
        load: this.statesOf(keep),
        filtered: keep !== undefined,
      },
      options,
    );
  }

  /** The states of KEYS_ONLY index entries (strongly consistent), those `keep` refuses left out. */
  private statesOf(keep: ((state: DispatchState) => boolean) | undefined): MergedList<DispatchState>['load'] {
    return async (entries) => {
      const states = new Map((await this.getStates(entries.map((entry) => dispatchIdOfKey(String(entry.pk))))).map((state) => [state.dispatchId, state]));
      // Missing: deleted (TTL) since the index was read.
      return entries.map((entry) => {
        const state = states.get(dispatchIdOfKey(String(entry.pk)));
        return state && (!keep || keep(state)) ? state : undefined;
      });
    };
  }

  /**
   * A page of a merged list. The cursor names the last position handed out (or skipped by a filter):
   * the next page starts after it in every partition, so nothing is listed twice or skipped, whichever
   * partitions the entries are in (a state rewritten since moved from the unsharded key to its shard
   * keeps its sort key). Each round queries every partition of the current group for at most `limit`
   * entries after the position.
   */
  private async readList<T>(list: MergedList<T>, options: { limit: number; cursor?: string | undefined }): Promise<Page<T>> {
    const names = list.groups.map((group) => group.name);
    const several = list.groups.length > 1;
    const isCursor = (value: unknown): value is ListCursor => {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
      const { group, after, ...rest } = value as Record<string, unknown>;
      if (Object.keys(rest).length > 0) return false;
      if (typeof group !== 'string' || !(names.includes(group) || (list.agedOut?.(group) ?? false))) return false;
      // A list of one group always names a position; a group of several may be named alone (start at its top).
      return after === undefined ? several : typeof after === 'string' && after.length <= 512 && list.isPosition(after);
    };
    const cursor = decodeCursor(options.cursor, isCursor);
    let group = cursor ? names.indexOf(cursor.group) : 0;
    if (group < 0) return { items: [], cursor: null };
    let after = cursor?.after;
    const items: T[] = [];
    // Unfiltered, a round fills the page or ends a group (or finds a group's last page was exactly full).
    for (let round = 0; round < MAX_ROUNDS + 2 * list.groups.length && group < list.groups.length && items.length < options.limit; round += 1) {
      const page = await this.mergedPage(list, (list.groups[group] as MergedList<T>['groups'][number]).partitions, after, list.filtered ? options.limit : options.limit - items.length);
      const loaded = await list.load(page.entries);
      let looked = 0;
      for (const [index, entry] of page.entries.entries()) {
        if (items.length >= options.limit) break;
        looked += 1;
        after = String(entry[list.sortAttribute]);
        const item = loaded[index];
        if (item !== undefined) items.push(item);
      }
      if (looked === page.entries.length && page.complete) {
        group += 1;
        after = undefined;
      }
    }
    if (group >= list.groups.length) return { items, cursor: null };
    const next: ListCursor = { group: names[group] as string, ...(after === undefined ? {} : { after }) };
    return { items, cursor: encodeCursor(next) };
  }

  /**
   * The first `size` entries after `after` across `partitions`, in the list's order: each partition's
   * first `size` (one query each, in parallel), merged. `complete`: nothing further is left in any.
   */
  private async mergedPage(list: MergedList<unknown>, partitions: readonly string[], after: string | undefined, size: number): Promise<{ readonly entries: readonly Item[]; readonly complete: boolean }> {
    const pages = await Promise.all(
      partitions.map((partition) =>
        this.db.send(
          new QueryCommand({
            TableName: this.table,
            IndexName: list.index,
            KeyConditionExpression: after === undefined ? '#partition = :partition' : `#partition = :partition AND #sort ${list.oldestFirst ? '>' : '<'} :after`,
            ExpressionAttributeNames: { '#partition': list.partitionAttribute, ...(after === undefined ? {} : { '#sort': list.sortAttribute }) },
            ExpressionAttributeValues: { ':partition': partition, ...(after === undefined ? {} : { ':after': after }) },
            ScanIndexForward: list.oldestFirst === true,
            Limit: size,
          }),
        ),
      ),
    );
    const positionOf = (item: Item): string => String(item[list.sortAttribute]);
    const order = list.oldestFirst ? 1 : -1;
    const merged = pages
      .flatMap((page) => page.Items ?? [])
      .sort((a, b) => (positionOf(a) < positionOf(b) ? -order : positionOf(a) > positionOf(b) ? order : 0))
      // One entry read twice: its state moved from the unsharded key to its shard between two queries.
      .filter((item, index, all) => index === 0 || positionOf(item) !== positionOf(all[index - 1] as Item));
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

  /** States by id, in the order asked (strongly consistent batch read). */
  private async getStates(dispatchIds: readonly string[]): Promise<DispatchState[]> {
    const found = new Map<string, DispatchState>();
    for (const item of await this.batchGet(dispatchIds.map((id) => STATE_ITEM.key(id)))) {
      const state = stateOf(item);
      found.set(state.dispatchId, state);
    }
    // Only a state deleted (TTL) between the index read and this one is missing here.
    return dispatchIds.flatMap((id) => {
      const state = found.get(id);
      return state ? [state] : [];
    });
  }

  /** The items of up to 100 keys, in no order: `batchReadAll`, with this table's waits between rounds. */
  private batchGet(wanted: ReadonlyArray<{ readonly pk: string; readonly sk: string }>): Promise<Item[]> {
    return batchReadAll(this.db, this.table, wanted, this.options.sleep);
  }
}
