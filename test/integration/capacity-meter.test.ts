import {
  ConditionalCheckFailedException,
  CreateTableCommand,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CapacityMeter, itemSizeBytes, writeUnitsFor, type CapacityTotals } from '../../shared/adapters/capacity-meter.js';
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
