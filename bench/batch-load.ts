import { BatchWriteCommand, type BatchWriteCommandInput, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

/** BatchWriteItem takes at most 25 items per request. */
export const BATCH_WRITE_ITEMS = 25;
/** Batches in flight at once. */
export const LOAD_CONCURRENCY = 32;

/**
 * Loads a bench's fixture fast: writes `items` unconditionally (an overwrite re-arms a due state) with
 * BatchWriteItem, `LOAD_CONCURRENCY` batches in flight, retrying unprocessed items. The items must be
 * the shapes of ledger-items.ts (`stateItem`, `messageItem`...): no bench spells a key of its own.
 */
export async function batchPutItems(documents: DynamoDBDocumentClient, tableName: string, items: readonly Record<string, unknown>[]): Promise<void> {
  const batches: Record<string, unknown>[][] = [];
  for (let start = 0; start < items.length; start += BATCH_WRITE_ITEMS) batches.push(items.slice(start, start + BATCH_WRITE_ITEMS));
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let index = next++; index < batches.length; index = next++) {
      let requests: NonNullable<BatchWriteCommandInput['RequestItems']>[string] = (batches[index] ?? []).map((Item) => ({ PutRequest: { Item } }));
      for (let round = 0; requests.length > 0; round += 1) {
        if (round > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 20 * 2 ** round)));
        if (round > 20) throw new Error(`BatchWriteItem left ${requests.length} items unprocessed after ${round} rounds`);
        const answer = await documents.send(new BatchWriteCommand({ RequestItems: { [tableName]: requests } }));
        requests = answer.UnprocessedItems?.[tableName] ?? [];
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(LOAD_CONCURRENCY, batches.length) }, worker));
}
