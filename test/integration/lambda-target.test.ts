import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { lambdaTarget } from '../../shared/adapters/lambda-target.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { STATE_ITEM } from '../../shared/adapters/item-kinds.js';
import { stateVersionOf } from '../../shared/adapters/state-item.js';
import { route, type ApiDeps } from '../../shared/api/routes.js';
import { nativeStatusOf } from '../../shared/dispatch/state.js';
import { eventsForState, type StateVersion } from '../../shared/events/derive.js';
import { takeDispatchMessage } from '../../shared/usecases/intake.js';
import { lambdaRunIdOf, parseLambdaRunId, type SubmitRequest, type TargetPort } from '../../shared/targets/port.js';
import { takeLambdaFailure } from '../../shared/usecases/lambda-failure.js';
import { keepFoundBody } from '../../shared/usecases/look-up-run.js';
import { MAX_RESULT_BODY_BYTES } from '../../shared/usecases/result-body.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { intakeDepsFactory } from '../support/factories.js';
import { ledgerApiDeps } from '../support/api-deps.js';

/**
 * A lambda target's lookups and failures (CONTRACT §12) on DynamoDB Local: the kit's run-state table
 * read by key, and Lambda's on-failure destination taken in as `failed` with Lambda's error.
 * (Invoke itself has no local engine: its adapter is unit-tested with aws-sdk-client-mock.)
 */

const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
const NOW = new Date('2026-12-01T12:00:00.000Z');
let table: LedgerTable;
let tableName: string;
/** A dispatch's state item as stored (the stream's image): the state, the version that wrote it and what that write changed. */
const storedVersionOf = async (dispatchId: string): Promise<StateVersion | undefined> => {
  const { Item } = await documents.send(new GetCommand({ TableName: tableName, Key: STATE_ITEM.key(dispatchId), ConsistentRead: true }));
  return Item ? stateVersionOf(Item) : undefined;
};
let stateTable: string;
let blobs: S3Blobs;

/** What the ledger sees of the function: every submission queued under the run id the ledger names. */
const queued: TargetPort = {
  submit: async (request: SubmitRequest) => ({ kind: 'accepted', runId: lambdaRunIdOf(request.dispatchId, request.attempt), status: 'queued', requestId: 'req-1' }),
  lookup: async () => ({ kind: 'not_found' }),
  decideApproval: async () => ({ kind: 'unavailable', reason: 'unused' }),
  cancel: async () => ({ kind: 'unavailable', reason: 'unused' }),
};

beforeAll(async () => {
  tableName = uniqueName('lambda-ledger');
  await ensureLedgerTable(clients.dynamodb, tableName);
  table = new LedgerTable(documents, { tableName, retentionSeconds: 86_400 });
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('lambda-blobs')));
  stateTable = uniqueName('kit-runs');
  await dynamodb.send(new CreateTableCommand({ TableName: stateTable, BillingMode: 'PAY_PER_REQUEST', AttributeDefinitions: [{ AttributeName: 'runId', AttributeType: 'S' }], KeySchema: [{ AttributeName: 'runId', KeyType: 'HASH' }] }));
  await table.putTarget({ name: 'reviewer', kind: 'lambda', functionArn: 'arn:aws:lambda:us-east-1:111122223333:function:reviewer', timeoutSeconds: 60, stateTable });
});
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

async function submitted(task: Record<string, unknown> = { goal: 'review the plan' }): Promise<string> {
  const dispatchId = uniqueName('d');
  await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor: () => queued, now: () => NOW }), {
    messageId: uniqueName('m'),
    body: JSON.stringify({ dispatchId, origin: 'planner', target: 'reviewer', task, delivery: { mode: 'detached' } }),
    senderId: 'test',
  });
  return dispatchId;
}

