import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { InvokeCommand, LambdaClient, SendDurableExecutionCallbackFailureCommand, SendDurableExecutionCallbackSuccessCommand } from '@aws-sdk/client-lambda';
import { DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ROUTES, routePath } from '@dispatch-ledger/protocol';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { approvalTokens } from '../../shared/adapters/approval-tokens.js';
import { durableTarget } from '../../shared/adapters/durable-target.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { route, type ApiDeps } from '../../shared/api/routes.js';
import type { DurableTargetRegistration, TargetRegistration } from '../../shared/targets/port.js';
import { takeDispatchMessage } from '../../shared/usecases/intake.js';
import { approvalIdOfToken } from '../../shared/usecases/runtime-approvals.js';
import { engineClients, loopbackOnly, testEngines, uniqueName } from '../support/engines.js';
import { intakeDepsFactory } from '../support/factories.js';
import { ledgerApiDeps } from '../support/api-deps.js';
import { ScriptedTarget } from '../support/scripted-target.js';

/**
 * A durable function's approval through the ledger (CONTRACT §17), on DynamoDB Local: its worker reports
 * the callback id `waitForCallback` waits on with `approval_requested`; the ledger keeps it apart (in no
 * view, no state, no answer), chooses the approvalId, and answers the origin's decision with
 * SendDurableExecutionCallbackSuccess / Failure. Lambda itself is mocked at the SDK (no local engine
 * runs durable functions); the table is real.
 */
const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
const lambdaMock = mockClient(LambdaClient);
const NOW = new Date('2026-12-01T12:00:00.000Z');
const FUNCTION = 'arn:aws:lambda:us-east-1:111122223333:function:review:7';
const registration: DurableTargetRegistration = { name: 'review', kind: 'durable', functionArn: FUNCTION };
/** As long as Lambda makes them. */
const CALLBACK_ID = `cb-${'Q'.repeat(1021)}`;
let table: LedgerTable;
let tableName: string;
let blobs: S3Blobs;
const http = new ScriptedTarget();

const targetFor = (target: TargetRegistration) =>
  target.kind === 'durable'
    ? durableTarget(target, { lambda: new LambdaClient({ region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }), approvalTokens: approvalTokens(documents, tableName), now: () => NOW })
    : http;
const api = (): ApiDeps => ledgerApiDeps({ table, documents, tableName, blobs, targetFor, now: () => NOW });
const call = async (method: string, rawPath: string, body: unknown, query: Record<string, string> = {}) => {
  const answer = await route(api(), { method, rawPath, query, headers: { 'x-ledger-origin': 'planner' }, body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)), iamUserId: undefined });
  return { status: answer.statusCode, text: answer.body, body: JSON.parse(answer.body) as Record<string, unknown> };
};
const itemsOf = async (pk: string) => (await documents.send(new QueryCommand({ TableName: tableName, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk }, ConsistentRead: true }))).Items ?? [];

beforeAll(async () => {
  tableName = uniqueName('durable-ledger');
  await ensureLedgerTable(clients.dynamodb, tableName);
  table = new LedgerTable(documents, { tableName, retentionSeconds: 86_400 });
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('durable-blobs')));
  await table.putTarget(registration);
  await table.putTarget({ name: 'agent', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
});
afterEach(() => lambdaMock.reset());
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

/** A dispatch taken in and started as one durable execution (its ARN has `/` in it). */
async function submitted(target = 'review'): Promise<{ dispatchId: string; runId: string }> {
  const dispatchId = uniqueName('d').replace(/[^A-Za-z0-9-]/g, '-');
  const runId = target === 'review' ? `${FUNCTION}/durable-execution/${dispatchId}_1/0f4c2a9e-1b7d-4c55-9a43-2d1e8f6b7a10` : `r-${dispatchId}`;
  lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202, DurableExecutionArn: runId, $metadata: { requestId: 'q-1' } });
  http.answer = () => ({ kind: 'accepted', runId, status: 'running', requestId: 'q-1' });
  await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor, now: () => NOW }), {
    messageId: uniqueName('m'),
    body: JSON.stringify({ dispatchId, origin: 'planner', target, task: { goal: 'review' }, delivery: { mode: 'detached' } }),
    senderId: 'test',
  });
  expect(await table.getState(dispatchId)).toMatchObject({ phase: 'submitted', runId });
  return { dispatchId, runId };
}

