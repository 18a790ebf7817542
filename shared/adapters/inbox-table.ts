import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { QueryCommand, TransactWriteCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { NextState } from '../dispatch/state.js';
import type { CommitOutcome, InboxRange, InboxStore, StoredState } from '../ledger/port.js';
import { dispatchIdOfKey, INBOX_RANGE, inboxKeysOf, INDEX } from './ledger-keys.js';
import { slotUpdates, statePut, transactPut } from './ledger-commands.js';

export interface InboxTableOptions {
  readonly tableName: string;
  readonly retentionSeconds: number;
  /** As the ledger table's (LedgerTableOptions.inboxShards). @default 1 */
  readonly inboxShards?: number;
}

interface ShardCursor {
  readonly key: string;
  buffer: Array<{ readonly dispatchId: string; readonly at: string }>;
  startKey: Record<string, unknown> | undefined;
  done: boolean;
}

/**
 * The results inbox's reads and group writes (CONTRACT §10). A claim costs what it reads of the inbox
 * index — only the claimable range of each key (small key entries: pending oldest first, then lapsed
 * leases; held leases lie above it) — plus one conditional state write per result taken, whose index
 * entry moves up to its lease's end with it.
 */
export class InboxTable implements InboxStore {
  constructor(
    private readonly db: DynamoDBDocumentClient,
    private readonly options: InboxTableOptions,
  ) {}

  async *inboxEntries(origin: string, options: InboxRange): AsyncIterable<{ readonly dispatchId: string; readonly at: string }> {
    const kinds = options.range === 'claimable' && options.injectOnly ? (['inject'] as const) : (['inject', 'after_turn'] as const);
    const shards: ShardCursor[] = inboxKeysOf(origin, this.options.inboxShards ?? 1, kinds).map((key) => ({ key, buffer: [], startKey: undefined, done: false }));
    const range = sortKeyRange(options);
    if (!range) return;
    for (;;) {
      // Every shard with nothing buffered reads its next page.
      for (const shard of shards) {
        while (shard.buffer.length === 0 && !shard.done) {
          const page = await this.db.send(
            new QueryCommand({
              TableName: this.options.tableName,
              IndexName: INDEX.inbox,
              KeyConditionExpression: `inboxKey = :key AND ${range.condition}`,
              ExpressionAttributeValues: { ':key': shard.key, ...range.values },
              Limit: options.pageSize,
              ExclusiveStartKey: shard.startKey,
            }),
          );
          const entries = (page.Items ?? []).map((item) => ({ dispatchId: dispatchIdOfKey(String(item.pk)), at: String(item.inboxAt) }));
          // BETWEEN takes its bounds: the position a page ended at is not listed again.
          shard.buffer.push(...entries.filter((entry) => entry.at !== range.skip));
          shard.startKey = page.LastEvaluatedKey;
          shard.done = page.LastEvaluatedKey === undefined;
        }
      }
      // The oldest head across shards next (a k-way merge).
      let oldest: ShardCursor | undefined;
      for (const shard of shards) {
        const head = shard.buffer[0];
        if (head && (!oldest || head.at < (oldest.buffer[0]?.at ?? ''))) oldest = shard;
      }
      const next = oldest?.buffer.shift();
      if (!next) return;
      yield next;
    }
  }

  async commitAll(writes: ReadonlyArray<{ readonly from: StoredState; readonly next: NextState }>): Promise<CommitOutcome> {
    if (writes.length === 0) return { kind: 'committed' };
    try {
      await this.db.send(
        new TransactWriteCommand({
          TransactItems: writes.flatMap(({ from, next }) => {
            const put = statePut(this.options.tableName, from, next, this.options.retentionSeconds, this.options.inboxShards);
            // A result's changes never move a slot; if one ever did, its counter would commit with it.
            return [transactPut(put), ...slotUpdates(this.options.tableName, from.state, next).items];
          }),
        }),
      );
      return { kind: 'committed' };
    } catch (error) {
      const reasons = error instanceof TransactionCanceledException ? (error.CancellationReasons ?? []).map((reason) => reason.Code) : [];
      if (reasons.some((code) => code === 'ConditionalCheckFailed' || code === 'TransactionConflict')) return { kind: 'conflict' };
      throw error;
    }
  }
}

/**
 * The inbox index's sort-key range a read covers (the layout is `inboxSortKey`'s): undefined when it
 * is empty (a position past the end of its list).
 */
function sortKeyRange(options: InboxRange): { readonly condition: string; readonly values: Record<string, string>; readonly skip?: string } | undefined {
  if (options.range === 'claimable') return { condition: 'inboxAt < :below', values: { ':below': INBOX_RANGE.claimableBelow(options.now) } };
  if (options.range === 'claimed') return { condition: 'inboxAt > :after', values: { ':after': options.after && options.after > INBOX_RANGE.claimedAbove ? options.after : INBOX_RANGE.claimedAbove } };
  if (!options.after) return { condition: 'inboxAt < :below', values: { ':below': INBOX_RANGE.pendingBelow } };
  if (options.after >= INBOX_RANGE.pendingBelow) return undefined;
  return { condition: 'inboxAt BETWEEN :after AND :below', values: { ':after': options.after, ':below': INBOX_RANGE.pendingBelow }, skip: options.after };
}