const port = () => {
  const lambda = new LambdaClient({ region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' }, endpoint: 'http://127.0.0.1:9' });
  return lambdaTarget({ name: 'reviewer', kind: 'lambda', functionArn: 'arn:aws:lambda:us-east-1:111122223333:function:reviewer', timeoutSeconds: 60, stateTable }, {
    lambda,
    documents,
    failureOf: async (runId) => {
      const named = parseLambdaRunId(runId);
      return named ? table.getLambdaFailure(named.dispatchId, named.attempt) : undefined;
    },
    now: () => NOW,
  });
};

describe('a lambda target on the real table', () => {
  it("reads the kit's run state for a lookup, pending approval included", async () => {
    const dispatchId = await submitted();
    const runId = lambdaRunIdOf(dispatchId, 1);
    await documents.send(new PutCommand({ TableName: stateTable, Item: { runId, status: 'waiting_for_approval', pendingApproval: { approvalId: 'ap-1', requestedAt: NOW.toISOString() }, seq: 3 } }));
    expect(await port().lookup(runId, { submittedAt: NOW.toISOString() })).toEqual({ kind: 'found', run: { runId, status: 'waiting_for_approval', pendingApproval: { approvalId: 'ap-1', requestedAt: NOW.toISOString() } } });
  });

  it("reads a final run's body beside its summary, and no body of a run not over (the kit's table is the user's: read, not trusted)", async () => {
    const ended = lambdaRunIdOf(await submitted(), 1);
    await documents.send(new PutCommand({ TableName: stateTable, Item: { runId: ended, status: 'completed', resultBodyJson: '{"verdict":"ok"}', seq: 4 } }));
    expect(await port().lookup(ended, { submittedAt: NOW.toISOString() })).toEqual({ kind: 'found', run: { runId: ended, status: 'completed', result: { bodyJson: '{"verdict":"ok"}' } } });
    const running = lambdaRunIdOf(await submitted(), 1);
    await documents.send(new PutCommand({ TableName: stateTable, Item: { runId: running, status: 'running', result: { summary: 'half way' }, resultBodyJson: '{"early":true}', seq: 2 } }));
    expect(await port().lookup(running, { submittedAt: NOW.toISOString() })).toEqual({ kind: 'found', run: { runId: running, status: 'running', result: { summary: 'half way' } } });

    // What the table holds is read as given, and kept only within §10's bounds: not JSON, or over 256 KB → the summary alone.
    for (const resultBodyJson of ['{"cut":', JSON.stringify({ text: 'x'.repeat(MAX_RESULT_BODY_BYTES) })]) {
      const dispatchId = await submitted();
      const runId = lambdaRunIdOf(dispatchId, 1);
      await documents.send(new PutCommand({ TableName: stateTable, Item: { runId, status: 'completed', result: { summary: 'done' }, resultBodyJson, seq: 4 } }));
      const found = await port().lookup(runId, { submittedAt: NOW.toISOString() });
      expect(found).toEqual({ kind: 'found', run: { runId, status: 'completed', result: { summary: 'done', bodyJson: resultBodyJson } } });
      const state = await table.getState(dispatchId);
      expect(state && (await keepFoundBody({ store: table, blobs, now: () => NOW }, state, found))).toBeUndefined();
    }
  });

  it("takes Lambda's on-failure record in as failed with Lambda's error, once; the lookup then finds it; a record for another attempt changes nothing", async () => {
    const dispatchId = await submitted();
    const runId = lambdaRunIdOf(dispatchId, 1);
    const before = await storedVersionOf(dispatchId);
    const record = { requestContext: { requestId: 'req-2', functionArn: 'arn:aws:lambda:us-east-1:111122223333:function:reviewer:$LATEST', condition: 'RetriesExhausted', approximateInvokeCount: 3 }, requestPayload: { runId, dispatchId }, responsePayload: { errorType: 'Sandbox.Timedout', errorMessage: 'Task timed out after 60.00 seconds' } };
    // In AWS only the failed function's own role (registered as the target) is believed.
    const principals = { resolve: async (id: string) => (id === 'AROAREVIEWER' ? ({ role: 'target', target: 'reviewer' } as const) : id === 'AROAOTHER' ? ({ role: 'target', target: 'other-agent' } as const) : undefined) };
    const deps = { store: table, now: () => NOW, principals, principalMode: 'enforce' as const };
    expect(await takeLambdaFailure(deps, record, 'AROAOTHER:session')).toBe('refused');
    expect(await takeLambdaFailure(deps, record)).toBe('refused');
    expect(await takeLambdaFailure(deps, { ...record, requestContext: { ...record.requestContext, functionArn: 'arn:aws:lambda:us-east-1:111122223333:function:someone-else' } }, 'AROAREVIEWER:s')).toBe('refused');
    expect(await table.getLambdaFailure(dispatchId, 1)).toBeUndefined();
    expect(await takeLambdaFailure(deps, record, 'AROAREVIEWER:session-1')).toBe('failed');
    expect(await takeLambdaFailure(deps, record, 'AROAREVIEWER:session-1')).toBe('already_final');
    const after = await storedVersionOf(dispatchId);
    expect(after?.state.execution).toMatchObject({ status: 'failed', result: { summary: 'Sandbox.Timedout: Task timed out after 60.00 seconds' } });
    if (!before || !after) throw new Error('states');
    // CONTRACT §12: Lambda's error is the run's nativeStatus (the runtime's own word), in the view and the event.
    expect(nativeStatusOf(after.state.execution)).toBe('Sandbox.Timedout');
    expect(eventsForState(before, after).map((event) => [event.detailType, 'nativeStatus' in event.detail ? event.detail.nativeStatus : undefined])).toEqual([['Run Failed', 'Sandbox.Timedout']]);
    expect(await port().lookup(runId, { submittedAt: NOW.toISOString() })).toMatchObject({ kind: 'found', run: { status: 'failed' } });
    expect(await takeLambdaFailure(deps, { ...record, requestPayload: { runId: lambdaRunIdOf(dispatchId, 7) } }, 'AROAREVIEWER:s')).toBe('not_current');
    // An attempt not made yet is none of its runs: nothing kept that a later lookup of attempt 7 would read.
    expect(await table.getLambdaFailure(dispatchId, 7)).toBeUndefined();
    expect(await takeLambdaFailure(deps, { requestPayload: 'not json' }, 'AROAREVIEWER:s')).toBe('unreadable');
  });

  it("is kept and retried, not dropped, when it comes before the ledger recorded the run (was: not_current, the failure lost)", async () => {
    // The bug it pins: an invocation can fail, and its record arrive, while the intake is still in the
    // submission call (it writes the run after Invoke returns). The record was acknowledged `not_current`
    // and not even kept, so neither the retry nor the monitor's lookup ever saw Lambda's error.
    const dispatchId = uniqueName('d');
    const runId = lambdaRunIdOf(dispatchId, 1);
    const record = { requestContext: { requestId: 'req-3', functionArn: 'arn:aws:lambda:us-east-1:111122223333:function:reviewer', condition: 'RetriesExhausted' }, requestPayload: { runId, dispatchId }, responsePayload: { errorType: 'QuotaError', errorMessage: 'the model quota is spent' } };
    const deps = { store: table, now: () => NOW, principalMode: 'open' as const };
    const during: string[] = [];
    const failsAtOnce: TargetPort = {
      ...queued,
      submit: async (request) => {
        // First attempt: the dispatch has no state yet. The record is kept, and the message retried.
        during.push(await takeLambdaFailure(deps, record));
        return queued.submit(request);
      },
    };
    await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor: () => failsAtOnce, now: () => NOW }), {
      messageId: uniqueName('m'),
      body: JSON.stringify({ dispatchId, origin: 'planner', target: 'reviewer', task: { goal: 'review' }, delivery: { mode: 'detached' } }),
      senderId: 'test',
    });
    expect(during).toEqual(['not_yet']);
    expect(await table.getLambdaFailure(dispatchId, 1)).toMatchObject({ runId, errorType: 'QuotaError' });
    // The monitor's lookup already reads it; SQS's redelivery then records it.
    expect(await port().lookup(runId, { submittedAt: NOW.toISOString() })).toMatchObject({ kind: 'found', run: { status: 'failed' } });
    expect(await takeLambdaFailure(deps, record)).toBe('failed');
    expect((await table.getState(dispatchId))?.execution).toMatchObject({ status: 'failed', result: { summary: 'QuotaError: the model quota is spent' } });
    // A record for a dispatch the ledger never took in is none of its runs: acknowledged, nothing kept.
    const unknown = uniqueName('d');
    expect(await takeLambdaFailure(deps, { ...record, requestPayload: { runId: lambdaRunIdOf(unknown, 1) } })).toBe('not_current');
    expect(await table.getLambdaFailure(unknown, 1)).toBeUndefined();
  });

  it('answers not_yet only while the attempt it names is being submitted: a claim held, not a backoff, a lapsed claim or an attempt not made', async () => {
    // The record each case hears, for the run `runId` of `functionName`.
    const recordFor = (functionName: string, dispatchId: string, attempt = 1) => ({
      requestContext: { requestId: 'req-4', functionArn: `arn:aws:lambda:us-east-1:111122223333:function:${functionName}`, condition: 'RetriesExhausted' },
      requestPayload: { runId: lambdaRunIdOf(dispatchId, attempt), dispatchId },
      responsePayload: { errorType: 'QuotaError', errorMessage: 'the model quota is spent' },
    });
    const principals = { resolve: async (id: string) => (id.startsWith('AROALIMITED') ? ({ role: 'target', target: 'reviewer-limited' } as const) : id.startsWith('AROAREVIEWER') ? ({ role: 'target', target: 'reviewer' } as const) : undefined) };
    const enforce = { store: table, now: () => NOW, principals, principalMode: 'enforce' as const };
    /** Takes a dispatch to `target` whose submission call runs `during` first, then answers `answer`. */
    const intakeWith = async (target: string, during: (dispatchId: string) => Promise<void>, answer: 'accepted' | 'unavailable' = 'accepted'): Promise<string> => {
      const dispatchId = uniqueName('d');
      const port: TargetPort = {
        ...queued,
        submit: async (request) => {
          await during(dispatchId);
          return answer === 'accepted' ? queued.submit(request) : { kind: 'unavailable', reason: 'Invoke timed out' };
        },
      };
      await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor: () => port, now: () => NOW }), {
        messageId: uniqueName('m'),
        body: JSON.stringify({ dispatchId, origin: 'planner', target, task: { goal: 'review' }, delivery: { mode: 'detached' } }),
        senderId: 'test',
      });
      return dispatchId;
    };

    // No state yet: the principal is checked against the message's target before anything is kept.
    const heard: string[] = [];
    const first = await intakeWith('reviewer', async (dispatchId) => {
      heard.push(await takeLambdaFailure(enforce, recordFor('reviewer', dispatchId), 'AROALIMITED:s'));
      heard.push(await takeLambdaFailure(enforce, recordFor('reviewer', dispatchId, 2), 'AROAREVIEWER:s'));
      heard.push(String(await table.getLambdaFailure(dispatchId, 1)));
      // The intake's claim lapsed (it is not in the call any more): kept for the lookup, acknowledged.
      heard.push(await takeLambdaFailure({ ...enforce, now: () => new Date(NOW.getTime() + 3_600_000) }, recordFor('reviewer', dispatchId), 'AROAREVIEWER:s'));
      heard.push(await takeLambdaFailure(enforce, recordFor('reviewer', dispatchId), 'AROAREVIEWER:s'));
    });
    expect(heard).toEqual(['refused', 'not_current', 'undefined', 'not_current', 'not_yet']);
    expect(await table.getLambdaFailure(first, 2)).toBeUndefined();

    // A limited target: the slot's write stores the state before Invoke, and the claim it holds says "in the call".
    await table.putTarget({ name: 'reviewer-limited', kind: 'lambda', functionArn: 'arn:aws:lambda:us-east-1:111122223333:function:reviewer-limited', timeoutSeconds: 60, maxConcurrentRuns: 2 });
    const limited: string[] = [];
    const held = await intakeWith('reviewer-limited', async (dispatchId) => {
      expect((await table.getState(dispatchId))?.slot).toBeDefined();
      limited.push(await takeLambdaFailure(enforce, recordFor('reviewer-limited', dispatchId), 'AROALIMITED:s'));
    });
    expect(limited).toEqual(['not_yet']);
    expect(await takeLambdaFailure(enforce, recordFor('reviewer-limited', held), 'AROALIMITED:s')).toBe('failed');

    // Invoke's answer lost (the dispatch in its retry's backoff): not in a call, so not retried; kept for the lookup.
    const backoff = await intakeWith('reviewer', async () => undefined, 'unavailable');
    expect((await table.getState(backoff))?.submission.nextRetryAt).toEqual(expect.any(String));
    expect(await takeLambdaFailure(enforce, recordFor('reviewer', backoff), 'AROAREVIEWER:s')).toBe('not_current');
    expect(await table.getLambdaFailure(backoff, 1)).toMatchObject({ errorType: 'QuotaError' });
  });

  it('serves the task of a submission that carried taskRef to the run it belongs to, and only to it', async () => {
    const task = { goal: 'summarise', notes: 'n'.repeat(1000) };
    const dispatchId = await submitted(task);
    const deps: ApiDeps = ledgerApiDeps({ table, documents, tableName, blobs, targetFor: () => queued, now: () => NOW });
    const get = (query: Record<string, string>) => route(deps, { method: 'GET', rawPath: `/dispatches/${dispatchId}/task`, query, headers: {}, body: undefined, iamUserId: undefined });
    const answer = await get({ runId: lambdaRunIdOf(dispatchId, 1) });
    expect(answer.statusCode).toBe(200);
    expect(JSON.parse(answer.body)).toEqual(task);
    await expect(get({ runId: lambdaRunIdOf(dispatchId, 5) })).rejects.toMatchObject({ code: 'not_found' });
    await expect(get({})).rejects.toMatchObject({ code: 'malformed' });
  });
});
