import { ConditionalCheckFailedException, CreateTableCommand, DescribeTableCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineClients, uniqueName } from '../support/engines.js';

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
