import {
  ConditionalCheckFailedException,
  CreateTableCommand,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LOCAL_REGION } from '../../local/engines/index.js';
import { ensureLedgerTable } from '../../local/resources.js';
import { StreamEventSource } from '../../local/runtime/stream-event-source.js';
import { CapacityMeter } from '../../bench/capacity-meter.js';
import { itemSizeBytes, writeUnitsFor, type CapacityTotals } from '../../bench/capacity-units.js';
import { BASE_TABLE } from '../../bench/partition-writes.js';
import { LEDGER_TABLE_DEFINITION } from '../../shared/adapters/ledger-keys.js';
import { engineClients, uniqueName } from '../support/engines.js';

/** An item of exactly `bytes` billed bytes, without the GSI key unless `status` is given. */
function itemOfSize(bytes: number, key: string, status?: string): Record<string, AttributeValue> {
  const indexed: Record<string, AttributeValue> = status === undefined ? {} : { status: { S: status } };
  const fixed = itemSizeBytes({ pk: { S: key }, ...indexed, pad: { S: '' } });
  return { pk: { S: key }, ...indexed, pad: { S: 'x'.repeat(bytes - fixed) } };
}

async function failureOf(action: Promise<unknown>): Promise<unknown> {
  return action.then(
    () => undefined,
    (error: unknown) => error,
  );
}

