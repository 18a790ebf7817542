import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { InvokeCommand, LambdaClient, SendDurableExecutionCallbackSuccessCommand, type InvokeCommandInput } from '@aws-sdk/client-lambda';
import { DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { withDurableExecution } from '@aws/durable-execution-sdk-js';
import { LocalDurableTestRunner, OperationType, WaitingOperationStatus, type DurableOperation } from '@aws/durable-execution-sdk-js-testing';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sigv4Signer, type Clock, type LogLine, type RunResult } from '@dispatch-ledger/worker';
import { systemClock } from '../../packages/worker/src/heartbeat.js';
import { durableRun } from '@dispatch-ledger/worker/durable';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { startHttpApi, type HttpApiHandler } from '../../local/runtime/http-api.js';
import { allCredentials, createLocalCredentials, sigV4Verifier, signedFetch } from '../../local/runtime/sigv4.js';
import { approvalTokens } from '../../shared/adapters/approval-tokens.js';
import { durableTarget } from '../../shared/adapters/durable-target.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { ApiError, errorResponse } from '../../shared/api/http.js';
import { route, type ApiDeps } from '../../shared/api/routes.js';
import type { DurableTargetRegistration, TargetRegistration } from '../../shared/targets/port.js';
import { takeDispatchMessage } from '../../shared/usecases/intake.js';
import { ledgerApiDeps } from '../support/api-deps.js';
import { engineClients, loopbackOnly, testEngines, uniqueName } from '../support/engines.js';
import { intakeDepsFactory } from '../support/factories.js';

/**
 * The worker kit's `/durable` helper inside a Lambda durable function (CONTRACT §17), against the real
 * ledger: its API (`route`) behind a local function URL on 127.0.0.1 that verifies SigV4 as AWS_IAM
 * auth does, in `enforce` mode, over DynamoDB Local. Lambda itself is mocked at the SDK (no local engine
 * runs durable executions): the target's Invoke answers an execution ARN, and the ledger's
 * SendDurableExecutionCallbackSuccess is handed to the durable SDK's local test runner, which runs the
 * worker — and replays it after the callback — as Lambda would. The runner's checkpoint server is a
 * worker thread it talks to by messages: it opens no socket.
 */

const REGION = 'us-east-1';
const FUNCTION_ARN = 'arn:aws:lambda:us-east-1:111122223333:function:review:7';
const registration: DurableTargetRegistration = { name: 'review', kind: 'durable', functionArn: FUNCTION_ARN };
/** The ledger's callers, as IAM would name them: the origin's user and the function's role (`ledger.addTargetCaller(fn.role, 'review')`). */
const credentials = createLocalCredentials({ origins: ['planner'], targets: ['review'] });
const planner = { credentials: credentials.origins.planner ?? credentials.operator, region: REGION };
const reviewRole = credentials.targets.review ?? credentials.operator;

const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: REGION, endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
const lambdaMock = mockClient(LambdaClient);
let table: LedgerTable;
let tableName: string;
let blobs: S3Blobs;
let ledger: { url: string; close(): Promise<void> };

const targetFor = (target: TargetRegistration) => {
  if (target.kind !== 'durable') throw new Error('only the durable function here');
  return durableTarget(target, { lambda: new LambdaClient({ region: REGION, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }), approvalTokens: approvalTokens(documents, tableName), now: () => new Date() });
};
/** The API's deps as its function builds them, with callers known by their IAM identity (as in AWS) and targets called back on this API. */
const api = (): ApiDeps => ({ ...ledgerApiDeps({ table, documents, tableName, blobs, targetFor, now: () => new Date() }), principalMode: 'enforce', callbackUrl: ledger.url });

/** What the ledger API was asked, once SigV4 let it through. */
const received: Array<{ readonly method: string; readonly rawPath: string; readonly body: string; readonly status: number }> = [];
const refused: string[] = [];

/** The IAM caller a function URL's request context names (`authorizer.iam.userId`). */
function iamUserIdOf(requestContext: object): string | undefined {
  const authorizer: unknown = Reflect.get(requestContext, 'authorizer');
  const iam: unknown = typeof authorizer === 'object' && authorizer !== null ? Reflect.get(authorizer, 'iam') : undefined;
  const userId: unknown = typeof iam === 'object' && iam !== null ? Reflect.get(iam, 'userId') : undefined;
  return typeof userId === 'string' ? userId : undefined;
}

