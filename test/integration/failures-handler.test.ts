import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localHandlerEnvironment } from '../../local/clients.js';
import { loadHandler, LOCAL_FUNCTIONS } from '../../local/functions.js';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import type { SqsHandler } from '../../local/runtime/sqs-event-source.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { lambdaRunIdOf, type TargetPort } from '../../shared/targets/port.js';
import { REDRIVEN_FOR } from '../../shared/principals/principals.js';
import { takeDispatchMessage } from '../../shared/usecases/intake.js';
import { engineClients, testEngines, uniqueName } from '../support/engines.js';
import { intakeDepsFactory } from '../support/factories.js';
import { lambdaContext, sqsRecord } from '../support/sqs-records.js';

/**
 * The failures function's handler (functions/failures) on DynamoDB Local, built as in AWS (clients with
 * no endpoint): which of Lambda's on-failure records it acknowledges and which it reports back to SQS.
 */

const FUNCTION_ARN = 'arn:aws:lambda:us-east-1:000000000000:function:quick-fail';
const clients = engineClients();
const saved = { ...process.env };
let table: LedgerTable;
let tableName: string;
let blobs: S3Blobs;
let handler: SqsHandler;

const failuresFunction = () => {
  const failures = LOCAL_FUNCTIONS.find((fn) => fn.name === 'failures');
  if (!failures) throw new Error('no failures function in LOCAL_FUNCTIONS');
  return failures;
};
/** A target whose every run is accepted (queued), for the records that follow. */
const acceptsEveryRun: TargetPort = {
  submit: async (request) => ({ kind: 'accepted', runId: lambdaRunIdOf(request.dispatchId, request.attempt), status: 'queued', requestId: 'req-1' }),
  lookup: async () => ({ kind: 'not_found' }),
  decideApproval: async () => ({ kind: 'unavailable', reason: 'unused' }),
  cancel: async () => ({ kind: 'unavailable', reason: 'unused' }),
};

beforeAll(async () => {
  tableName = uniqueName('failures-handler');
  await ensureLedgerTable(clients.dynamodb, tableName);
  table = new LedgerTable(DynamoDBDocumentClient.from(clients.dynamodb, { marshallOptions: { removeUndefinedValues: true } }), { tableName, retentionSeconds: 86_400 });
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('failures-handler-blobs')));
  await table.putTarget({ name: 'quick-fail', kind: 'lambda', functionArn: FUNCTION_ARN, timeoutSeconds: 5 });
  Object.assign(process.env, localHandlerEnvironment(testEngines()));
  handler = await loadHandler<SqsHandler>(failuresFunction(), { LEDGER_TABLE_NAME: tableName, PRINCIPAL_MODE: 'open', AWS_REGION: 'us-east-1' });
});
afterAll(() => {
  process.env = { ...saved };
  clients.destroy();
});

const record = (messageId: string, body: string) => sqsRecord(messageId, body, 'AROAQUICKFAIL:function', 'dispatch-ledger-lambda-failures');
const context = lambdaContext(30_000);
const failedIds = (response: SQSBatchResponse | void): string[] => (response ? response.batchItemFailures.map((failure) => failure.itemIdentifier) : []);