describe('CapacityMeter on DynamoDB Local', () => {
  const clients = engineClients();
  const ddb = clients.dynamodb;
  const meter = new CapacityMeter();
  meter.attach(ddb);
  const docs = DynamoDBDocumentClient.from(ddb);
  const table = uniqueName('capacity');

  /** What `action` cost, as the meter counted it. */
  async function spent(action: () => Promise<unknown>): Promise<CapacityTotals> {
    const before = meter.snapshot();
    await action();
    return meter.since(before);
  }

  beforeAll(async () => {
    await ddb.send(
      new CreateTableCommand({
        TableName: table,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [
          { AttributeName: 'pk', AttributeType: 'S' },
          { AttributeName: 'status', AttributeType: 'S' },
        ],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
        GlobalSecondaryIndexes: [
          { IndexName: 'byStatus', KeySchema: [{ AttributeName: 'status', KeyType: 'HASH' }], Projection: { ProjectionType: 'KEYS_ONLY' } },
        ],
      }),
    );
    await ddb.send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'seed' }, status: { S: 'queued' } } }));
  });
  afterAll(() => clients.destroy());

  it('counts a small PutItem as 1 table WU plus 1 GSI WU when the item carries the GSI key', async () => {
    const totals = await spent(() => ddb.send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'put-1' }, status: { S: 'queued' } } })));

    expect(totals).toEqual({
      requests: 1,
      readUnits: 0,
      writeUnits: 2,
      byOperation: { PutItem: { requests: 1, readUnits: 0, writeUnits: 2, failedConditions: 0, modelled: 0 } },
      byTable: { [table]: { readUnits: 0, writeUnits: 2 } },
    });
  });

  it('counts 1 WU only when the item is not in the GSI', async () => {
    const totals = await spent(() => ddb.send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'put-2' } } })));

    expect(totals.writeUnits).toBe(1);
  });

  it('sizes items as DynamoDB Local bills them, on both sides of the 1 KB boundary', async () => {
    const exactly1KB = itemOfSize(1024, 'kb-1');
    const justOver = itemOfSize(1025, 'kb-2');

    const first = await spent(() => ddb.send(new PutItemCommand({ TableName: table, Item: exactly1KB })));
    const second = await spent(() => ddb.send(new PutItemCommand({ TableName: table, Item: justOver })));

    expect([first.writeUnits, second.writeUnits]).toEqual([writeUnitsFor(itemSizeBytes(exactly1KB)), writeUnitsFor(itemSizeBytes(justOver))]);
    expect([first.writeUnits, second.writeUnits]).toEqual([1, 2]);
  });

  it('meters a client attached twice only once', async () => {
    meter.attach(ddb);

    const totals = await spent(() => ddb.send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'put-3' } } })));

    expect(totals.requests).toBe(1);
    expect(totals.writeUnits).toBe(1);
  });

  it('returns ConsumedCapacity only to a caller who asked for it', async () => {
    const unasked = await ddb.send(new GetItemCommand({ TableName: table, Key: { pk: { S: 'seed' } } }));
    const asked = await ddb.send(new GetItemCommand({ TableName: table, Key: { pk: { S: 'seed' } }, ReturnConsumedCapacity: 'TOTAL' }));

    expect(unasked).not.toHaveProperty('ConsumedCapacity');
    expect(asked.ConsumedCapacity).toEqual({ TableName: table, CapacityUnits: 0.5 });
  });

  it('charges a failed conditional put 1 modelled WU and still throws ConditionalCheckFailedException with its item', async () => {
    let failure: unknown;
    const totals = await spent(async () => {
      failure = await failureOf(
        ddb.send(
          new PutItemCommand({
            TableName: table,
            Item: { pk: { S: 'seed' }, status: { S: 'running' } },
            ConditionExpression: 'attribute_not_exists(pk)',
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        ),
      );
    });

    expect(failure).toBeInstanceOf(ConditionalCheckFailedException);
    expect((failure as ConditionalCheckFailedException).Item).toEqual({ pk: { S: 'seed' }, status: { S: 'queued' } });
    expect(totals.writeUnits).toBe(1);
    expect(totals.byOperation.PutItem).toEqual({ requests: 1, readUnits: 0, writeUnits: 1, failedConditions: 1, modelled: 1 });
  });

  it('counts a strongly consistent GetItem of a small item as 1 RCU and an eventually consistent one as 0.5', async () => {
    const strong = await spent(() => ddb.send(new GetItemCommand({ TableName: table, Key: { pk: { S: 'seed' } }, ConsistentRead: true })));
    const eventual = await spent(() => ddb.send(new GetItemCommand({ TableName: table, Key: { pk: { S: 'seed' } } })));

    expect(strong.byOperation.GetItem).toMatchObject({ requests: 1, readUnits: 1 });
    expect(eventual.byOperation.GetItem).toMatchObject({ requests: 1, readUnits: 0.5 });
  });

  it('counts a Query', async () => {
    const totals = await spent(() =>
      ddb.send(
        new QueryCommand({
          TableName: table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: 'seed' } },
          ConsistentRead: true,
        }),
      ),
    );

    expect(totals.byOperation.Query).toMatchObject({ requests: 1, readUnits: 1, writeUnits: 0 });
  });

  it('models a TransactWriteItems of two small puts as 4 WU (DynamoDB Local reports 12 here)', async () => {
    const totals = await spent(() =>
      ddb.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Put: { TableName: table, Item: { pk: { S: 'tx-1' } } } },
            { Put: { TableName: table, Item: { pk: { S: 'tx-2' }, status: { S: 'queued' } } } },
          ],
        }),
      ),
    );

    expect(totals.byOperation.TransactWriteItems).toEqual({ requests: 1, readUnits: 0, writeUnits: 4, failedConditions: 0, modelled: 1 });
  });

  it('charges a transaction cancelled by a condition and still throws TransactionCanceledException', async () => {
    let failure: unknown;
    const totals = await spent(async () => {
      failure = await failureOf(
        ddb.send(
          new TransactWriteItemsCommand({
            TransactItems: [{ Put: { TableName: table, Item: { pk: { S: 'seed' } }, ConditionExpression: 'attribute_not_exists(pk)' } }],
          }),
        ),
      );
    });

    expect(failure).toBeInstanceOf(TransactionCanceledException);
    expect(totals.byOperation.TransactWriteItems).toEqual({ requests: 1, readUnits: 0, writeUnits: 2, failedConditions: 1, modelled: 1 });
  });

  it('counts the calls of a DocumentClient built on the metered client', async () => {
    const totals = await spent(async () => {
      await docs.send(new PutCommand({ TableName: table, Item: { pk: 'doc-1', status: 'queued' } }));
      await docs.send(new GetCommand({ TableName: table, Key: { pk: 'doc-1' }, ConsistentRead: true }));
    });

    expect(totals.byOperation).toEqual({
      PutItem: { requests: 1, readUnits: 0, writeUnits: 2, failedConditions: 0, modelled: 0 },
      GetItem: { requests: 1, readUnits: 1, writeUnits: 0, failedConditions: 0, modelled: 0 },
    });
  });

  it('sizes a DocumentClient failed conditional put after marshalling, as DynamoDB bills it', async () => {
    let failure: unknown;
    const totals = await spent(async () => {
      failure = await failureOf(
        docs.send(new PutCommand({ TableName: table, Item: { pk: 'seed', pad: 'x'.repeat(2500) }, ConditionExpression: 'attribute_not_exists(pk)' })),
      );
    });

    expect(failure).toBeInstanceOf(ConditionalCheckFailedException);
    expect(totals.byOperation.PutItem).toMatchObject({ writeUnits: 3, failedConditions: 1, modelled: 1 });
  });

  it('forgets everything on reset', async () => {
    meter.reset();

    expect(meter.snapshot()).toEqual({ requests: 0, readUnits: 0, writeUnits: 0, byOperation: {}, byTable: {} });
  });
});

