import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../local/engines/index.js';
import { ensureBucket, ensureEventBusWithLog, ensureLedgerTable, ensureQueue, type QueueRef } from '../../local/resources.js';
import { EventLogTail } from '../../local/runtime/event-log.js';
import { StreamEventSource } from '../../local/runtime/stream-event-source.js';
import { redriveDeadLetters } from '../../shared/adapters/dlq-redrive.js';
import { publish } from '../../shared/adapters/event-bus.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { REPLAYED_PREFIX, replayStreamFailures, UnreadableFailureRecordError } from '../../shared/adapters/stream-replay.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { blocked } from '../../shared/dispatch/transitions/core.js';
import type { PrincipalRegistry } from '../../shared/principals/principals.js';
import { notStored } from '../../shared/ledger/port.js';
import { REDRIVEN_FOR } from '../../shared/principals/principals.js';
import { engineClients, uniqueName, testEngines } from '../support/engines.js';
import { eventually } from '../support/eventually.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

const clients = engineClients();
afterAll(() => clients.destroy());

async function drainQueue(url: string): Promise<Array<{ body: string; redrivenFor: string | undefined }>> {
  const out: Array<{ body: string; redrivenFor: string | undefined }> = [];
  for (;;) {
    const { Messages = [] } = await clients.sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60, MessageAttributeNames: ['All'] }));
    if (Messages.length === 0) return out;
    out.push(...Messages.map((message) => ({ body: message.Body ?? '', redrivenFor: message.MessageAttributes?.[REDRIVEN_FOR]?.StringValue })));
  }
}

describe('ledger dlq redrive (fauxqs)', () => {
  let queue: QueueRef;
  let dlq: QueueRef;
  beforeAll(async () => {
    const name = uniqueName('redrive');
    dlq = await ensureQueue(clients.sqs, `${name}-dlq`);
    queue = await ensureQueue(clients.sqs, name);
  });

  it('moves every DLQ message back once, bodies intact, naming the first sender; a second run moves nothing', async () => {
    const bodies = Array.from({ length: 13 }, (_, index) => JSON.stringify({ dispatchId: `d-${index}`, origin: 'planner', target: 'demo-agent', task: { n: index } }));
    for (const body of bodies) await clients.sqs.send(new SendMessageCommand({ QueueUrl: dlq.url, MessageBody: body }));
    // One that an earlier redrive (by an operator: fauxqs stamps every sender with the same id, here
    // registered as the operator) already moved once keeps its first sender, not the operator's id.
    await clients.sqs.send(new SendMessageCommand({ QueueUrl: dlq.url, MessageBody: '{"dispatchId":"d-again"}', MessageAttributes: { [REDRIVEN_FOR]: { DataType: 'String', StringValue: 'AROAFIRSTSENDER' } } }));
    const principals: PrincipalRegistry = { resolve: async () => ({ role: 'operator' }) };

    const first = await redriveDeadLetters(clients.sqs, { deadLetterQueueUrl: dlq.url, queueUrl: queue.url, principals });
    expect(first).toEqual({ moved: 14, failed: [] });
    const again = await redriveDeadLetters(clients.sqs, { deadLetterQueueUrl: dlq.url, queueUrl: queue.url, principals });
    expect(again).toEqual({ moved: 0, failed: [] });

    const arrived = await drainQueue(queue.url);
    expect(arrived.map(({ body }) => body).sort()).toEqual([...bodies, '{"dispatchId":"d-again"}'].sort());
    expect(arrived.find(({ body }) => body.includes('d-again'))?.redrivenFor).toBe('AROAFIRSTSENDER');
    for (const { body, redrivenFor } of arrived) if (!body.includes('d-again')) expect(redrivenFor).toBeTruthy();
    expect(await drainQueue(dlq.url)).toEqual([]);
  });

  it('stops at the limit, leaving the rest for the next run', async () => {
    for (let index = 0; index < 5; index += 1) await clients.sqs.send(new SendMessageCommand({ QueueUrl: dlq.url, MessageBody: `{"n":${index}}` }));
    expect(await redriveDeadLetters(clients.sqs, { deadLetterQueueUrl: dlq.url, queueUrl: queue.url, limit: 2 })).toEqual({ moved: 2, failed: [] });
    expect(await redriveDeadLetters(clients.sqs, { deadLetterQueueUrl: dlq.url, queueUrl: queue.url, visibilityTimeoutSeconds: 1 })).toEqual({ moved: 3, failed: [] });
    expect((await drainQueue(queue.url)).length).toBe(5);
  });

  it('names each moved message and its copy on the queue, so a census can follow a message through the redrive', async () => {
    const sentIds: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      const sent = await clients.sqs.send(new SendMessageCommand({ QueueUrl: dlq.url, MessageBody: `{"copy":${index}}` }));
      sentIds.push(sent.MessageId ?? '');
    }
    const moved: Array<{ from: string; to: string }> = [];
    expect(await redriveDeadLetters(clients.sqs, { deadLetterQueueUrl: dlq.url, queueUrl: queue.url, onMoved: (copy) => moved.push(copy) })).toEqual({ moved: 3, failed: [] });

    expect(moved.map(({ from }) => from).sort()).toEqual([...sentIds].sort());
    const { Messages = [] } = await clients.sqs.send(new ReceiveMessageCommand({ QueueUrl: queue.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60 }));
    expect(Messages.map((message) => message.MessageId).sort()).toEqual(moved.map(({ to }) => to).sort());
  });
});

