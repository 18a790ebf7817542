import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { engineClients } from './engines.js';

/**
 * Moves every response but the first `keep` of each BatchGetItem answer into UnprocessedKeys, for the
 * first `faultyCalls` calls (all of them if Infinity): what DynamoDB does under throttling or past 16 MB.
 * A middleware on this test's own client only; the reads themselves are real.
 */
export function withUnprocessedKeys(faultyCalls: number, keep = 1): { documents: DynamoDBDocumentClient; calls: () => number; destroy(): void } {
  const own = engineClients();
  let calls = 0;
  own.dynamodb.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      if (context.commandName !== 'BatchGetItemCommand') return result;
      calls += 1;
      if (calls > faultyCalls) return result;
      const output = result.output as { Responses?: Record<string, Array<Record<string, AttributeValue>>>; UnprocessedKeys?: Record<string, { Keys?: Array<Record<string, AttributeValue>>; ConsistentRead?: boolean }> };
      for (const [table, items] of Object.entries(output.Responses ?? {})) {
        const moved = items.splice(keep);
        if (moved.length === 0) continue;
        const unprocessed = (output.UnprocessedKeys ??= {});
        const entry = (unprocessed[table] ??= { Keys: [], ConsistentRead: true });
        entry.Keys = [...(entry.Keys ?? []), ...moved.map((item) => ({ pk: item.pk as AttributeValue, sk: item.sk as AttributeValue }))];
      }
      return result;
    },
    { step: 'build', name: 'unprocessedKeysFault' },
  );
  return { documents: DynamoDBDocumentClient.from(own.dynamodb), calls: () => calls, destroy: () => own.destroy() };
}
