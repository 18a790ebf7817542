import { QueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { compareOrigins, type WaitingEntry } from '../dispatch/slots.js';
import { INDEX, WAIT_RANGE, waitingEntryOf, waitKeysOf } from './ledger-keys.js';

/**
 * The wait index (CONTRACT §11) as admissions read it: the next dispatch to admit for a target — the
 * highest priority, round-robin across origins, oldest first within one — and how many wait.
 */

/** Up to `limit` wait index entries of one partition in a key range, in order, without those in `exclude`. */
async function waitPage(db: DynamoDBDocumentClient, table: string, key: string, range: { readonly from?: string; readonly to?: string; readonly prefix?: string }, exclude: ReadonlySet<string>): Promise<WaitingEntry | undefined> {
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
  const page = await db.send(new QueryCommand({ TableName: table, IndexName: INDEX.waiting, KeyConditionExpression: condition, ExpressionAttributeValues: values, Limit: exclude.size + 1 }));
  for (const item of page.Items ?? []) {
    const entry = waitingEntryOf(String(item.pk), String(item.waitAt));
    if (entry && !exclude.has(entry.dispatchId)) return entry;
  }
  return undefined;
}

export async function nextWaiting(db: DynamoDBDocumentClient, table: string, target: string, lastOrigin: string | null, exclude: ReadonlySet<string>): Promise<WaitingEntry | undefined> {
  const keys = waitKeysOf(target);
  // The head of each partition: the highest priority waiting, and its first origin by name.
  const heads = (await Promise.all(keys.map((key) => waitPage(db, table, key, {}, exclude)))).filter((entry): entry is WaitingEntry => entry !== undefined);
  if (heads.length === 0) return undefined;
  const priority = Math.max(...heads.map((entry) => entry.priority));
  const inBand = heads.filter((entry) => entry.priority === priority);
  // Round-robin: the first origin after the last one admitted, else (wrapping) the first of all.
  const after = lastOrigin === null ? [] : (await Promise.all(keys.map((key) => waitPage(db, table, key, WAIT_RANGE.afterOrigin(priority, lastOrigin), exclude)))).filter((entry): entry is WaitingEntry => entry !== undefined);
  const firstOf = (entries: readonly WaitingEntry[]) => [...entries].sort((a, b) => compareOrigins(a.origin, b.origin))[0] as WaitingEntry;
  const origin = (after.length > 0 ? firstOf(after) : firstOf(inBand)).origin;
  // That origin's oldest, across the partitions.
  const oldest = (await Promise.all(keys.map((key) => waitPage(db, table, key, WAIT_RANGE.ofOrigin(priority, origin), exclude)))).filter((entry): entry is WaitingEntry => entry !== undefined);
  return oldest.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.dispatchId < b.dispatchId ? -1 : 1))[0];
}

export async function countWaiting(db: DynamoDBDocumentClient, table: string, target: string, max: number): Promise<number> {
  let total = 0;
  for (const key of waitKeysOf(target)) {
    let startKey: Record<string, unknown> | undefined;
    do {
      const page = await db.send(new QueryCommand({ TableName: table, IndexName: INDEX.waiting, KeyConditionExpression: 'waitKey = :key', ExpressionAttributeValues: { ':key': key }, Select: 'COUNT', Limit: max - total, ExclusiveStartKey: startKey }));
      total += page.Count ?? 0;
      startKey = page.LastEvaluatedKey;
    } while (startKey && total < max);
    if (total >= max) return max;
  }
  return total;
}