describe('ledger stream replay (DynamoDB Local stream → fauxqs S3 → moto EventBridge)', () => {
  let bucket: string;
  let busName: string;
  let logQueue: QueueRef;
  let batches: DynamoDBStreamEvent[];
  let dispatchIds: string[];

  beforeAll(async () => {
    const name = uniqueName('replay');
    bucket = await ensureBucket(clients.s3, name);
    ({ busName, logQueue } = await ensureEventBusWithLog(clients.eventBridge, clients.motoSqs, { bus: name, rule: `${name}-all`, queue: `${name}-log` }));
    const ledger = await ensureLedgerTable(clients.dynamodb, name);
    const table = new LedgerTable(DynamoDBDocumentClient.from(clients.dynamodb, { marshallOptions: { removeUndefinedValues: true } }), { tableName: ledger.name, retentionSeconds: 86_400 });
    dispatchIds = [uniqueName('d'), uniqueName('d')];
    const first = accepted(newDispatchFactory({ dispatchId: dispatchIds[0] }), NOW);
    await table.commit(notStored(first), submitted(first, { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, NOW));
    const second = accepted(newDispatchFactory({ dispatchId: dispatchIds[1] }), NOW);
    await table.commit(notStored(second), blocked(second, 'unknown_target', 'no target "nope"', NOW));
    // The batches exactly as Lambda delivers them; the "publisher" gives up on all of them.
    batches = [];
    const source = new StreamEventSource({
      functionName: 'publisher',
      handler: async (event) => {
        batches.push(event);
        return { batchItemFailures: [] };
      },
      streams: clients.streams,
      streamArn: ledger.streamArn,
      region: LOCAL_REGION,
    });
    let handled = 0;
    for (let poll = 0; poll < 20 && handled < 2; poll += 1) handled += await source.pollOnce();
    expect(handled).toBe(2);
    // What Lambda writes to an S3 on-failure destination: metadata and the whole invocation.
    for (const [index, event] of batches.entries()) {
      const record = {
        requestContext: { requestId: `req-${index}`, functionArn: 'arn:aws:lambda:us-east-1:111122223333:function:publisher', condition: 'RetryAttemptsExhausted', approximateInvokeCount: 11 },
        responseContext: { statusCode: 200, executedVersion: '$LATEST', functionError: 'Unhandled' },
        version: '1.0',
        timestamp: NOW.toISOString(),
        DDBStreamBatchInfo: { shardId: 'shard-1', batchSize: event.Records.length, streamArn: ledger.streamArn },
        // Lambda keeps the invocation as JSON; the second record carries it as a string, which replay also reads.
        payload: index === 0 ? event : JSON.stringify(event),
      };
      await clients.s3.send(new PutObjectCommand({ Bucket: bucket, Key: `aws/lambda/esm/2026/12/01/00/${index}-failure.json`, Body: JSON.stringify(record) }));
    }
  });

  it('publishes the parked batches\' events once, marks them, and a second run publishes nothing', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'replay-')), 'events.jsonl');
    const tail = new EventLogTail({ sqs: clients.motoSqs, queueUrl: logQueue.url, file });
    const deps = { s3: clients.s3, bucket, publish: (events: Parameters<typeof publish>[0]) => publish(events, { client: clients.eventBridge, busName }) };

    const first = await replayStreamFailures(deps);
    expect(first).toEqual({ found: batches.length, replayed: batches.length, alreadyReplayed: 0, events: 4 });
    let seen = 0;
    await eventually('the 4 replayed events in the log', async () => (seen += await tail.drainOnce(1)), { intervalMs: 0, until: (n) => n >= 4 });
    const delivered = readFileSync(file, 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line) as { 'detail-type': string; detail: { dispatchId: string; eventId: string } });
    expect(delivered.filter((event) => event.detail.dispatchId === dispatchIds[0]).map((event) => event['detail-type']).sort()).toEqual(['Dispatch Submitted']);
    expect(delivered.filter((event) => event.detail.dispatchId === dispatchIds[1]).map((event) => event['detail-type']).sort()).toEqual(['Dispatch Accepted', 'Dispatch Blocked', 'Result Ready']);

    const second = await replayStreamFailures(deps);
    expect(second).toEqual({ found: batches.length, replayed: 0, alreadyReplayed: batches.length, events: 0 });
    expect(await tail.drainOnce(1)).toBe(0);
  });

  it('refuses a record that is not a stream on-failure record, naming it, and marks nothing', async () => {
    const odd = uniqueName('odd');
    const other = await ensureBucket(clients.s3, odd);
    await clients.s3.send(new PutObjectCommand({ Bucket: other, Key: 'not-a-failure.json', Body: '{"hello":"world"}' }));
    const attempt = replayStreamFailures({ s3: clients.s3, bucket: other, publish: async () => undefined });
    await expect(attempt).rejects.toBeInstanceOf(UnreadableFailureRecordError);
    await expect(attempt).rejects.toThrow('not-a-failure.json');
    const { Contents = [] } = await clients.s3.send(new (await import('@aws-sdk/client-s3')).ListObjectsV2Command({ Bucket: other, Prefix: REPLAYED_PREFIX }));
    expect(Contents).toEqual([]);
  });
});

