import { CreateTableCommand, DeleteItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import type { DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { afterAll, describe, expect, it } from 'vitest';
import { StreamEventSource, type StreamHandler } from '../../local/runtime/stream-event-source.js';
import { DynamoDBStreamsClient, ExpiredIteratorException } from '@aws-sdk/client-dynamodb-streams';
import { LOCAL_CREDENTIALS } from '../../local/engines/index.js';
import { engineClients, testEngines, uniqueName } from '../support/engines.js';
import { countCommands } from '../../bench/command-watch.js';
import { eventually } from '../support/eventually.js';

const clients = engineClients();
afterAll(() => clients.destroy());

async function tableWithStream(): Promise<{ table: string; streamArn: string }> {
  const table = uniqueName('stream');
  const created = await clients.dynamodb.send(
    new CreateTableCommand({
      TableName: table,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
    }),
  );
  const streamArn = created.TableDescription?.LatestStreamArn;
  if (!streamArn) throw new Error('no stream');
  return { table, streamArn };
}

async function putItems(table: string, count: number): Promise<void> {
  for (let n = 0; n < count; n += 1) {
    await clients.dynamodb.send(new PutItemCommand({ TableName: table, Item: { pk: { S: `item-${n}` }, n: { N: String(n) }, blob: { B: Buffer.from([n]) } } }));
  }
}

function source(streamArn: string, handler: StreamHandler, discarded: Array<{ records: readonly DynamoDBRecord[] }> = []) {
  return new StreamEventSource({
    functionName: 'publisher',
    handler,
    streams: clients.streams,
    streamArn,
    region: 'us-east-1',
    batchSize: 10,
    maxRetryAttempts: 2,
    onDiscard: (batch) => discarded.push(batch),
  });
}

const keysOf = (event: DynamoDBStreamEvent) => event.Records.map((record) => record.dynamodb?.Keys?.pk?.S);

describe('StreamEventSource on DynamoDB Local streams', () => {
  it('delivers every change in order as a Lambda DynamoDBStreamEvent', async () => {
    const { table, streamArn } = await tableWithStream();
    await putItems(table, 3);
    const events: DynamoDBStreamEvent[] = [];
    const poller = source(streamArn, async (event) => {
      events.push(event);
    });

    expect(await poller.pollOnce()).toBe(3);
    expect(await poller.pollOnce()).toBe(0);

    const record = events[0]?.Records[0];
    expect(keysOf(events[0] as DynamoDBStreamEvent)).toEqual(['item-0', 'item-1', 'item-2']);
    expect(record).toMatchObject({ eventName: 'INSERT', eventSource: 'aws:dynamodb', eventSourceARN: streamArn });
    expect(record?.dynamodb?.NewImage?.n).toEqual({ N: '0' });
    // Binary attributes arrive base64-encoded, as Lambda delivers them.
    expect(record?.dynamodb?.NewImage?.blob).toEqual({ B: Buffer.from([0]).toString('base64') });
    expect(typeof record?.dynamodb?.ApproximateCreationDateTime).toBe('number');
  });

  it('lists the shards once, not on every poll, while the shard it reads stays open (regression: DescribeStream ran four times a second per mapping)', async () => {
    const { table, streamArn } = await tableWithStream();
    await putItems(table, 2);
    const streams = new DynamoDBStreamsClient({ endpoint: testEngines().dynamodbEndpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS });
    const commands = countCommands(streams);
    const seen: Array<string | undefined> = [];
    const poller = new StreamEventSource({ functionName: 'publisher', handler: async (event) => void seen.push(...keysOf(event)), streams, streamArn, region: 'us-east-1', shardDiscoveryMs: 60_000 });
    try {
      for (let poll = 0; poll < 20; poll += 1) await poller.pollOnce();
      await clients.dynamodb.send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'later' } } }));
      expect(await poller.pollOnce()).toBe(1);
    } finally {
      streams.destroy();
    }
    expect(seen).toEqual(['item-0', 'item-1', 'later']);
    expect(commands.get('DescribeStream')).toBe(1);
  });

  it('retries from the first reported failure, keeping what succeeded before it', async () => {
    const { table, streamArn } = await tableWithStream();
    await putItems(table, 4);
    const events: DynamoDBStreamEvent[] = [];
    const poller = source(streamArn, async (event) => {
      events.push(event);
      if (events.length === 1) return { batchItemFailures: [{ itemIdentifier: event.Records[2]?.dynamodb?.SequenceNumber ?? '' }] };
      return { batchItemFailures: [] };
    });

    await poller.pollOnce();
    await poller.pollOnce();

    expect(events.map(keysOf)).toEqual([
      ['item-0', 'item-1', 'item-2', 'item-3'],
      ['item-2', 'item-3'],
    ]);
  });

  it('hands a batch that keeps failing to the on-failure destination after the retries, then moves on', async () => {
    const { table, streamArn } = await tableWithStream();
    await putItems(table, 2);
    const discarded: Array<{ records: readonly DynamoDBRecord[] }> = [];
    let calls = 0;
    const delivered: Array<string | undefined> = [];
    const poller = source(
      streamArn,
      async (event) => {
        calls += 1;
        if (calls <= 3) throw new Error('publisher down');
        delivered.push(...keysOf(event));
      },
      discarded,
    );

    for (let poll = 0; poll < 4; poll += 1) await poller.pollOnce();

    // 1 attempt + 2 retries, then the batch is discarded to the destination.
    expect(calls).toBe(3);
    expect(discarded).toHaveLength(1);
    expect(discarded[0]?.records.map((record) => record.dynamodb?.Keys?.pk?.S)).toEqual(['item-0', 'item-1']);
    await clients.dynamodb.send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'after' } } }));
    expect(await poller.pollOnce()).toBe(1);
    expect(delivered).toEqual(['after']);
  });

  it('delivers a batch again when its checkpoint is lost (census fault), and a success between failures resets the retry count', async () => {
    const { table, streamArn } = await tableWithStream();
    await putItems(table, 2);
    const discarded: Array<{ records: readonly DynamoDBRecord[] }> = [];
    // fail, fail, succeed but lose the checkpoint, fail, succeed: with maxRetryAttempts 2 the count
    // must start again after the success, or the third failure discards a batch that was taken.
    const script = ['fail', 'fail', 'ok', 'fail', 'ok'];
    let calls = 0;
    let redeliveries = 0;
    const poller = new StreamEventSource({
      functionName: 'publisher',
      handler: async () => {
        const step = script[calls];
        calls += 1;
        if (step === 'fail') throw new Error('publisher down');
      },
      streams: clients.streams,
      streamArn,
      region: 'us-east-1',
      batchSize: 10,
      maxRetryAttempts: 2,
      onDiscard: (batch) => discarded.push(batch),
      redeliverBatch: () => redeliveries++ === 0,
    });

    for (let poll = 0; poll < 6; poll += 1) await poller.pollOnce();

    expect(calls).toBe(5);
    expect(discarded).toEqual([]);
  });

  it("waits for an invocation that outran its timeout before the shard's next (regression: the retry ran beside it, two invocations on one shard's records at once)", async () => {
    const { table, streamArn } = await tableWithStream();
    await putItems(table, 2);
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let calls = 0;
    let running = 0;
    let most = 0;
    const poller = new StreamEventSource({
      functionName: 'publisher',
      handler: async () => {
        calls += 1;
        running += 1;
        most = Math.max(most, running);
        // The first invocation outruns its 100 ms timeout and goes on until the gate opens.
        if (calls === 1) await gate;
        running -= 1;
      },
      streams: clients.streams,
      streamArn,
      region: 'us-east-1',
      batchSize: 10,
      maxRetryAttempts: 5,
      timeoutMs: 100,
    });

    await poller.pollOnce();
    await poller.pollOnce();
    await poller.pollOnce();
    expect(calls).toBe(1);
    release();
    await eventually('the batch retried once the late run ended', async () => {
      await poller.pollOnce();
      return calls >= 2 ? true : undefined;
    });
    expect(most).toBe(1);
  });

  it('goes on after ten timeouts of an invocation that never ends, and says so (a shard is never silenced for good)', async () => {
    const { table, streamArn } = await tableWithStream();
    await putItems(table, 1);
    let calls = 0;
    const errors: string[] = [];
    const poller = new StreamEventSource({
      functionName: 'publisher',
      handler: async () => {
        calls += 1;
        if (calls === 1) await new Promise<never>(() => undefined);
      },
      streams: clients.streams,
      streamArn,
      region: 'us-east-1',
      batchSize: 10,
      maxRetryAttempts: 5,
      timeoutMs: 50,
      onError: (error) => errors.push(String(error)),
    });
    await poller.pollOnce();
    await eventually('the batch retried past the bound', async () => {
      await poller.pollOnce();
      return calls >= 2 ? true : undefined;
    });
    expect(errors).toEqual([expect.stringMatching(/publisher: an invocation is still running 500 ms after its timeout; the shard goes on/)]);
  });

  it('counts retries per checkpoint: a partial failure past the first record moves the checkpoint and starts the count again (regression: one budget was shared by every record that failed once, and a batch was discarded whose records had each failed once)', async () => {
    const { table, streamArn } = await tableWithStream();
    await putItems(table, 5);
    const discarded: Array<{ records: readonly DynamoDBRecord[] }> = [];
    const failedOnce = new Set<string>();
    const delivered: string[] = [];
    // Each batch's second record fails the first time it is seen: the checkpoint moves one record each time.
    const poller = source(streamArn, async (event) => {
      const second = event.Records[1]?.dynamodb?.SequenceNumber;
      const upTo = second !== undefined && !failedOnce.has(second) ? 1 : event.Records.length;
      if (second !== undefined && upTo === 1) failedOnce.add(second);
      delivered.push(...keysOf({ Records: event.Records.slice(0, upTo) }).map(String));
      return upTo === 1 ? { batchItemFailures: [{ itemIdentifier: second ?? '' }] } : { batchItemFailures: [] };
    }, discarded);

    for (let poll = 0; poll < 8 && delivered.length < 5; poll += 1) await poller.pollOnce();

    expect(discarded).toEqual([]);
    expect(delivered).toHaveLength(5);
    expect(new Set(delivered).size).toBe(5);
  });
});

