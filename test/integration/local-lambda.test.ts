import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { MAX_ASYNC_PAYLOAD_BYTES, startLocalLambda, type LocalLambda } from '../../local/runtime/lambda-invoke.js';
import { lambdaTarget } from '../../shared/adapters/lambda-target.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { takeDispatchMessage } from '../../shared/usecases/intake.js';
import { parseLambdaRunId, type LambdaTargetRegistration } from '../../shared/targets/port.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { eventually } from '../support/eventually.js';
import { intakeDepsFactory } from '../support/factories.js';
import { failuresQueue } from '../support/sqs-records.js';

/**
 * Lambda targets through the local Lambda (CONTRACT §12) on DynamoDB Local: the ledger's real
 * LambdaClient invokes asynchronously, the local runtime retries as Lambda does and hands its
 * on-failure record to the ledger, which records the run failed with Lambda's own error.
 */

const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
let table: LedgerTable;
let blobs: S3Blobs;
let runtime: LocalLambda;
let lambda: LambdaClient;
const received: unknown[] = [];

beforeAll(async () => {
  const tableName = uniqueName('local-lambda');
  await ensureLedgerTable(clients.dynamodb, tableName);
  table = new LedgerTable(documents, { tableName, retentionSeconds: 86_400 });
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('local-lambda-blobs')));
  runtime = await startLocalLambda({
    region: 'us-east-1',
    retryDelaysMs: [10, 10],
    functions: [
      { name: 'works', timeoutMs: 1_000, handler: async (event) => void received.push(event) },
      { name: 'throws', timeoutMs: 1_000, handler: async () => Promise.reject(Object.assign(new Error('the model quota is spent'), { name: 'QuotaError' })) },
      // Never settles: only the runtime's timeout ends it (no timer in the test).
      { name: 'hangs', timeoutMs: 100, handler: () => new Promise<never>(() => undefined) },
    ],
    // The record must still name the run's own function. One that comes before the intake wrote the run
    // (10 ms retries can beat that write) is brought back until it is taken, as SQS would.
    onFailure: failuresQueue(() => table),
  });
  lambda = loopbackOnly(new LambdaClient({ region: 'us-east-1', endpoint: runtime.url, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
});
afterAll(async () => {
  await runtime.close();
  lambda.destroy();
  clients.destroy();
  dynamodb.destroy();
});

async function dispatchTo(functionName: string): Promise<string> {
  const registration: LambdaTargetRegistration = { name: functionName, kind: 'lambda', functionArn: `arn:aws:lambda:us-east-1:000000000000:function:${functionName}`, timeoutSeconds: 1 };
  await table.putTarget(registration);
  const port = lambdaTarget(registration, {
    lambda,
    documents,
    failureOf: async (runId) => {
      const named = parseLambdaRunId(runId);
      return named ? table.getLambdaFailure(named.dispatchId, named.attempt) : undefined;
    },
    now: () => new Date(),
  });
  const dispatchId = uniqueName('d');
  await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor: () => port, now: () => new Date() }), {
    messageId: uniqueName('m'),
    body: JSON.stringify({ dispatchId, origin: 'planner', target: functionName, task: { goal: 'review' }, delivery: { mode: 'detached' } }),
    senderId: 'test',
  });
  return dispatchId;
}

describe('lambda targets through the local Lambda', () => {
  it('submits by an asynchronous invoke: the run is {dispatchId}:1, queued, with the request id as proof; the function gets the submission body', async () => {
    const dispatchId = await dispatchTo('works');
    const state = await table.getState(dispatchId);
    expect(state).toMatchObject({ phase: 'submitted', runId: `${dispatchId}:1`, execution: { status: 'queued' } });
    expect(state?.receipts.at(-1)).toMatchObject({ event: 'dispatch_submitted', runId: `${dispatchId}:1`, requestId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    await runtime.idle();
    expect(received).toContainEqual(expect.objectContaining({ dispatchId, attempt: 1, runId: `${dispatchId}:1`, task: { goal: 'review' }, callbackUrl: 'http://127.0.0.1:9' }));
  });

  it("records a function that throws past Lambda's retries as failed with Lambda's error (3 tries)", async () => {
    const dispatchId = await dispatchTo('throws');
    const state = await eventually('the failure taken in', async () => {
      const current = await table.getState(dispatchId);
      return current?.execution.status === 'failed' ? current : undefined;
    });
    expect(state.execution).toMatchObject({ status: 'failed', nativeStatus: 'failed', nativeDetail: 'QuotaError', result: { summary: 'QuotaError: the model quota is spent' } });
    expect(runtime.stats().throws).toMatchObject({ accepted: 1, tries: 3, failed: 1 });
  });

  it('records a function that times out as failed, in the runtime’s own words', async () => {
    const dispatchId = await dispatchTo('hangs');
    const state = await eventually('the timeout taken in', async () => {
      const current = await table.getState(dispatchId);
      return current?.execution.status === 'failed' ? current : undefined;
    });
    expect(state.execution.result?.summary).toBe('Sandbox.Timedout: Task timed out after 0.10 seconds');
  });

  it('refuses a payload over 1 MB with 413, as Lambda does, without reading it whole (regression: any body was read into memory first)', async () => {
    const before = received.length;
    const invoke = (body: string | ReadableStream<Uint8Array>, headers: Record<string, string> = {}) => fetch(`${runtime.url}/2015-03-31/functions/works/invocations`, { method: 'POST', headers: { 'x-amz-invocation-type': 'Event', ...headers }, body, ...(body instanceof ReadableStream ? { duplex: 'half' } : {}) });
    // Over by a little, and by far (8 MB: answered from its length, the body drained, not a reset).
    for (const size of [MAX_ASYNC_PAYLOAD_BYTES, 8 * MAX_ASYNC_PAYLOAD_BYTES]) {
      const over = await invoke(JSON.stringify({ padding: 'x'.repeat(size) }));
      expect(over.status, String(size)).toBe(413);
      expect(over.headers.get('x-amzn-errortype')).toBe('RequestTooLargeException');
    }
    // Chunked (no length): read to its end, nothing kept past the limit.
    const chunk = new TextEncoder().encode('x'.repeat(256 * 1024));
    const chunked = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let n = 0; n < 6; n += 1) controller.enqueue(chunk);
        controller.close();
      },
    });
    expect((await invoke(chunked)).status).toBe(413);
    const fits = await fetch(`${runtime.url}/2015-03-31/functions/works/invocations`, { method: 'POST', headers: { 'x-amz-invocation-type': 'Event' }, body: JSON.stringify({ padding: 'x'.repeat(MAX_ASYNC_PAYLOAD_BYTES - 100) }) });
    expect(fits.status).toBe(202);
    await eventually('the payload that fits delivered', () => (received.length > before ? true : undefined));
  });

  it('refuses a function it does not know, as Lambda does (the dispatch is blocked, target_rejected)', async () => {
    const dispatchId = await dispatchTo('missing');
    expect(await table.getState(dispatchId)).toMatchObject({ phase: 'blocked', blockedCode: 'target_rejected' });
  });
});