describe('the operations CLI against AWS-style endpoints (the SDK\'s AWS_ENDPOINT_URL_* variables)', () => {
  const run = async (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
    const engines = testEngines();
    const env = {
      ...process.env,
      AWS_REGION: LOCAL_REGION,
      AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
      AWS_ENDPOINT_URL_DYNAMODB: engines.dynamodbEndpoint,
      AWS_ENDPOINT_URL_SQS: engines.sqsEndpoint,
    };
    try {
      const { stdout, stderr } = await promisify(execFile)(process.execPath, ['bin/ledger.mjs', ...args], { env, encoding: 'utf8' });
      return { code: 0, stdout, stderr };
    } catch (error) {
      const failed = error as { code?: number; stdout?: string; stderr?: string };
      return { code: failed.code ?? -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
    }
  };

  it('registers a principal and a target in the table the functions read', async () => {
    const ledger = await ensureLedgerTable(clients.dynamodb, uniqueName('cli-registry'));
    expect(await run('registry', 'principal', 'put', '--table', ledger.name, '--id', 'AROAPLANNER', '--origin', 'planner')).toMatchObject({ code: 0, stdout: 'principal AROAPLANNER → origin planner\n' });
    expect((await run('registry', 'target', 'put', '--table', ledger.name, '--name', 'research-agent', '--base-url', 'https://agents.example.com', '--secret-id', 'dispatch-ledger/targets/research-agent')).code).toBe(0);
    const table = new LedgerTable(DynamoDBDocumentClient.from(clients.dynamodb), { tableName: ledger.name, retentionSeconds: 86_400 });
    expect(await table.resolve('AROAPLANNER')).toEqual({ role: 'origin', origin: 'planner' });
    expect(await table.getTarget('research-agent')).toEqual({ name: 'research-agent', kind: 'http', baseUrl: 'https://agents.example.com', secretRef: 'dispatch-ledger/targets/research-agent' });
    const refused = await run('registry', 'principal', 'put', '--table', ledger.name, '--id', 'AROAX', '--origin', 'Not An Origin');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('--origin must match');
    // How its results inbox treats an origin (CONTRACT §10), read by the functions from the table.
    expect((await run('registry', 'origin', 'put', '--table', ledger.name, '--origin', 'planner', '--max-delivery-attempts', '3', '--result-ttl-hours', '0.5')).code).toBe(0);
    expect(await table.getOriginSettings('planner')).toEqual({ maxDeliveryAttempts: 3, resultTtlHours: 0.5 });
    expect(await table.getOriginSettings('someone-else')).toEqual({ maxDeliveryAttempts: 5, resultTtlHours: 48 });
    expect((await run('registry', 'origin', 'put', '--table', ledger.name, '--origin', 'planner', '--max-delivery-attempts', '0')).code).not.toBe(0);
  });

  it('redrives a DLQ given the stack\'s queue URLs', async () => {
    const name = uniqueName('cli-redrive');
    const dlq = await ensureQueue(clients.sqs, `${name}-dlq`);
    const queue = await ensureQueue(clients.sqs, name);
    await clients.sqs.send(new SendMessageCommand({ QueueUrl: dlq.url, MessageBody: '{"dispatchId":"d-cli"}' }));
    const moved = await run('dlq', 'redrive', '--dlq-url', dlq.url, '--queue-url', queue.url, '--json');
    expect(moved.stderr).toBe('');
    expect(moved).toMatchObject({ code: 0, stdout: '{"moved":1,"failed":[]}\n' });
    expect(await run('dlq', 'redrive', '--dlq-url', dlq.url, '--queue-url', queue.url, '--json')).toMatchObject({ code: 0, stdout: '{"moved":0,"failed":[]}\n' });
    expect((await drainQueue(queue.url)).map(({ body }) => body)).toEqual(['{"dispatchId":"d-cli"}']);
  });
});
