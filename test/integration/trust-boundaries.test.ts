import { ReceiveMessageCommand, SendMessageCommand, type MessageAttributeValue } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { dlq } from '../../cli/operations.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../local/engines/index.js';
import { startDemoAgent, type DemoAgent } from '../../local/demo-agent/server.js';
import { ensureBucket, ensureLedgerTable, ensureQueue, type QueueRef } from '../../local/resources.js';
import { redriveDeadLetters } from '../../shared/adapters/dlq-redrive.js';
import { httpTarget } from '../../shared/adapters/http-target.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { REDRIVEN_FOR } from '../../shared/principals/principals.js';
import { takeDispatchMessage, type IntakeDeps, type IntakeRecord } from '../../shared/usecases/intake.js';
import type { PrincipalRegistry } from '../../shared/principals/principals.js';
import { engineClients, uniqueName, testEngines } from '../support/engines.js';

/**
 * CONTRACT §8 v2: `ledger dlq redrive` never lets a message speak for an origin its real sender could
 * not. fauxqs stamps one SenderId (its account, 000000000000) on every message, so the senders the
 * intake sees are crafted in the IntakeRecord; the registry, the queues and the table are real.
 */

const FAUXQS_SENDER = '000000000000';
const ORIGIN_A = 'AROAORIGINA';
const ORIGIN_B = 'AROAORIGINB';
const OPERATOR = 'AROAONCALL';

const clients = engineClients();
const documents = DynamoDBDocumentClient.from(clients.dynamodb, { marshallOptions: { removeUndefinedValues: true } });
let agent: DemoAgent;
let blobs: S3Blobs;

/** A registry (a ledger table of its own) with origins a and b, an operator, and fauxqs's sender as `senderIs`. */
async function registryWhere(senderIs: 'origin-a' | 'operator'): Promise<LedgerTable & { readonly tableName: string }> {
  const { name } = await ensureLedgerTable(clients.dynamodb, uniqueName('trust'));
  const table = Object.assign(new LedgerTable(documents, { tableName: name, retentionSeconds: 86_400 }), { tableName: name });
  await table.putPrincipal(ORIGIN_A, { role: 'origin', origin: 'origin-a' });
  await table.putPrincipal(ORIGIN_B, { role: 'origin', origin: 'origin-b' });
  await table.putPrincipal(OPERATOR, { role: 'operator' });
  await table.putPrincipal(FAUXQS_SENDER, senderIs === 'operator' ? { role: 'operator' } : { role: 'origin', origin: 'origin-a' });
  await table.putTarget({ name: 'demo-agent', kind: 'http', baseUrl: agent.url });
  return table;
}

function intakeDeps(table: LedgerTable): IntakeDeps {
  return {
    store: table,
    blobs,
    targetFor: (registration) => httpTarget(registration),
    principals: table,
    principalMode: 'enforce',
    callbackUrl: 'http://127.0.0.1:9',
    retryPolicy: DEFAULT_RETRY_POLICY,
    now: () => new Date(),
    claimSeconds: 60,
  };
}

const body = (origin: string) => JSON.stringify({ dispatchId: uniqueName('d'), origin, target: 'demo-agent', task: { behavior: 'complete' } });

/** Puts `messageBody` on a fresh DLQ, redrives it with `principals`, and returns what arrived on the queue. */
async function redriveOne(
  messageBody: string,
  attributes: Record<string, MessageAttributeValue>,
  principals: PrincipalRegistry | undefined,
  redrive: (urls: { deadLetterQueueUrl: string; queueUrl: string }) => Promise<unknown> = async (urls) =>
    expect(await redriveDeadLetters(clients.sqs, { ...urls, ...(principals ? { principals } : {}) })).toEqual({ moved: 1, failed: [] }),
) {
  const name = uniqueName('trust-q');
  const dlqRef: QueueRef = await ensureQueue(clients.sqs, `${name}-dlq`);
  const queue: QueueRef = await ensureQueue(clients.sqs, name);
  await clients.sqs.send(new SendMessageCommand({ QueueUrl: dlqRef.url, MessageBody: messageBody, MessageAttributes: attributes }));
  await redrive({ deadLetterQueueUrl: dlqRef.url, queueUrl: queue.url });
  const { Messages = [] } = await clients.sqs.send(new ReceiveMessageCommand({ QueueUrl: queue.url, MaxNumberOfMessages: 1, WaitTimeSeconds: 1, MessageAttributeNames: ['All'] }));
  const [arrived] = Messages;
  if (!arrived) throw new Error('the redriven message did not arrive');
  return { body: arrived.Body ?? '', messageId: arrived.MessageId ?? '', redrivenFor: arrived.MessageAttributes?.[REDRIVEN_FOR]?.StringValue };
}

beforeAll(async () => {
  agent = await startDemoAgent({ callbackTries: 1 });
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('trust-blobs')));
});
afterAll(async () => {
  await agent.stop();
  clients.destroy();
});