describe('CapacityMeter per partition key, from DynamoDB Local\'s stream', () => {
  const clients = engineClients();
  const ddb = clients.dynamodb;
  const meter = new CapacityMeter();
  meter.attach(ddb);
  let table = '';
  let stream: StreamEventSource;
  const S = (value: string): AttributeValue => ({ S: value });
  const stateKey = (id: string): Record<string, AttributeValue> => ({ pk: S(`D#${id}`), sk: S('STATE') });

  /** Hands every stream record written so far to the meter. */
  async function drain(): Promise<void> {
    for (let idle = 0; idle < 2; ) idle = (await stream.pollOnce()) === 0 ? idle + 1 : 0;
  }
  /** Write units per partition key of one table or index, as the meter reports them. */
  function unitsOf(index: string): Record<string, number> {
    const writes = meter.partitionWrites(1, 100).tables[table]?.[index];
    return Object.fromEntries((writes?.top ?? []).map((key) => [key.partitionKey, key.writeUnits]));
  }

  beforeAll(async () => {
    const ledger = await ensureLedgerTable(ddb, uniqueName('keys'));
    table = ledger.name;
    meter.trackPartitionKeys(table, LEDGER_TABLE_DEFINITION);
    stream = new StreamEventSource({
      functionName: 'meter',
      streams: clients.streams,
      streamArn: ledger.streamArn,
      region: LOCAL_REGION,
      handler: async (event) => {
        meter.recordStreamRecords(table, event.Records);
      },
    });
    await ddb.send(new PutItemCommand({ TableName: table, Item: { ...stateKey('seed'), originKey: S('O#planner'), createdKey: S('c#seed') } }));
  });
  beforeEach(async () => {
    await drain();
    meter.reset();
  });
  afterAll(() => clients.destroy());

  it('counts a put, a moved index key (delete + put) and an unprojected change per partition key', async () => {
    await ddb.send(
      new PutItemCommand({ TableName: table, Item: { ...stateKey('a'), originKey: S('O#planner'), createdKey: S('c#a'), dueShard: S('due#01'), dueAt: S('2026-12-01T12:00:00Z') } }),
    );
    await ddb.send(new UpdateItemCommand({ TableName: table, Key: stateKey('a'), UpdateExpression: 'SET dueShard = :shard', ExpressionAttributeValues: { ':shard': S('due#02') } }));
    await ddb.send(new UpdateItemCommand({ TableName: table, Key: stateKey('a'), UpdateExpression: 'SET phase = :phase', ExpressionAttributeValues: { ':phase': S('submitted') } }));
    await drain();

    expect(unitsOf(BASE_TABLE)).toEqual({ 'D#a': 3 });
    expect(unitsOf('due')).toEqual({ 'due#01': 2, 'due#02': 1 });
    expect(unitsOf('byOrigin')).toEqual({ 'O#planner': 1 });
  });

  it('counts the changes of a transaction twice, and its condition check as 2 WU on its own key', async () => {
    await ddb.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { Put: { TableName: table, Item: { ...stateKey('t'), feedKey: S('attention#retrying'), feedAt: S('2026-12-01T12:00:00Z') } } },
          { ConditionCheck: { TableName: table, Key: stateKey('seed'), ConditionExpression: 'attribute_exists(pk)' } },
        ],
      }),
    );
    await ddb.send(new UpdateItemCommand({ TableName: table, Key: stateKey('t'), UpdateExpression: 'SET phase = :phase', ExpressionAttributeValues: { ':phase': S('accepted') } }));
    await drain();

    // The put twice (table and feed), then the plain update once: the transaction's mark is used up.
    expect(unitsOf(BASE_TABLE)).toEqual({ 'D#t': 2 + 1, 'D#seed': 2 });
    expect(unitsOf('feed')).toEqual({ 'attention#retrying': 2 + 1 });
  });

  it('charges a write a condition rejected to its key, and no index', async () => {
    const failure = await failureOf(
      ddb.send(new PutItemCommand({ TableName: table, Item: { ...stateKey('seed'), originKey: S('O#other'), createdKey: S('c#x') }, ConditionExpression: 'attribute_not_exists(pk)' })),
    );
    await drain();

    expect(failure).toBeInstanceOf(ConditionalCheckFailedException);
    expect(meter.partitionWrites(1).tables[table]).toEqual({ [BASE_TABLE]: { totalWriteUnits: 1, keys: 1, top: [{ partitionKey: 'D#seed', writeUnits: 1, writeUnitsPerSecond: 1 }] } });
  });
});
