import { ConditionalCheckFailedException, CreateTableCommand, DescribeTableCommand, DescribeTimeToLiveCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineClients, uniqueName } from '../support/engines.js';
import { ensureLedgerTable } from '../../local/resources.js';
import { LEDGER_TABLE_DEFINITION } from '../../shared/adapters/ledger-table.js';

describe('DynamoDB Local (the real engine)', () => {
  const clients = engineClients();
  const table = uniqueName('conditional');

  beforeAll(async () => {
    await clients.dynamodb.send(
      new CreateTableCommand({
        TableName: table,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      }),
    );
  });
  afterAll(() => clients.destroy());

  it('is DynamoDB Local answering on 127.0.0.1', async () => {
    const described = await clients.dynamodb.send(new DescribeTableCommand({ TableName: table }));
    expect(described.Table?.TableArn).toContain('ddblocal');
  });

  it('rejects a duplicate conditional put with ConditionalCheckFailedException carrying the existing item (ALL_OLD)', async () => {
    const put = (note: string) =>
      new PutItemCommand({
        TableName: table,
        Item: { pk: { S: 'd-1' }, note: { S: note } },
        ConditionExpression: 'attribute_not_exists(pk)',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      });
    await clients.dynamodb.send(put('first'));

    const duplicate = await clients.dynamodb.send(put('second')).then(
      () => undefined,
      (error: unknown) => error,
    );

    expect(duplicate).toBeInstanceOf(ConditionalCheckFailedException);
    expect((duplicate as ConditionalCheckFailedException).Item).toEqual({ pk: { S: 'd-1' }, note: { S: 'first' } });
  });
});

describe('DynamoDB Local sweeps expired items by the real clock', () => {
  // The tests run on a fixed clock (factories' NOW, 2026-03-01): a final record they write expires 90
  // days after it — long past by the real clock, so DynamoDB Local's TTL sweeper deleted such items
  // seconds after they were written, mid-test (a paging test lost one of three seeded blocked
  // dispatches in CI). The ledger never relies on TTL deletion (it compares the expiry attribute), so
  // the tables the tests create keep TTL off; the local platform (`npm start`, real clock) keeps it on.
  const clients = engineClients();
  afterAll(() => clients.destroy());

  it('keeps TTL off on a ledger table the tests create, and on for the local platform', async () => {
    const { name } = await ensureLedgerTable(clients.dynamodb, uniqueName('ttl-off'));
    expect((await clients.dynamodb.send(new DescribeTimeToLiveCommand({ TableName: name }))).TimeToLiveDescription?.TimeToLiveStatus).toBe('DISABLED');
    const platformTable = await ensureLedgerTable(clients.dynamodb, uniqueName('ttl-on'), { ttl: true });
    expect((await clients.dynamodb.send(new DescribeTimeToLiveCommand({ TableName: platformTable.name }))).TimeToLiveDescription).toEqual({
      TimeToLiveStatus: 'ENABLED',
      AttributeName: LEDGER_TABLE_DEFINITION.ttlAttribute,
    });
  });
});