/** The API function's handler, mapped as functions/api/function.ts maps a function URL's event onto `route`. */
const apiHandler: HttpApiHandler = async (event) => {
  let answer;
  try {
    answer = await route(api(), {
      method: event.requestContext.http.method,
      rawPath: event.rawPath,
      query: event.queryStringParameters ?? {},
      headers: event.headers ?? {},
      body: event.body === undefined ? undefined : Buffer.from(event.body, event.isBase64Encoded ? 'base64' : 'utf8'),
      iamUserId: iamUserIdOf(event.requestContext),
    });
  } catch (error) {
    answer = errorResponse(error instanceof ApiError ? error : new ApiError('internal', 'internal error'));
  }
  const body = event.body === undefined ? '' : Buffer.from(event.body, event.isBase64Encoded ? 'base64' : 'utf8').toString('utf8');
  received.push({ method: event.requestContext.http.method, rawPath: event.rawPath, body, status: answer.statusCode });
  return answer;
};

beforeAll(async () => {
  tableName = uniqueName('durable-ledger');
  await ensureLedgerTable(clients.dynamodb, tableName);
  table = new LedgerTable(documents, { tableName, retentionSeconds: 86_400 });
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('durable-blobs')));
  await table.putTarget(registration);
  for (const credential of allCredentials(credentials)) await table.putPrincipal(credential.principalId, credential.principal);
  ledger = await startHttpApi({
    functionName: 'api',
    region: REGION,
    handler: apiHandler,
    verifySignature: sigV4Verifier({ region: REGION, credentials: allCredentials(credentials) }),
    onRefused: (refusal) => refused.push(`${refusal.method} ${refusal.path}: ${refusal.reason}`),
  });
  await LocalDurableTestRunner.setupTestEnvironment({ skipTime: false });
});

afterAll(async () => {
  await LocalDurableTestRunner.teardownTestEnvironment();
  await ledger.close();
  clients.destroy();
  dynamodb.destroy();
});

// --- The example durable worker -------------------------------------------------------------------------

/**
 * A durable review worker: a sign of life, a draft written in a step, a person's approval asked through
 * the ledger, then the review published in a step (`ctx.step`) that sends a heartbeat from inside it and
 * uploads the evidence, and the run completed with a summary. Its callbacks are signed as the function's role.
 */
const reviewWorker = (log: (line: LogLine) => void, clock: Clock) =>
  durableRun(
    async (task, ctx) => {
      await ctx.heartbeat();
      // Within a fifth of the stall window of the first: coalesced, nothing posted.
      await ctx.heartbeat();
      const draft = await ctx.durable.step('draft', async () => `# Review\n\n${String(task.goal)}: looks right.\n`);
      await ctx.progress('draft written');
      const grant = await ctx.requestApproval();
      await ctx.step('publish', async (step) => {
        // A sign of life from inside the step, with a seq of the block reserved for it (no durable operation of its own).
        step.heartbeat();
        await step.putEvidence('out/review.md', `${draft}\nApproved (${grant.approvalId}).\n`);
        return 'out/review.md';
      });
      return { summary: `review published after approval ${grant.approvalId}`, body: { approvalId: grant.approvalId } };
    },
    { name: 'review-worker', signer: sigv4Signer({ region: REGION, credentials: reviewRole }), log, clock, retry: { budgetMs: 20_000, finalBudgetMs: 20_000 } },
  );

/** The run events the ledger received, in arrival order. */
function runEvents(): Array<{ readonly runId: string; readonly seq: number; readonly type: string; readonly callbackId?: string; readonly approvalId?: string; readonly status: number }> {
  return received.flatMap((request) => {
    const match = /^\/runs\/([^/]+)\/events$/.exec(request.rawPath);
    if (request.method !== 'POST' || !match?.[1]) return [];
    const event = JSON.parse(request.body) as { seq: number; type: string; callbackId?: string; approvalId?: string };
    return [{ runId: decodeURIComponent(match[1]), status: request.status, ...event }];
  });
}

const asPlanner = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown>; text: string }> => {
  const text = body === undefined ? undefined : JSON.stringify(body);
  const answer = await signedFetch(`${ledger.url}${path}`, { method, headers: text === undefined ? {} : { 'content-type': 'application/json' }, ...(text === undefined ? {} : { body: text }) }, planner);
  const read = await answer.text();
  return { status: answer.status, json: JSON.parse(read) as Record<string, unknown>, text: read };
};

