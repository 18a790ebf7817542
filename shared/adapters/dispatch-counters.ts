import { COUNTS_ITEM } from './item-kinds.js';
import { UpdateCommand, type DynamoDBDocumentClient, type UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import type { CountDelta } from '../dispatch/counts.js';
import { countShardOf } from './ledger-keys.js';

/**
 * The write side of `GET /counts` (CONTRACT §2 v2): the publisher adds each stream batch's count deltas
 * to one of the counter items (`readCounts` of the feeds sums them). Its own module, like the retention
 * function's `live-dispatches.ts`, so the publisher bundles the document client's UpdateCommand and
 * nothing else of the table adapter.
 */

/**
 * One `ADD` of every bucket the delta moves (a counter not yet there starts at 0). The bucket names are
 * attribute names as they are (`phase.accepted`): always through placeholders, so a dot is no path.
 *
 * @example
 * countsUpdate('ledger', 3, { total: 1, 'phase.accepted': 1 })
 * // UpdateExpression 'ADD #b0 :d0, #b1 :d1' on COUNTS#3
 */
export function countsUpdate(tableName: string, shard: number, delta: CountDelta): UpdateCommandInput {
  const buckets = Object.entries(delta);
  return {
    TableName: tableName,
    Key: COUNTS_ITEM.key(shard),
    UpdateExpression: `ADD ${buckets.map((_, index) => `#b${index} :d${index}`).join(', ')}`,
    ExpressionAttributeNames: Object.fromEntries(buckets.map(([bucket], index) => [`#b${index}`, bucket])),
    ExpressionAttributeValues: Object.fromEntries(buckets.map(([, by], index) => [`:d${index}`, by])),
  };
}

/** Adds a batch's deltas to the counter item its first sequence number picks (nothing to add: no write). */
export async function addCounts(db: DynamoDBDocumentClient, tableName: string, seed: string, delta: CountDelta): Promise<void> {
  if (Object.keys(delta).length === 0) return;
  await db.send(new UpdateCommand(countsUpdate(tableName, countShardOf(seed), delta)));
}
