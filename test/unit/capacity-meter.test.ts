import {
  ConditionalCheckFailedException,
  ProvisionedThroughputExceededException,
  TransactionCanceledException,
  type AttributeValue,
  type CancellationReason,
} from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { LEDGER_TABLE_DEFINITION } from '../../shared/adapters/ledger-keys.js';
import { CapacityMeter } from '../../bench/capacity-meter.js';
import { asAttributeMap, failedWriteCharge, itemSizeBytes, measureRequest, numberSizeBytes, readUnitsFor, sumConsumedCapacity, transactGetCharge, transactWriteCharge, writeUnitsFor } from '../../bench/capacity-units.js';
import { BASE_TABLE, partitionWritesOf } from '../../bench/partition-writes.js';

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

describe('partitionWritesOf (write units per partition key of the table and of each GSI)', () => {
  const S = (value: string): AttributeValue => ({ S: value });
  /** A dispatch state as the ledger writes it: in byOrigin, recent and due; in the feed only when given. */
  function state(fields: Record<string, AttributeValue> = {}): Record<string, AttributeValue> {
    return {
      pk: S('D#d-1'),
      sk: S('STATE'),
      originKey: S('O#planner'),
      createdKey: S('2026-12-01T12:00:00.000Z#abcdefghij'),
      recentShard: S('R#03'),
      dueShard: S('due#07'),
      dueAt: S('2026-12-01T12:10:00.000Z'),
      phase: S('accepted'),
      version: { N: '1' },
      ...fields,
    };
  }
  const byIndex = (writes: ReturnType<typeof partitionWritesOf>): Record<string, Array<[string, number]>> => {
    const grouped: Record<string, Array<[string, number]>> = {};
    for (const write of writes) (grouped[write.index] ??= []).push([write.partitionKey, write.writeUnits]);
    return grouped;
  };

  it('writes the table and every index whose key attributes a new item has, once each', () => {
    expect(byIndex(partitionWritesOf(undefined, state(), LEDGER_TABLE_DEFINITION))).toEqual({
      [BASE_TABLE]: [['D#d-1', 1]],
      due: [['due#07', 1]],
      byOrigin: [['O#planner', 1]],
      recent: [['R#03', 1]],
    });
  });

  it('writes no KEYS_ONLY index when only a non-key attribute changes', () => {
    const writes = partitionWritesOf(state(), state({ phase: S('submitted'), version: { N: '2' } }), LEDGER_TABLE_DEFINITION);

    expect(byIndex(writes)).toEqual({ [BASE_TABLE]: [['D#d-1', 1]] });
  });

  it('writes an ALL index entry when any attribute changes, and nothing when none does', () => {
    const listed = state({ feedKey: S('attention#retrying'), feedAt: S('2026-12-01T12:00:00.000Z') });

    expect(byIndex(partitionWritesOf(listed, { ...listed, version: { N: '2' } }, LEDGER_TABLE_DEFINITION)).feed).toEqual([['attention#retrying', 1]]);
    expect(byIndex(partitionWritesOf(listed, listed, LEDGER_TABLE_DEFINITION)).feed).toBeUndefined();
  });

  it('counts a changed index key as a delete on the old partition and a put on the new one', () => {
    const moved = partitionWritesOf(state(), state({ dueShard: S('due#02'), dueAt: S('2026-12-01T12:20:00.000Z') }), LEDGER_TABLE_DEFINITION);
    const resorted = partitionWritesOf(state(), state({ dueAt: S('2026-12-01T12:20:00.000Z') }), LEDGER_TABLE_DEFINITION);

    expect(byIndex(moved).due).toEqual([['due#07', 1], ['due#02', 1]]);
    // A new sort key is a new entry too, on the same partition: two writes on it.
    expect(byIndex(resorted).due).toEqual([['due#07', 1], ['due#07', 1]]);
  });

  it('counts one delete when the item loses an index key, one put when it gains one', () => {
    const { dueShard: _shard, dueAt: _at, ...notDue } = state();
    const left = partitionWritesOf(state(), notDue, LEDGER_TABLE_DEFINITION);
    const joined = partitionWritesOf(notDue, state({ feedKey: S('attention#retrying'), feedAt: S('2026-12-01T12:00:00.000Z') }), LEDGER_TABLE_DEFINITION);

    expect(byIndex(left).due).toEqual([['due#07', 1]]);
    expect(byIndex(joined)).toMatchObject({ due: [['due#07', 1]], feed: [['attention#retrying', 1]] });
    expect(byIndex(joined).byOrigin).toBeUndefined();
  });

  it('leaves out an index whose sort key the item lacks', () => {
    const { dueAt: _at, ...halfKeyed } = state();

    expect(byIndex(partitionWritesOf(undefined, halfKeyed, LEDGER_TABLE_DEFINITION)).due).toBeUndefined();
  });

  it('writes every index entry of a deleted item, and the table for the item deleted', () => {
    expect(byIndex(partitionWritesOf(state(), undefined, LEDGER_TABLE_DEFINITION))).toEqual({
      [BASE_TABLE]: [['D#d-1', 1]],
      due: [['due#07', 1]],
      byOrigin: [['O#planner', 1]],
      recent: [['R#03', 1]],
    });
  });

  it('sizes a KEYS_ONLY entry by its keys and an ALL entry by the whole item, the table by the larger image', () => {
    const big = state({ feedKey: S('attention#retrying'), feedAt: S('2026-12-01T12:00:00.000Z'), task: S('x'.repeat(2500)) });
    const created = byIndex(partitionWritesOf(undefined, big, LEDGER_TABLE_DEFINITION));
    const shrunk = byIndex(partitionWritesOf(big, { ...big, task: S('small') }, LEDGER_TABLE_DEFINITION));

    expect(created).toMatchObject({ [BASE_TABLE]: [['D#d-1', 3]], feed: [['attention#retrying', 3]], byOrigin: [['O#planner', 1]], due: [['due#07', 1]] });
    expect(shrunk).toEqual({ [BASE_TABLE]: [['D#d-1', 3]], feed: [['attention#retrying', 3]] });
  });

  it('projects INCLUDE attributes only: a change elsewhere writes no entry', () => {
    const shape = {
      keySchema: [{ AttributeName: 'pk', KeyType: 'HASH' as const }],
      globalSecondaryIndexes: [{ IndexName: 'byStatus', KeySchema: [{ AttributeName: 'status', KeyType: 'HASH' as const }], Projection: { ProjectionType: 'INCLUDE' as const, NonKeyAttributes: ['owner'] } }],
    };
    const item = { pk: S('a'), status: S('open'), owner: S('ann'), note: S('x') };

    expect(byIndex(partitionWritesOf(item, { ...item, note: S('y') }, shape)).byStatus).toBeUndefined();
    expect(byIndex(partitionWritesOf(item, { ...item, owner: S('bob') }, shape)).byStatus).toEqual([['open', 1]]);
  });

  it('doubles every write of a change a transaction made', () => {
    expect(byIndex(partitionWritesOf(undefined, state(), LEDGER_TABLE_DEFINITION, 2))).toMatchObject({ [BASE_TABLE]: [['D#d-1', 2]], due: [['due#07', 2]] });
  });
});

