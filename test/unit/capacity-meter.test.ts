import {
  ConditionalCheckFailedException,
  ProvisionedThroughputExceededException,
  TransactionCanceledException,
  type AttributeValue,
  type CancellationReason,
} from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import {
  asAttributeMap,
  failedWriteCharge,
  itemSizeBytes,
  measureRequest,
  numberSizeBytes,
  readUnitsFor,
  sumConsumedCapacity,
  transactGetCharge,
  transactWriteCharge,
  writeUnitsFor,
} from '../../shared/adapters/capacity-meter.js';

const TABLE = 'ledger';

/** An item of exactly `bytes` billed bytes: `pk` (2 + 3) plus a `pad` string (3 + the rest). */
function itemOfSize(bytes: number, key = 'k-1'): Record<string, AttributeValue> {
  return { pk: { S: key }, pad: { S: 'x'.repeat(bytes - 2 - key.length - 3) } };
}

const metadata = { httpStatusCode: 400, attempts: 1 };

function conditionalCheckFailed(item?: Record<string, AttributeValue>): ConditionalCheckFailedException {
  return new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: metadata, Item: item });
}

function transactionCanceled(...codes: string[]): TransactionCanceledException {
  const reasons: CancellationReason[] = codes.map((Code) => ({ Code }));
  return new TransactionCanceledException({ message: 'Transaction cancelled', $metadata: metadata, CancellationReasons: reasons });
}

describe('itemSizeBytes (DynamoDB item size rules)', () => {
  it('counts a string as the UTF-8 bytes of its name and of its value', () => {
    expect(itemSizeBytes({ pk: { S: 'run#1' } })).toBe(2 + 5);
    expect(itemSizeBytes({ 'é': { S: '€' } })).toBe(2 + 3);
  });

  it('counts a number as 1 byte per two significant digits plus 1, ignoring sign, point and outer zeros', () => {
    expect(numberSizeBytes('42')).toBe(2);
    expect(numberSizeBytes('123')).toBe(3);
    expect(numberSizeBytes('-0.00120')).toBe(2);
    expect(numberSizeBytes('1000')).toBe(2);
    expect(numberSizeBytes('1.5E10')).toBe(2);
    expect(numberSizeBytes('12345678901234567890123456789012345678')).toBe(20);
    expect(itemSizeBytes({ n: { N: '42' } })).toBe(1 + 2);
  });

  it('counts a binary by its raw bytes, not its base64 text', () => {
    expect(itemSizeBytes({ b: { B: new Uint8Array(10) } })).toBe(1 + 10);
  });

  it('counts a boolean or a null as 1 byte', () => {
    expect(itemSizeBytes({ ok: { BOOL: false }, gone: { NULL: true } })).toBe(2 + 1 + 4 + 1);
  });

  it('counts a set as the sum of its members', () => {
    expect(itemSizeBytes({ ss: { SS: ['a', 'bb'] } })).toBe(2 + 3);
    expect(itemSizeBytes({ ns: { NS: ['1', '22'] } })).toBe(2 + 2 + 2);
    expect(itemSizeBytes({ bs: { BS: [new Uint8Array(3), new Uint8Array(4)] } })).toBe(2 + 7);
  });

  it('counts a list or map as 3 bytes plus 1 byte and the size of each element', () => {
    expect(itemSizeBytes({ l: { L: [] } })).toBe(1 + 3);
    expect(itemSizeBytes({ l: { L: [{ S: 'ab' }, { N: '1' }] } })).toBe(1 + 3 + (1 + 2) + (1 + 2));
    expect(itemSizeBytes({ m: { M: { a: { S: 'x' } } } })).toBe(1 + 3 + (1 + 1 + 1));
    expect(itemSizeBytes({ m: { M: { inner: { L: [{ BOOL: true }] } } } })).toBe(1 + 3 + (1 + 5 + (3 + 1 + 1)));
  });

  it('sums every attribute of the item', () => {
    expect(itemSizeBytes(itemOfSize(1024))).toBe(1024);
  });
});

describe('writeUnitsFor and readUnitsFor', () => {
  it('round up to whole 1 KB write units and 4 KB read units, never below 1', () => {
    expect([0, 1, 1024, 1025, 3000].map(writeUnitsFor)).toEqual([1, 1, 1, 2, 3]);
    expect([0, 4096, 4097].map(readUnitsFor)).toEqual([1, 1, 2]);
  });
});

