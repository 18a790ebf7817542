import {
  QueryCommand,
  UpdateCommand,
  type DynamoDBDocumentClient,
} from '@aws-sdk/lib-dynamodb';
import type { DueEntry, DueIndex } from '../ledger/port.js';
import { dispatchIdOfKey, DUE_SHARD_KEYS } from './ledger-keys.js';
import { duePageQuery, dueShardClaimUpdate, dueShardReleaseUpdate, isConditionFailure } from './ledger-commands.js';


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