describe('nothing forgotten: two stream functions on one table (publisher and retention)', () => {
  it('gives each of two sources on one stream every record, each from its own shard iterators', async () => {
    const { table, streamArn } = await tableWithStream();
    await putItems(table, 3);
    const first: Array<string | undefined> = [];
    const second: Array<string | undefined> = [];
    const one = source(streamArn, async (event) => {
      first.push(...keysOf(event));
    });
    const other = source(streamArn, async (event) => {
      second.push(...keysOf(event));
    });

    // One source reading does not move the other on.
    expect(await one.pollOnce()).toBe(3);
    await clients.dynamodb.send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'later' } } }));
    expect(await other.pollOnce()).toBe(4);
    expect(await one.pollOnce()).toBe(1);
    expect(first).toEqual(['item-0', 'item-1', 'item-2', 'later']);
    expect(second).toEqual(first);
  });

  it('hands the handler only the records its filter passes, as a mapping\'s filter criteria do, and moves past the rest', async () => {
    const { table, streamArn } = await tableWithStream();
    await putItems(table, 2);
    await clients.dynamodb.send(new DeleteItemCommand({ TableName: table, Key: { pk: { S: 'item-0' } } }));
    const seen: DynamoDBRecord[] = [];
    const filtered = new StreamEventSource({
      functionName: 'retention',
      handler: async (event) => {
        seen.push(...event.Records);
      },
      streams: clients.streams,
      streamArn,
      region: 'us-east-1',
      filter: (record) => record.eventName === 'REMOVE',
    });

    expect(await filtered.pollOnce()).toBe(1);
    expect(await filtered.pollOnce()).toBe(0);
    expect(seen.map((record) => [record.eventName, record.dynamodb?.Keys?.pk?.S])).toEqual([['REMOVE', 'item-0']]);
    // A REMOVE DynamoDB Local makes carries no userIdentity (only TTL deletions in AWS do).
    expect(seen[0]?.userIdentity).toBeUndefined();
  });

  // Regression: the source kept only its shard iterator. Once that expired (DynamoDB's iterators live 15
  // minutes: a laptop asleep is enough), every GetRecords failed for good, and the publisher and retention
  // read nothing more until a restart. It now renews the iterator after the last record it read.
  it('renews an expired shard iterator after the last record read: nothing lost, nothing read twice', async () => {
    const { table, streamArn } = await tableWithStream();
    await putItems(table, 3);
    const streams = new DynamoDBStreamsClient({ endpoint: testEngines().dynamodbEndpoint, region: 'us-east-1', credentials: LOCAL_CREDENTIALS });
    // The iterator the next GetRecords uses expires for good, as DynamoDB's does after 15 minutes unused.
    const expired = new Set<string>();
    let expireNext = false;
    streams.middlewareStack.add(
      (next, context) => async (args) => {
        const iterator = (args.input as { ShardIterator?: string }).ShardIterator;
        if (context.commandName === 'GetRecordsCommand' && iterator !== undefined) {
          if (expireNext) {
            expired.add(iterator);
            expireNext = false;
          }
          if (expired.has(iterator)) throw new ExpiredIteratorException({ message: 'Iterator expired', $metadata: {} });
        }
        return next(args);
      },
      { step: 'initialize', name: 'expireIterators' },
    );
    const seen: Array<string | undefined> = [];
    const errors: unknown[] = [];
    const poller = new StreamEventSource({ functionName: 'publisher', handler: async (event) => void seen.push(...keysOf(event)), streams, streamArn, region: 'us-east-1', onError: (error) => errors.push(error) });
    try {
      expect(await poller.pollOnce()).toBe(3);
      await clients.dynamodb.send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'after-sleep' } } }));
      expireNext = true;
      await eventually('the record after the expiry', async () => {
        await poller.pollOnce();
        return seen.length;
      }, { until: (count) => count === 4, timeoutMs: 5_000 });
      expect(expired.size).toBe(1);
      expect(seen).toEqual(['item-0', 'item-1', 'item-2', 'after-sleep']);
      expect(await poller.pollOnce()).toBe(0);
    } finally {
      streams.destroy();
    }
  });
});