describe('sumConsumedCapacity', () => {
  it('takes CapacityUnits as the total and does not add the table and index parts to it again', () => {
    const charge = sumConsumedCapacity(
      { TableName: TABLE, CapacityUnits: 2, Table: { CapacityUnits: 1 }, GlobalSecondaryIndexes: { byStatus: { CapacityUnits: 1 } } },
      'write',
    );
    expect(charge).toEqual({ readUnits: 0, writeUnits: 2, byTable: { [TABLE]: { readUnits: 0, writeUnits: 2 } } });
  });

  it('counts a bare figure as the operation kind, half units included', () => {
    expect(sumConsumedCapacity({ TableName: TABLE, CapacityUnits: 0.5 }, 'read')).toMatchObject({ readUnits: 0.5, writeUnits: 0 });
  });

  it('sums the entries of a batch answer per table', () => {
    const charge = sumConsumedCapacity(
      [
        { TableName: 'a', CapacityUnits: 3 },
        { TableName: 'b', CapacityUnits: 1 },
      ],
      'write',
    );
    expect(charge).toEqual({ readUnits: 0, writeUnits: 4, byTable: { a: { readUnits: 0, writeUnits: 3 }, b: { readUnits: 0, writeUnits: 1 } } });
  });

  it('uses the read and write split when DynamoDB sends one', () => {
    expect(sumConsumedCapacity({ TableName: TABLE, CapacityUnits: 3, ReadCapacityUnits: 1, WriteCapacityUnits: 2 }, 'read')).toMatchObject({
      readUnits: 1,
      writeUnits: 2,
    });
  });

  it('sums the table and index parts when the total is missing', () => {
    const charge = sumConsumedCapacity(
      {
        TableName: TABLE,
        Table: { CapacityUnits: 1 },
        GlobalSecondaryIndexes: { byStatus: { CapacityUnits: 1 } },
        LocalSecondaryIndexes: { byTime: { CapacityUnits: 1 } },
      },
      'write',
    );
    expect(charge.writeUnits).toBe(3);
  });

  it('charges nothing when the answer carries no capacity', () => {
    expect(sumConsumedCapacity(undefined, 'write')).toEqual({ readUnits: 0, writeUnits: 0, byTable: {} });
  });
});

describe('failedWriteCharge (a false condition is billed, DynamoDB Local reports nothing)', () => {
  it('charges 1 WU for a small item', () => {
    expect(failedWriteCharge({ TableName: TABLE, Item: itemOfSize(200) })).toEqual({
      readUnits: 0,
      writeUnits: 1,
      byTable: { [TABLE]: { readUnits: 0, writeUnits: 1 } },
    });
  });

  it('charges the new item size in 1 KB units', () => {
    expect(failedWriteCharge({ TableName: TABLE, Item: itemOfSize(3000) }).writeUnits).toBe(3);
  });

  it('charges the larger of the new and the existing item when the existing one came back (ALL_OLD)', () => {
    expect(failedWriteCharge({ TableName: TABLE, Item: itemOfSize(200) }, itemOfSize(2100)).writeUnits).toBe(3);
  });

  it('charges 1 WU when the size is unknown (UpdateItem, DeleteItem)', () => {
    expect(failedWriteCharge({ TableName: TABLE }).writeUnits).toBe(1);
  });
});

describe('transactWriteCharge (2 × per item)', () => {
  it('charges 2 WU per small Put', () => {
    const charge = transactWriteCharge({
      TransactItems: [{ Put: { TableName: TABLE, Item: itemOfSize(100, 'a') } }, { Put: { TableName: TABLE, Item: itemOfSize(100, 'b') } }],
    });
    expect(charge).toEqual({ readUnits: 0, writeUnits: 4, byTable: { [TABLE]: { readUnits: 0, writeUnits: 4 } } });
  });

  it('charges 2 × the 1 KB units of a larger Put', () => {
    expect(transactWriteCharge({ TransactItems: [{ Put: { TableName: TABLE, Item: itemOfSize(1500) } }] }).writeUnits).toBe(4);
  });

  it('charges 2 WU for each Update, Delete and ConditionCheck, whose size is unknown', () => {
    const key = { pk: { S: 'k' } };
    const charge = transactWriteCharge({
      TransactItems: [
        { Update: { TableName: 'a', Key: key, UpdateExpression: 'SET v = :v', ExpressionAttributeValues: { ':v': { N: '1' } } } },
        { Delete: { TableName: 'b', Key: key } },
        { ConditionCheck: { TableName: 'b', Key: key, ConditionExpression: 'attribute_exists(pk)' } },
      ],
    });
    expect(charge).toEqual({ readUnits: 0, writeUnits: 6, byTable: { a: { readUnits: 0, writeUnits: 2 }, b: { readUnits: 0, writeUnits: 4 } } });
  });
});

describe('transactGetCharge (2 × per item, 4 KB units)', () => {
  const input = {
    TransactItems: [{ Get: { TableName: TABLE, Key: { pk: { S: 'a' } } } }, { Get: { TableName: TABLE, Key: { pk: { S: 'b' } } } }],
  };

  it('charges 2 RRU per item when the sizes are unknown', () => {
    expect(transactGetCharge(input).readUnits).toBe(4);
  });

  it('sizes the items DynamoDB returned', () => {
    expect(transactGetCharge(input, { Responses: [{ Item: itemOfSize(5000) }, {}] }).readUnits).toBe(2 * 2 + 2);
  });

  it('counts items a DocumentClient already unmarshalled as at most 4 KB', () => {
    expect(asAttributeMap({ pk: 'a', pad: 'x'.repeat(5000) })).toBeUndefined();
    expect(transactGetCharge(input, { Responses: [{ Item: { pk: 'a' } }] }).readUnits).toBe(4);
  });
});

