import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { QueryCommand, TransactWriteCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { DispatchState } from '../dispatch/state.js';
import type { CommitOutcome, InboxStore } from '../ledger/port.js';
import { dispatchIdOfKey, inboxKeysOf, INDEX } from './ledger-items.js';
import { slotUpdates, statePut, transactPut } from './ledger-table.js';

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
 * index (small key entries, oldest first per key) plus one conditional state write per result taken.
 */
export class InboxTable implements InboxStore {
  constructor(
    private readonly db: DynamoDBDocumentClient,
    private readonly options: InboxTableOptions,
  ) {}

  async *inboxEntries(origin: string, options: { readonly injectOnly: boolean; readonly pageSize: number; readonly after?: string | undefined }): AsyncIterable<{ readonly dispatchId: string; readonly at: string }> {
    const kinds = options.injectOnly ? (['inject'] as const) : (['inject', 'after_turn'] as const);
    const shards: ShardCursor[] = inboxKeysOf(origin, this.options.inboxShards ?? 1, kinds).map((key) => ({ key, buffer: [], startKey: undefined, done: false }));
    for (;;) {
      // Every shard with nothing buffered reads its next page.
      for (const shard of shards) {
        while (shard.buffer.length === 0 && !shard.done) {
          const page = await this.db.send(
            new QueryCommand({
              TableName: this.options.tableName,
              IndexName: INDEX.inbox,
              KeyConditionExpression: options.after ? 'inboxKey = :key AND inboxAt > :after' : 'inboxKey = :key',
              ExpressionAttributeValues: { ':key': shard.key, ...(options.after ? { ':after': options.after } : {}) },
              Limit: options.pageSize,
              ExclusiveStartKey: shard.startKey,
            }),
          );
          shard.buffer.push(...(page.Items ?? []).map((item) => ({ dispatchId: dispatchIdOfKey(String(item.pk)), at: String(item.inboxAt) })));
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

  async commitAll(writes: ReadonlyArray<{ readonly from: DispatchState; readonly next: DispatchState }>): Promise<CommitOutcome> {
    if (writes.length === 0) return { kind: 'committed' };
    try {
      await this.db.send(
        new TransactWriteCommand({
          TransactItems: writes.flatMap(({ from, next }) => {
            const put = statePut(this.options.tableName, from, next, this.options.retentionSeconds, this.options.inboxShards);
            // A result's changes never move a slot; if one ever did, its counter would commit with it.
            return [transactPut(put), ...slotUpdates(this.options.tableName, from, next).items];
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
