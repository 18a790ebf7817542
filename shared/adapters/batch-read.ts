import { BatchGetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Item } from './item-codec.js';

/** Rounds of BatchGetItem before keys still unprocessed fail the read: waits of 50, 100, 200, 400, 800 ms between them. */
const BATCH_READ_ROUNDS = 6;

const realSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The items of up to 100 keys of one table, in no order (strongly consistent BatchGetItem). Keys
 * DynamoDB leaves unprocessed (throttling, 16 MB) are read again after 50, 100, 200, 400, 800 ms; still
 * unprocessed after that, the read fails (a 5xx its caller retries) rather than answer with items
 * missing. The one batch read of the ledger's adapters: pages of lists and flow control's slot shards.
 */
export async function batchReadAll(
  db: DynamoDBDocumentClient,
  table: string,
  wanted: ReadonlyArray<Record<string, unknown>>,
  sleep: (ms: number) => Promise<void> = realSleep,
): Promise<Item[]> {
  const items: Item[] = [];
  let keys: Array<Record<string, unknown>> = wanted.map((key) => ({ ...key }));
  for (let round = 0; keys.length > 0; round += 1) {
    if (round === BATCH_READ_ROUNDS) throw new Error(`${keys.length} of ${wanted.length} items stayed unprocessed after ${round} BatchGetItem rounds`);
    if (round > 0) await sleep(25 * 2 ** round);
    const result = await db.send(new BatchGetCommand({ RequestItems: { [table]: { Keys: keys, ConsistentRead: true } } }));
    items.push(...(result.Responses?.[table] ?? []));
    keys = (result.UnprocessedKeys?.[table]?.Keys ?? []) as Array<Record<string, unknown>>;
  }
  return items;
}