describe('measureRequest', () => {
  it('reads a successful call from its ConsumedCapacity', () => {
    const measurement = measureRequest('GetItem', { TableName: TABLE }, { output: { ConsumedCapacity: { TableName: TABLE, CapacityUnits: 0.5 } } });
    expect(measurement).toEqual({
      charge: { readUnits: 0.5, writeUnits: 0, byTable: { [TABLE]: { readUnits: 0.5, writeUnits: 0 } } },
      failedCondition: false,
      modelled: false,
    });
  });

  it('charges a Query that read nothing its minimum (DynamoDB Local reports 0): half a unit, one strongly consistent', () => {
    const empty = { output: { ConsumedCapacity: { TableName: TABLE, CapacityUnits: 0 } } };
    expect(measureRequest('Query', { TableName: TABLE, IndexName: 'inbox' }, empty)).toEqual({
      charge: { readUnits: 0.5, writeUnits: 0, byTable: { [TABLE]: { readUnits: 0.5, writeUnits: 0 } } },
      failedCondition: false,
      modelled: true,
    });
    expect(measureRequest('Query', { TableName: TABLE, ConsistentRead: true }, empty).charge.readUnits).toBe(1);
    expect(measureRequest('Query', { TableName: TABLE }, { output: { ConsumedCapacity: { TableName: TABLE, CapacityUnits: 2 } } })).toMatchObject({ charge: { readUnits: 2 }, modelled: false });
  });

  it('models a ConditionalCheckFailedException as a billed write', () => {
    const measurement = measureRequest('PutItem', { TableName: TABLE, Item: itemOfSize(100) }, { error: conditionalCheckFailed() });
    expect(measurement).toMatchObject({ charge: { writeUnits: 1 }, failedCondition: true, modelled: true });
  });

  it('sizes a failed write by the existing item the exception carries', () => {
    const measurement = measureRequest('UpdateItem', { TableName: TABLE }, { error: conditionalCheckFailed(itemOfSize(2500)) });
    expect(measurement.charge.writeUnits).toBe(3);
  });

  it('charges nothing for other errors, such as throttling', () => {
    const throttled = new ProvisionedThroughputExceededException({ message: 'slow down', $metadata: metadata });
    expect(measureRequest('PutItem', { TableName: TABLE, Item: itemOfSize(100) }, { error: throttled })).toEqual({
      charge: { readUnits: 0, writeUnits: 0, byTable: {} },
      failedCondition: false,
      modelled: false,
    });
  });

  it('models a TransactWriteItems instead of reading the figure DynamoDB Local gets wrong', () => {
    const input = { TransactItems: [{ Put: { TableName: TABLE, Item: itemOfSize(100) } }] };
    const output = { ConsumedCapacity: [{ TableName: TABLE, CapacityUnits: 12, WriteCapacityUnits: 12 }] };
    expect(measureRequest('TransactWriteItems', input, { output })).toMatchObject({ charge: { writeUnits: 2 }, modelled: true });
  });

  it('charges a transaction cancelled by a condition in full and counts the failed condition', () => {
    const input = { TransactItems: [{ Put: { TableName: TABLE, Item: itemOfSize(100) } }, { Delete: { TableName: TABLE, Key: { pk: { S: 'x' } } } }] };
    const measurement = measureRequest('TransactWriteItems', input, { error: transactionCanceled('None', 'ConditionalCheckFailed') });
    expect(measurement).toMatchObject({ charge: { writeUnits: 4 }, failedCondition: true, modelled: true });
  });

  it('charges nothing for a transaction cancelled by a conflict', () => {
    const input = { TransactItems: [{ Put: { TableName: TABLE, Item: itemOfSize(100) } }] };
    expect(measureRequest('TransactWriteItems', input, { error: transactionCanceled('TransactionConflict') }).charge.writeUnits).toBe(0);
  });

  it('counts a bare PartiQL figure as reads for SELECT and writes otherwise', () => {
    const output = { ConsumedCapacity: { TableName: TABLE, CapacityUnits: 1 } };
    expect(measureRequest('ExecuteStatement', { Statement: ` select * from "${TABLE}"` }, { output }).charge.readUnits).toBe(1);
    expect(measureRequest('ExecuteStatement', { Statement: `INSERT INTO "${TABLE}" VALUE {'pk': 'a'}` }, { output }).charge.writeUnits).toBe(1);
  });
});