describe('a durable function supervised by the ledger, with the kit\'s /durable helper', () => {
  it('asks for approval with its callback id, is approved through the ledger, heartbeats from inside a step, uploads its evidence and completes handled; no seq is posted twice across the replay', async () => {
    const dispatchId = uniqueName('d').replace(/[^A-Za-z0-9-]/g, '-');
    let invoked: InvokeCommandInput | undefined;
    let runId = '';
    lambdaMock.on(InvokeCommand).callsFake((input: InvokeCommandInput) => {
      invoked = input;
      runId = `${FUNCTION_ARN}/durable-execution/${input.DurableExecutionName ?? ''}/7c9e6679-7425-40de-944b-e07fc1f90ae7`;
      return { StatusCode: 202, DurableExecutionArn: runId, $metadata: { requestId: 'invoke-1' } };
    });
    await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor, now: () => new Date(), callbackUrl: ledger.url }), {
      messageId: uniqueName('m'),
      body: JSON.stringify({ dispatchId, origin: 'planner', target: 'review', task: { goal: 'review the draft' }, expectedEvidence: ['out/review.md'], delivery: { mode: 'detached' } }),
      senderId: 'test',
    });
    expect(await table.getState(dispatchId)).toMatchObject({ phase: 'submitted', runId });
    expect(invoked).toMatchObject({ FunctionName: FUNCTION_ARN, InvocationType: 'Event' });
    const payload = invoked?.Payload;
    expect(payload).toBeInstanceOf(Uint8Array);
    const submission = JSON.parse(payload instanceof Uint8Array ? Buffer.from(payload).toString('utf8') : '') as Record<string, unknown>;
    expect(submission).toMatchObject({ dispatchId, attempt: 1, origin: 'planner', callbackUrl: ledger.url, expectedEvidence: ['out/review.md'] });

    // The execution Lambda would start with that payload. The local runner names its executions by a bare
    // id, not by ARN: the context the worker sees names the execution the ledger recorded, as in Lambda.
    const logged: LogLine[] = [];
    // The worker's clock, ahead of the ledger's by the time the reviewer takes to decide (set below).
    let reviewerTookMs = 0;
    const worker = reviewWorker((line) => logged.push(line), {
      now: () => Date.now() + reviewerTookMs,
      setTimer: systemClock.setTimer,
    });
    const runner = new LocalDurableTestRunner<RunResult>({
      handlerFunction: withDurableExecution(async (event: unknown, context) => {
        context.executionContext = { durableExecutionArn: runId };
        return worker(event, context);
      }),
    });
    // The ledger's answer to the approval, delivered to the execution's callback as Lambda would.
    let callback: DurableOperation | undefined;
    lambdaMock.on(SendDurableExecutionCallbackSuccessCommand).callsFake(async (input: { CallbackId?: string; Result?: Uint8Array }) => {
      if (!callback || input.CallbackId !== callback.getCallbackDetails()?.callbackId) throw Object.assign(new Error('no such callback'), { name: 'InvalidParameterValueException' });
      await callback.sendCallbackSuccess(Buffer.from(input.Result ?? new Uint8Array()).toString('utf8'));
      return {};
    });
    const finished = runner.run({ payload: submission });

    // The worker asked (seq 4: heartbeat 1, a coalesced heartbeat 2, progress 3): the execution waits on its callback.
    const approval = await runner.getOperation('ledger-approval#4').waitForData(WaitingOperationStatus.SUBMITTED);
    callback = approval.getChildOperations()?.find((operation) => operation.getType() === OperationType.CALLBACK);
    const callbackId = callback?.getCallbackDetails()?.callbackId ?? '';
    expect(callbackId.length).toBeGreaterThan(0);
    const waiting = await asPlanner('GET', `/dispatches/${dispatchId}`);
    expect(waiting.json).toMatchObject({ execution: { status: 'waiting_for_approval', pendingApproval: { approvalId: expect.stringMatching(/^dur-/) } } });
    const approvalId = String((waiting.json.execution as { pendingApproval: { approvalId: string } }).pendingApproval.approvalId);

    // Three minutes to decide, as the worker sees it: the publish step's heartbeat is due (a fifth of the 600 s stall window is 120 s).
    reviewerTookMs = 3 * 60_000;
    const decided = await asPlanner('POST', `/dispatches/${dispatchId}/approval`, { approvalId, decision: 'approve' });
    expect(decided).toMatchObject({ status: 200, json: { approvalId, decision: 'approve' } });
    const execution = await finished;

    // Lambda's side: the callback answered with the exact id the worker reported; the execution replayed and succeeded.
    expect(lambdaMock.commandCalls(SendDurableExecutionCallbackSuccessCommand).map((call) => call.args[0].input)).toEqual([{ CallbackId: callbackId, Result: Buffer.from(JSON.stringify({ approvalId, decision: 'approve' }), 'utf8') }]);
    expect(execution.getStatus()).toBe('SUCCEEDED');
    expect(execution.getResult()).toEqual({ summary: `review published after approval ${approvalId}`, body: { approvalId } });
    expect(execution.getInvocations().length).toBeGreaterThanOrEqual(2);

    // The ledger's side: completed, the expected evidence found.
    const ended = await asPlanner('GET', `/dispatches/${dispatchId}`);
    expect(ended.json).toMatchObject({ runId, execution: { status: 'completed', result: { summary: `review published after approval ${approvalId}` } }, evidence: { outcome: 'handled' } });

    // Each event posted once, under the execution's ARN, seq rising though the handler ran again from the
    // top after the callback: the replay returned the checkpointed steps and posted nothing.
    const events = runEvents();
    // The publish step reserved seqs 5..13 with one operation; its heartbeat took the first, the end the one after the block.
    expect(runner.getOperation('ledger-block#5').getStepDetails()?.result).toEqual({ seq: 5, seqs: 9 });
    // (The first two taken and coalesced by the ledger: activity within its window after the submission.)
    expect(events.map(({ seq, type, status }) => [seq, type, status])).toEqual([
      [1, 'heartbeat', 200],
      [3, 'progress', 200],
      [4, 'approval_requested', 202],
      [5, 'heartbeat', expect.any(Number)],
      [14, 'completed', 202],
    ]);
    // The step's heartbeat reached the ledger between the approval and the end, taken (applied, or coalesced in the ledger's window).
    const inStep = events.find((event) => event.type === 'heartbeat' && event.seq > 4);
    expect([200, 202]).toContain(inStep?.status);
    expect(inStep?.seq).toBeLessThan(events.find((event) => event.type === 'completed')?.seq ?? 0);
    expect(events.every((event) => event.runId === runId)).toBe(true);
    const postsPerSeq = new Map<number, number>();
    for (const event of events) postsPerSeq.set(event.seq, (postsPerSeq.get(event.seq) ?? 0) + 1);
    expect([...postsPerSeq.values()].every((posts) => posts === 1)).toBe(true);
    // The approval carried the callback id alone: the ledger chose the approvalId.
    expect(events.find((event) => event.type === 'approval_requested')).toMatchObject({ callbackId });
    expect(events.find((event) => event.type === 'approval_requested')?.approvalId).toBeUndefined();
    expect(received.filter((request) => request.method === 'PUT').map((request) => [request.rawPath, request.status])).toEqual([[`/dispatches/${dispatchId}/evidence/out/review.md`, 201]]);

    // Every call reached the ledger signed as a caller it knows (the worker's as the function's role); none was refused.
    expect(refused).toEqual([]);
    expect(logged.filter((line) => line.level === 'warn' || line.level === 'error')).toEqual([]);

    // The callback id is in no view and in no item of the dispatch; its own item no longer holds it once used.
    const lists = [await asPlanner('GET', `/dispatches/${dispatchId}/runs`), await asPlanner('GET', '/origins/planner/dispatches')];
    expect(lists.map((list) => list.status)).toEqual([200, 200]);
    for (const view of [waiting.text, ended.text, decided.text, ...lists.map((list) => list.text)]) expect(view).not.toContain(callbackId);
    const itemsOf = async (pk: string) => (await documents.send(new QueryCommand({ TableName: tableName, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk }, ConsistentRead: true }))).Items ?? [];
    const dispatchItems = await itemsOf(`D#${dispatchId}`);
    expect(dispatchItems.length).toBeGreaterThan(0);
    expect(dispatchItems.filter((item) => JSON.stringify(item).includes(callbackId))).toEqual([]);
    expect((await itemsOf(`TOKEN#${dispatchId}`)).map((item) => [item.sk, item.taskToken, typeof item.decidedAt])).toEqual([[`APPROVAL#${approvalId}`, undefined, 'string']]);
  });
});