describe('the failures handler', () => {
  it("reports back a record that comes before the ledger recorded its run, and takes it in when SQS brings it back (was: acknowledged, Lambda's error lost)", async () => {
    const dispatchId = uniqueName('d');
    const runId = lambdaRunIdOf(dispatchId, 1);
    const body = JSON.stringify({ requestContext: { requestId: 'r-1', functionArn: FUNCTION_ARN, condition: 'RetriesExhausted' }, requestPayload: { runId, dispatchId }, responsePayload: { errorType: 'QuotaError', errorMessage: 'the model quota is spent' } });
    const early: Array<SQSBatchResponse | void> = [];
    // The function fails, and its record is handled, while the intake is still in the Invoke call.
    const failsAtOnce: TargetPort = {
      submit: async (request) => {
        early.push(await handler({ Records: [record('m-early', body), record('m-unreadable', 'not json')] } satisfies SQSEvent, context));
        return { kind: 'accepted', runId: lambdaRunIdOf(request.dispatchId, request.attempt), status: 'queued', requestId: 'req-1' };
      },
      lookup: async () => ({ kind: 'not_found' }),
      decideApproval: async () => ({ kind: 'unavailable', reason: 'unused' }),
      cancel: async () => ({ kind: 'unavailable', reason: 'unused' }),
    };
    await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor: () => failsAtOnce, now: () => new Date() }), {
      messageId: uniqueName('m'),
      body: JSON.stringify({ dispatchId, origin: 'planner', target: 'quick-fail', task: { goal: 'review' }, delivery: { mode: 'detached' } }),
      senderId: 'test',
    });
    // Only the early record goes back to the queue; the unreadable one is acknowledged (nothing in it names a run).
    expect(early.map(failedIds)).toEqual([['m-early']]);
    expect((await table.getState(dispatchId))?.execution.status).toBe('queued');
    // SQS brings it back once its visibility timeout passes: the run is recorded failed with Lambda's error.
    expect(failedIds(await handler({ Records: [record('m-early', body)] }, context))).toEqual([]);
    expect((await table.getState(dispatchId))?.execution).toMatchObject({ status: 'failed', result: { summary: 'QuotaError: the model quota is spent' } });
  });

  // Regression: the failures DLQ's alarm says to move its messages back, but `ledger dlq redrive` sends
  // each as the operator (the worker's id in `LedgerRedrivenFor`), and the failures function believed
  // the SenderId alone: every redriven record was acknowledged as `refused`, its run's failure lost.
  it("takes in a record an operator moved back from its DLQ as the worker's own; the same attribute from anyone else is refused", async () => {
    const registry = JSON.stringify({
      principals: [
        { id: 'AROAQUICKFAIL', principal: { role: 'target', target: 'quick-fail' } },
        { id: 'AROAONCALL', principal: { role: 'operator' } },
        { id: 'AROAOTHERWORKER', principal: { role: 'target', target: 'other' } },
      ],
      targets: [{ name: 'quick-fail', kind: 'lambda', functionArn: FUNCTION_ARN, timeoutSeconds: 5, stateTable: 'quick-fail-runs' }],
    });
    const enforcing = await loadHandler<SqsHandler>(failuresFunction(), { LEDGER_TABLE_NAME: tableName, PRINCIPAL_MODE: 'enforce', LEDGER_REGISTRY: registry, AWS_REGION: 'us-east-1' });
    const dispatchId = uniqueName('d');
    await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor: () => acceptsEveryRun, now: () => new Date() }), {
      messageId: uniqueName('m'),
      body: JSON.stringify({ dispatchId, origin: 'planner', target: 'quick-fail', task: { goal: 'review' }, delivery: { mode: 'detached' } }),
      senderId: 'test',
    });
    const body = JSON.stringify({ requestContext: { requestId: 'r-2', functionArn: FUNCTION_ARN, condition: 'RetriesExhausted' }, requestPayload: { runId: lambdaRunIdOf(dispatchId, 1), dispatchId }, responsePayload: { errorType: 'QuotaError', errorMessage: 'spent' } });
    const redriven = (messageId: string, sender: string, first = 'AROAQUICKFAIL:function') => ({ ...sqsRecord(messageId, body, sender, 'dispatch-ledger-lambda-failures'), messageAttributes: { [REDRIVEN_FOR]: { stringValue: first, dataType: 'String', stringListValues: [], binaryListValues: [] } } });
    // Another worker claiming to move the record back is not believed: acknowledged, nothing recorded.
    expect(failedIds(await enforcing({ Records: [redriven('m-forged', 'AROAOTHERWORKER:s')] }, context))).toEqual([]);
    // An operator's redrive whose first sender is not the function (the operator itself, after a second
    // redrive that could not tell): not believed, and reported back for the DLQ, never dropped.
    // (Every record of the batch reported back: Powertools fails the whole batch, and SQS brings it back.)
    await expect(enforcing({ Records: [redriven('m-lost-sender', 'AROAONCALL:oncall', 'AROAONCALL:oncall')] }, context)).rejects.toThrow(/All records failed processing/);
    expect((await table.getState(dispatchId))?.execution.status).toBe('queued');
    expect(await table.getLambdaFailure(dispatchId, 1)).toBeUndefined();
    // The operator's redrive is the worker's record.
    expect(failedIds(await enforcing({ Records: [redriven('m-redriven', 'AROAONCALL:oncall')] }, context))).toEqual([]);
    expect((await table.getState(dispatchId))?.execution).toMatchObject({ status: 'failed', result: { summary: 'QuotaError: spent' } });
  });
});