describe('CapacityMeter.partitionWrites (per key, from stream records)', () => {
  const S = (value: string): AttributeValue => ({ S: value });
  const item = (id: string, feedKey: string): Record<string, AttributeValue> => ({ pk: S(`REJ#${id}`), sk: S('REJECTION'), feedKey: S(feedKey), feedAt: S(`2026-12-01T12:00:00.000Z#${id}`) });

  it('sums each key over the records, hottest first, with its rate over the elapsed seconds', () => {
    const meter = new CapacityMeter();
    meter.trackPartitionKeys('ledger', LEDGER_TABLE_DEFINITION);
    meter.recordStreamRecords('ledger', [
      { eventName: 'INSERT', dynamodb: { NewImage: item('m1', 'rejections#2026-12') } },
      { eventName: 'INSERT', dynamodb: { NewImage: item('m2', 'rejections#2026-12') } },
      { eventName: 'INSERT', dynamodb: { NewImage: item('m3', 'rejections#2026-11') } },
    ]);
    meter.recordStreamRecords('other', [{ eventName: 'INSERT', dynamodb: { NewImage: item('m4', 'rejections#2026-12') } }]);

    const report = meter.partitionWrites(2, 1);

    expect(Object.keys(report.tables)).toEqual(['ledger']);
    expect(report.tables.ledger?.feed).toEqual({ totalWriteUnits: 3, keys: 2, top: [{ partitionKey: 'rejections#2026-12', writeUnits: 2, writeUnitsPerSecond: 1 }] });
    expect(report.tables.ledger?.[BASE_TABLE]).toMatchObject({ totalWriteUnits: 3, keys: 3 });
  });

  it('charges nothing for a deletion by TTL, which consumes no write capacity', () => {
    const meter = new CapacityMeter();
    meter.trackPartitionKeys('ledger', LEDGER_TABLE_DEFINITION);
    meter.recordStreamRecords('ledger', [
      { eventName: 'REMOVE', userIdentity: { type: 'Service', principalId: 'dynamodb.amazonaws.com' }, dynamodb: { OldImage: item('m1', 'rejections#2026-12') } },
      { eventName: 'REMOVE', dynamodb: { OldImage: item('m2', 'rejections#2026-12') } },
    ]);

    expect(meter.partitionWrites(1).tables.ledger?.feed).toMatchObject({ totalWriteUnits: 1, keys: 1 });
  });

  it('forgets the keys on reset', () => {
    const meter = new CapacityMeter();
    meter.trackPartitionKeys('ledger', LEDGER_TABLE_DEFINITION);
    meter.recordStreamRecords('ledger', [{ eventName: 'INSERT', dynamodb: { NewImage: item('m1', 'rejections#2026-12') } }]);
    meter.reset();

    expect(meter.partitionWrites(1).tables).toEqual({});
  });
});