describe("a durable function's approval", () => {
  it('is asked with its callback id, kept apart, decided through the approval route with SendDurableExecutionCallbackSuccess, and never reopened', async () => {
    const { dispatchId, runId } = await submitted();
    const events = routePath(ROUTES.postRunEvent, { runId });
    const asked = await call('POST', events, { dispatchId, seq: 1, type: 'approval_requested', callbackId: CALLBACK_ID });
    const approvalId = approvalIdOfToken(CALLBACK_ID, 'dur');
    expect(asked).toMatchObject({ status: 202, body: { applied: true, approvalId } });
    expect(asked.text).not.toContain(CALLBACK_ID);
    const view = await call('GET', `/dispatches/${dispatchId}`, undefined);
    expect(view.body).toMatchObject({ execution: { status: 'waiting_for_approval', pendingApproval: { approvalId } } });
    expect(view.text).not.toContain(CALLBACK_ID);
    // In the table: the token item alone holds it, in a partition of its own; no item of the dispatch does.
    expect((await itemsOf(`D#${dispatchId}`)).filter((item) => JSON.stringify(item).includes(CALLBACK_ID))).toEqual([]);
    expect((await itemsOf(`TOKEN#${dispatchId}`)).map((item) => [item.sk, item.taskToken === CALLBACK_ID])).toEqual([[`APPROVAL#${approvalId}`, true]]);

    lambdaMock.on(SendDurableExecutionCallbackSuccessCommand).resolves({});
    const decided = await call('POST', `/dispatches/${dispatchId}/approval`, { approvalId, decision: 'approve' });
    expect(decided.status).toBe(200);
    expect(decided.text).not.toContain(CALLBACK_ID);
    const sent = lambdaMock.commandCalls(SendDurableExecutionCallbackSuccessCommand).map((command) => command.args[0].input);
    expect(sent.map((input) => [input.CallbackId, JSON.parse(new TextDecoder().decode(input.Result as Uint8Array))])).toEqual([[CALLBACK_ID, { approvalId, decision: 'approve' }]]);
    expect((await table.getState(dispatchId))?.execution).toMatchObject({ status: 'running', pendingApproval: null, lastDecision: { approvalId, decision: 'approve' } });
    // Used, the id is erased; the request retried after its decision reopens nothing.
    expect((await itemsOf(`TOKEN#${dispatchId}`)).map((item) => [item.taskToken, typeof item.decidedAt])).toEqual([[undefined, 'string']]);
    expect(await call('POST', events, { dispatchId, seq: 2, type: 'approval_requested', callbackId: CALLBACK_ID })).toMatchObject({ status: 200, body: { applied: false } });
    expect((await table.getState(dispatchId))?.execution).toMatchObject({ status: 'running', pendingApproval: null });
  });

  it('keeps no callback id for a run already over (was: kept until retention, a secret nothing would ever use)', async () => {
    const { dispatchId, runId } = await submitted();
    const events = routePath(ROUTES.postRunEvent, { runId });
    expect((await call('POST', events, { dispatchId, seq: 1, type: 'completed', result: { summary: 'done' } })).status).toBe(202);
    expect(await call('POST', events, { dispatchId, seq: 2, type: 'approval_requested', callbackId: CALLBACK_ID })).toMatchObject({ status: 200, body: { applied: false } });
    expect(await itemsOf(`TOKEN#${dispatchId}`)).toEqual([]);
  });

  it('cancelled through the ledger answers SendDurableExecutionCallbackFailure', async () => {
    const { dispatchId, runId } = await submitted();
    const asked = await call('POST', routePath(ROUTES.postRunEvent, { runId }), { dispatchId, seq: 1, type: 'approval_requested', callbackId: `${CALLBACK_ID.slice(0, 500)}x` });
    lambdaMock.on(SendDurableExecutionCallbackFailureCommand).resolves({});
    expect((await call('POST', `/dispatches/${dispatchId}/approval`, { approvalId: asked.body.approvalId, decision: 'cancel' })).status).toBe(200);
    expect(lambdaMock.commandCalls(SendDurableExecutionCallbackFailureCommand).map((command) => command.args[0].input.CallbackId)).toEqual([`${CALLBACK_ID.slice(0, 500)}x`]);
  });

  it('is refused without its callback id, or with an approvalId of its own; a callback id is refused from any other target (422, nothing kept)', async () => {
    const { dispatchId, runId } = await submitted();
    const events = routePath(ROUTES.postRunEvent, { runId });
    await expect(call('POST', events, { dispatchId, seq: 1, type: 'approval_requested', approvalId: 'a-1' })).rejects.toMatchObject({ code: 'invalid', message: expect.stringMatching(/callbackId/) });
    await expect(call('POST', events, { dispatchId, seq: 1, type: 'approval_requested', approvalId: 'a-1', callbackId: CALLBACK_ID })).rejects.toMatchObject({ code: 'invalid' });
    await expect(call('POST', events, { dispatchId, seq: 1, type: 'heartbeat', callbackId: CALLBACK_ID })).rejects.toMatchObject({ code: 'invalid' });
    await expect(call('POST', events, { dispatchId, seq: 1, type: 'approval_requested', callbackId: 'x'.repeat(1025) })).rejects.toMatchObject({ code: 'invalid', message: 'the body is not valid' });
    const other = await submitted('agent');
    await expect(call('POST', routePath(ROUTES.postRunEvent, { runId: other.runId }), { dispatchId: other.dispatchId, seq: 1, type: 'approval_requested', callbackId: CALLBACK_ID })).rejects.toMatchObject({ code: 'invalid' });
    expect([...(await itemsOf(`TOKEN#${dispatchId}`)), ...(await itemsOf(`TOKEN#${other.dispatchId}`))]).toEqual([]);
    expect((await table.getState(dispatchId))?.execution.pendingApproval).toBeNull();
  });
});
