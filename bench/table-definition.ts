import { performance } from 'node:perf_hooks';
import { CreateTableCommand, DynamoDBClient, PutItemCommand, type CreateTableCommandInput } from '@aws-sdk/client-dynamodb';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../local/engines/index.js';
import { LEDGER_TABLE_DEFINITION } from '../shared/adapters/ledger-keys.js';
import { spreadOf, type BenchContext, type Spread } from './types.js';

/**
 * What the ledger table's definition costs a write on DynamoDB Local, apart from any item or logic of
 * ours: the floor's small conditional put (an item that enters no index) on tables keyed as the
 * ledger's — bare, with the stream only, with the six indexes only, with both (the ledger's own
 * definition) — and the ledger's definition once more, written first only after the others' warm-up.
 *
 * That last one measures a trait of DynamoDB Local, not of the definition. Its stream records of every
 * table sit in one SQLite table keyed by sequence number alone (`us`, in the jar's schema), and every
 * write to a stream-enabled table pays for the other tables' records between its shard's start (the
 * table's creation) and its own first record. A stream table written first soon after it is made pays
 * nothing; one that other tables' traffic reached first pays on every write for as long as those
 * records are kept. So every table here except that one gets its first write (`prime`) right after it
 * is made, before any measured traffic; the intake throughput part does the same for its floors.
 */
export const TABLE_VARIANTS = ['bare', 'streamOnly', 'indexesOnly', 'streamAndIndexes', 'writtenLate'] as const;
export type TableVariant = (typeof TABLE_VARIANTS)[number];

export interface TableDefinitionResult {
  readonly putsPerRound: number;
  readonly concurrency: number;
  readonly rounds: number;
  /** Conditional puts per second, per variant, over the measured rounds (the first round warms the engine up and is not counted). */
  readonly putsPerSecond: Readonly<Record<TableVariant, Spread>>;
  /** Each variant's median ÷ the bare table's median. */
  readonly ratioVsBare: Readonly<Record<TableVariant, number>>;
}

const keyOnly = (name: string) => name === 'pk' || name === 'sk';
const STREAM = { StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' } } as const;

export function definitionOf(variant: TableVariant): Omit<CreateTableCommandInput, 'TableName'> {
  const keys = { BillingMode: 'PAY_PER_REQUEST' as const, KeySchema: LEDGER_TABLE_DEFINITION.keySchema };
  const withIndexes = { AttributeDefinitions: LEDGER_TABLE_DEFINITION.attributeDefinitions, GlobalSecondaryIndexes: LEDGER_TABLE_DEFINITION.globalSecondaryIndexes };
  const bare = { AttributeDefinitions: LEDGER_TABLE_DEFINITION.attributeDefinitions.filter((attribute) => keyOnly(attribute.AttributeName ?? '')) };
  switch (variant) {
    case 'bare':
      return { ...keys, ...bare };
    case 'streamOnly':
      return { ...keys, ...bare, ...STREAM };
    case 'indexesOnly':
      return { ...keys, ...withIndexes };
    case 'streamAndIndexes':
    case 'writtenLate':
      return { ...keys, ...withIndexes, ...STREAM };
  }
}

export async function runTableDefinitionCost(ctx: BenchContext): Promise<TableDefinitionResult> {
  const putsPerRound = ctx.quick ? 300 : 3_000;
  // As many puts in flight as a batch of the intake's (BatchProcessor: 10 records at once).
  const concurrency = 10;
  const rounds = ctx.quick ? 2 : 4;
  const dynamodb = new DynamoDBClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS, endpoint: ctx.endpoints.dynamodbEndpoint, cacheMiddleware: true });
  try {
    const names = Object.fromEntries(TABLE_VARIANTS.map((variant) => [variant, ctx.uniqueName(`definition-${variant}`)])) as Record<TableVariant, string>;
    await Promise.all(TABLE_VARIANTS.map((variant) => dynamodb.send(new CreateTableCommand({ TableName: names[variant], ...definitionOf(variant) }))));
    await Promise.all(TABLE_VARIANTS.filter((variant) => variant !== 'writtenLate').map((variant) => primeTable(dynamodb, names[variant])));
    const samples = Object.fromEntries(TABLE_VARIANTS.map((variant) => [variant, [] as number[]])) as Record<TableVariant, number[]>;
    for (let round = 0; round < rounds; round += 1) {
      // The order rotates each round: no variant always runs on the engine the others warmed or filled.
      // The warm-up round keeps the listed order, so `writtenLate` takes its first write after all the others.
      const order = TABLE_VARIANTS.map((_, index) => TABLE_VARIANTS[(index + round) % TABLE_VARIANTS.length] as TableVariant);
      for (const variant of order) {
        let next = 0;
        const started = performance.now();
        await Promise.all(
          Array.from({ length: concurrency }, async () => {
            while (next < putsPerRound) {
              const id = `${round}-${next}`;
              next += 1;
              await dynamodb.send(
                new PutItemCommand({
                  TableName: names[variant],
                  Item: { pk: { S: `A#${id}` }, sk: { S: 'A' }, at: { S: new Date().toISOString() } },
                  ConditionExpression: 'attribute_not_exists(pk)',
                }),
              );
            }
          }),
        );
        const rate = putsPerRound / ((performance.now() - started) / 1000);
        if (round > 0) samples[variant].push(Math.round(rate));
        ctx.log(`table definition: round ${round + 1}/${rounds}${round === 0 ? ' (warm-up)' : ''}: ${variant} ${Math.round(rate)} puts/s`);
      }
    }
    const putsPerSecond = Object.fromEntries(TABLE_VARIANTS.map((variant) => [variant, spreadOf(samples[variant])])) as Record<TableVariant, Spread>;
    const ratioVsBare = Object.fromEntries(TABLE_VARIANTS.map((variant) => [variant, Number((putsPerSecond[variant].median / putsPerSecond.bare.median).toFixed(3))])) as Record<TableVariant, number>;
    return { putsPerRound, concurrency, rounds: rounds - 1, putsPerSecond, ratioVsBare };
  } finally {
    dynamodb.destroy();
  }
}

/**
 * A table's first write, right after it is made, before any other traffic: on DynamoDB Local a stream
 * table's writes then stay clear of the other tables' stream records (see the top of this file). The
 * item is the floor's shape and enters no index.
 */
export async function primeTable(dynamodb: DynamoDBClient, tableName: string, sortKey = true): Promise<void> {
  await dynamodb.send(new PutItemCommand({ TableName: tableName, Item: { pk: { S: 'A#prime' }, ...(sortKey ? { sk: { S: 'A' } } : {}), at: { S: new Date().toISOString() } } }));
}