describe('trust boundaries: dlq redrive never launders an origin', () => {
  it('carries the DLQ copy\'s own SenderId, ignoring a LedgerRedrivenFor its (non-operator) sender set', async () => {
    const registry = await registryWhere('origin-a');
    // origin-a's sender puts origin-b's principal in the attribute, and its message dead-letters.
    const forged = { [REDRIVEN_FOR]: { DataType: 'String', StringValue: ORIGIN_B } };
    const moved = await redriveOne(body('origin-b'), forged, registry);

    // The operator's redriven copy (SenderId: the operator) speaks for origin-a's sender, not for b.
    const record: IntakeRecord = { messageId: moved.messageId, body: moved.body, senderId: `${OPERATOR}:alice`, redrivenFor: moved.redrivenFor };
    expect(await takeDispatchMessage(intakeDeps(registry), record)).toMatchObject({ outcome: 'rejected', reason: 'origin_not_allowed' });
    expect(moved.redrivenFor).toBe(FAUXQS_SENDER);
  });

  it('without a registry to ask, carries the SenderId too (the safe default)', async () => {
    const moved = await redriveOne(body('origin-b'), { [REDRIVEN_FOR]: { DataType: 'String', StringValue: ORIGIN_B } }, undefined);
    expect(moved.redrivenFor).toBe(FAUXQS_SENDER);
    const plain = await redriveOne(body('origin-a'), {}, undefined);
    expect(plain.redrivenFor).toBe(FAUXQS_SENDER);
  });

  it('keeps the carried value when the DLQ copy was itself sent by a registered operator (redriven before, dead-lettered again)', async () => {
    const registry = await registryWhere('operator');
    const moved = await redriveOne(body('origin-a'), { [REDRIVEN_FOR]: { DataType: 'String', StringValue: `${ORIGIN_A}:worker-1` } }, registry);
    expect(moved.redrivenFor).toBe(`${ORIGIN_A}:worker-1`);

    const record: IntakeRecord = { messageId: moved.messageId, body: moved.body, senderId: `${OPERATOR}:alice`, redrivenFor: moved.redrivenFor };
    expect(await takeDispatchMessage(intakeDeps(registry), record)).toMatchObject({ outcome: 'submitted' });
  });
});

describe('trust boundaries: the intake honours LedgerRedrivenFor only from a registered operator', () => {
  let registry: LedgerTable;
  beforeAll(async () => {
    registry = await registryWhere('origin-a');
  });

  it('does not let an origin-a sender speak for origin-b by setting LedgerRedrivenFor to b\'s principal', async () => {
    for (const senderId of [ORIGIN_A, `${ORIGIN_A}:session-1`, ORIGIN_B.replace('B', 'C'), undefined]) {
      const record: IntakeRecord = { messageId: uniqueName('m'), body: body('origin-b'), senderId, redrivenFor: ORIGIN_B };
      expect(await takeDispatchMessage(intakeDeps(registry), record), String(senderId)).toMatchObject({ outcome: 'rejected', reason: 'origin_not_allowed' });
    }
  });

  it('lets a message an operator redrove speak for its first sender, and only for that sender', async () => {
    const forA: IntakeRecord = { messageId: uniqueName('m'), body: body('origin-a'), senderId: `${OPERATOR}:alice`, redrivenFor: `${ORIGIN_A}:worker-1` };
    expect(await takeDispatchMessage(intakeDeps(registry), forA)).toMatchObject({ outcome: 'submitted' });
    const forB: IntakeRecord = { messageId: uniqueName('m'), body: body('origin-b'), senderId: `${OPERATOR}:alice`, redrivenFor: `${ORIGIN_A}:worker-1` };
    expect(await takeDispatchMessage(intakeDeps(registry), forB)).toMatchObject({ outcome: 'rejected', reason: 'origin_not_allowed' });
    // The operator itself speaks for no origin.
    const own: IntakeRecord = { messageId: uniqueName('m'), body: body('origin-a'), senderId: `${OPERATOR}:alice` };
    expect(await takeDispatchMessage(intakeDeps(registry), own)).toMatchObject({ outcome: 'rejected', reason: 'origin_not_allowed' });
  });
});

describe('trust boundaries: ledger dlq redrive (the CLI) asks the registry with --table', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('keeps an operator-written LedgerRedrivenFor with --table, and carries the SenderId without it', async () => {
    const engines = testEngines();
    Object.assign(process.env, {
      AWS_REGION: LOCAL_REGION,
      AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
      AWS_ENDPOINT_URL_DYNAMODB: engines.dynamodbEndpoint,
      AWS_ENDPOINT_URL_SQS: engines.sqsEndpoint,
    });
    const registry = await registryWhere('operator');
    const { tableName } = registry;
    const carried = { [REDRIVEN_FOR]: { DataType: 'String', StringValue: ORIGIN_A } };
    const run = (extra: string[]) => async (urls: { deadLetterQueueUrl: string; queueUrl: string }) => {
      const printed: string[] = [];
      expect(await dlq(['redrive', '--dlq-url', urls.deadLetterQueueUrl, '--queue-url', urls.queueUrl, ...extra, '--json'], (line) => printed.push(line))).toBe(0);
      expect(printed).toEqual(['{"moved":1,"failed":[]}']);
    };
    expect((await redriveOne(body('origin-a'), carried, undefined, run(['--table', tableName]))).redrivenFor).toBe(ORIGIN_A);
    expect((await redriveOne(body('origin-a'), carried, undefined, run([]))).redrivenFor).toBe(FAUXQS_SENDER);
  });
});
