import { readFileSync } from 'node:fs';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DescribeExecutionCommand, GetExecutionHistoryCommand, SendTaskSuccessCommand, SFNClient, StartExecutionCommand, StopExecutionCommand } from '@aws-sdk/client-sfn';
import { DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { approvalTokens } from '../../shared/adapters/approval-tokens.js';
import { stepFunctionsTarget } from '../../shared/adapters/stepfunctions-target.js';
import { route, type ApiDeps } from '../../shared/api/routes.js';
import { nativeStatusOf } from '../../shared/dispatch/state.js';
import type { StepFunctionsTargetRegistration, TargetRegistration } from '../../shared/targets/port.js';
import { takeDispatchMessage } from '../../shared/usecases/intake.js';
import { takeOrchestratorMessage, type OrchestratorDeps } from '../../shared/usecases/orchestrators.js';
import { approvalIdOfToken } from '../../shared/usecases/runtime-approvals.js';
import { engineClients, loopbackOnly, testEngines, uniqueName } from '../support/engines.js';
import { intakeDepsFactory } from '../support/factories.js';
import { ledgerApiDeps } from '../support/api-deps.js';

/**
 * The orchestrator queue (CONTRACT §17) on DynamoDB Local: a state machine's approval request taken only
 * from its own role and for the current run, its token kept apart (in no view, no state, no answer) and
 * answered with SendTaskSuccess; a status change looked up before its end is recorded; a redrive after
 * the end kept as late activity. Step Functions itself is mocked at the SDK (no local engine runs
 * `.waitForTaskToken`); the table is real.
 */

const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
const sfnMock = mockClient(SFNClient);
const NOW = new Date('2026-12-01T12:00:00.000Z');
const STATE_MACHINE = 'arn:aws:states:us-east-1:111122223333:stateMachine:review-flow';
const TOKEN = `AQCEAAAAKgAAAAMAAAAAAAAAAT${'t'.repeat(900)}`;
const registration: StepFunctionsTargetRegistration = { name: 'review-flow', kind: 'stepfunctions', stateMachineArn: STATE_MACHINE, roleId: 'AROAFLOWROLE' };
let table: LedgerTable;
let tableName: string;
let blobs: S3Blobs;

const arnOf = (dispatchId: string) => `arn:aws:states:us-east-1:111122223333:execution:review-flow:${dispatchId}_1`;
const targetFor = (target: TargetRegistration) => {
  if (target.kind !== 'stepfunctions') throw new Error('only the state machine here');
  return stepFunctionsTarget(target, { sfn: new SFNClient({ region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }), approvalTokens: approvalTokens(documents, tableName), now: () => NOW });
};
const deps = (): OrchestratorDeps => ({ store: table, blobs, targetFor, now: () => NOW, principalMode: 'enforce' });
const api = (): ApiDeps => ledgerApiDeps({ table, documents, tableName, blobs, targetFor, now: () => NOW });
/** AWS's sample "Step Functions Execution Status Change" event (its developer guide's), made about one execution of the registered state machine. */
const SAMPLE = JSON.parse(readFileSync(new URL('../fixtures/sfn-status-change.json', import.meta.url), 'utf8')) as { detail: Record<string, unknown> } & Record<string, unknown>;
const statusChange = (executionArn: string, status: string, input: string | null, extra: Record<string, unknown> = {}) => ({
  ...SAMPLE,
  resources: [executionArn],
  detail: { ...SAMPLE.detail, executionArn, stateMachineArn: STATE_MACHINE, name: executionArn.split(':').at(-1), status, input, output: null, ...extra },
});

beforeAll(async () => {
  tableName = uniqueName('sfn-ledger');
  await ensureLedgerTable(clients.dynamodb, tableName);
  table = new LedgerTable(documents, { tableName, retentionSeconds: 86_400 });
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('sfn-blobs')));
  await table.putTarget(registration);
});
afterEach(() => sfnMock.reset());
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

/** A dispatch taken in and started as one execution of the state machine. */
async function submitted(): Promise<{ dispatchId: string; runId: string }> {
  const dispatchId = uniqueName('d').replace(/[^A-Za-z0-9-]/g, '-');
  const runId = arnOf(dispatchId);
  sfnMock.on(StartExecutionCommand).resolves({ executionArn: runId, startDate: NOW });
  await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor, now: () => NOW }), {
    messageId: uniqueName('m'),
    body: JSON.stringify({ dispatchId, origin: 'planner', target: 'review-flow', task: { goal: 'review' }, delivery: { mode: 'detached' } }),
    senderId: 'test',
  });
  const state = await table.getState(dispatchId);
  expect(state).toMatchObject({ phase: 'submitted', runId });
  return { dispatchId, runId };
}

describe('a state machine asks for an approval through the ledger', () => {
  it('takes a task token of any length Step Functions issues: up to 2,048 characters', async () => {
    // The bug it pins: tokens were bounded at 1,024 (said to be the API's bound; the API's is 2,048), so a
    // longer token's request was unreadable and dropped, and its execution waited for an approval never asked.
    const { dispatchId, runId } = await submitted();
    const taskToken = `AQ${'x'.repeat(2046)}`;
    expect(await takeOrchestratorMessage(deps(), { dispatchId, runId, taskToken }, 'AROAFLOWROLE:execution')).toBe('approval_requested');
    expect((await table.getState(dispatchId))?.execution.pendingApproval).toMatchObject({ approvalId: approvalIdOfToken(taskToken, 'sfn') });
  });

  it('is taken only from its own role and for the current run; the token is kept apart and answered with SendTaskSuccess, and shown nowhere', async () => {
    const { dispatchId, runId } = await submitted();
    const request = { dispatchId, runId, taskToken: TOKEN };
    expect(await takeOrchestratorMessage(deps(), request, 'AROAOTHERROLE:execution')).toBe('refused');
    expect(await takeOrchestratorMessage(deps(), request)).toBe('refused');
    expect(await takeOrchestratorMessage(deps(), { ...request, runId: `${runId}-not-this-one` }, 'AROAFLOWROLE:execution')).toBe('not_current');
    expect(await takeOrchestratorMessage(deps(), { ...request, taskToken: 'x'.repeat(2049) }, 'AROAFLOWROLE:execution')).toBe('unreadable');
    expect((await table.getState(dispatchId))?.execution.pendingApproval).toBeNull();

    expect(await takeOrchestratorMessage(deps(), request, 'AROAFLOWROLE:execution')).toBe('approval_requested');
    // SQS delivers at least once: the same token asks nothing twice.
    expect(await takeOrchestratorMessage(deps(), request, 'AROAFLOWROLE:execution')).toBe('unchanged');
    const approvalId = approvalIdOfToken(TOKEN, 'sfn');
    const view = await route(api(), { method: 'GET', rawPath: `/dispatches/${dispatchId}`, query: {}, headers: { 'x-ledger-origin': 'planner' }, body: undefined, iamUserId: undefined });
    expect(JSON.parse(view.body)).toMatchObject({ execution: { status: 'waiting_for_approval', pendingApproval: { approvalId } } });
    expect(view.body).not.toContain(TOKEN);
    // In the table: the token item alone holds it, in a partition of its own (never published, in no dispatch range); no item of the dispatch does.
    const itemsOf = async (pk: string) => (await documents.send(new QueryCommand({ TableName: tableName, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk }, ConsistentRead: true }))).Items ?? [];
    expect((await itemsOf(`D#${dispatchId}`)).filter((item) => JSON.stringify(item).includes(TOKEN))).toEqual([]);
    expect((await itemsOf(`TOKEN#${dispatchId}`)).map((item) => [item.sk, item.taskToken === TOKEN])).toEqual([[`APPROVAL#${approvalId}`, true]]);

    sfnMock.on(SendTaskSuccessCommand).resolves({});
    const decided = await route(api(), { method: 'POST', rawPath: `/dispatches/${dispatchId}/approval`, query: {}, headers: { 'x-ledger-origin': 'planner' }, body: Buffer.from(JSON.stringify({ approvalId, decision: 'approve' })), iamUserId: undefined });
    expect(decided.statusCode).toBe(200);
    expect(decided.body).not.toContain(TOKEN);
    expect(sfnMock.commandCalls(SendTaskSuccessCommand).map((call) => call.args[0].input)).toEqual([{ taskToken: TOKEN, output: JSON.stringify({ approvalId, decision: 'approve' }) }]);
    expect((await table.getState(dispatchId))?.execution).toMatchObject({ status: 'running', pendingApproval: null, lastDecision: { approvalId, decision: 'approve' } });
    // Used, the token is erased; the request redelivered after the decision reopens nothing (was: waiting_for_approval again, a phantom approval).
    expect((await itemsOf(`TOKEN#${dispatchId}`)).map((item) => [item.taskToken, typeof item.decidedAt])).toEqual([[undefined, 'string']]);
    expect(await takeOrchestratorMessage(deps(), request, 'AROAFLOWROLE:execution')).toBe('unchanged');
    expect((await table.getState(dispatchId))?.execution).toMatchObject({ status: 'running', pendingApproval: null });
  });

  // Regression: the orchestrator DLQ's alarm says to move its messages back, but `ledger dlq redrive`
  // sends each as the operator (the state machine's id in `LedgerRedrivenFor`), and the request was
  // refused again for its SenderId alone: back to the DLQ, the execution waiting on a token nobody held.
  it("takes a request an operator moved back from the DLQ as the state machine's own; the same attribute from anyone else is refused", async () => {
    const { dispatchId, runId } = await submitted();
    const principals = { resolve: async (id: string) => (id === 'AROAONCALL' ? ({ role: 'operator' } as const) : id === 'AROAOTHERROLE' ? ({ role: 'target', target: 'other' } as const) : undefined) };
    const request = { dispatchId, runId, taskToken: TOKEN };
    const withRegistry: OrchestratorDeps = { ...deps(), principals };
    expect(await takeOrchestratorMessage(withRegistry, request, 'AROAOTHERROLE:s', 'AROAFLOWROLE:execution')).toBe('refused');
    expect(await takeOrchestratorMessage(withRegistry, request, 'AROAONCALL:oncall')).toBe('refused');
    expect(await takeOrchestratorMessage(withRegistry, request, 'AROAONCALL:oncall', 'AROAOTHERROLE:s')).toBe('refused');
    expect((await table.getState(dispatchId))?.execution.pendingApproval).toBeNull();
    expect(await takeOrchestratorMessage(withRegistry, request, 'AROAONCALL:oncall', 'AROAFLOWROLE:execution')).toBe('approval_requested');
  });

  it("is retried, not dropped, when it comes before the ledger recorded the run's start (was: not_current, the token lost)", async () => {
    // A dispatch accepted and not submitted yet (its notBefore ahead): its run is not recorded.
    const dispatchId = uniqueName('d').replace(/[^A-Za-z0-9-]/g, '-');
    await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor, now: () => NOW }), {
      messageId: uniqueName('m'),
      body: JSON.stringify({ dispatchId, origin: 'planner', target: 'review-flow', task: { goal: 'review' }, notBefore: new Date(NOW.getTime() + 3_600_000).toISOString(), delivery: { mode: 'detached' } }),
      senderId: 'test',
    });
    expect((await table.getState(dispatchId))?.phase).toBe('accepted');
    expect(await takeOrchestratorMessage(deps(), { dispatchId, runId: arnOf(dispatchId), taskToken: TOKEN }, 'AROAFLOWROLE:execution')).toBe('not_yet');
    // And from another role, refused before anything is looked at.
    expect(await takeOrchestratorMessage(deps(), { dispatchId, runId: arnOf(dispatchId), taskToken: TOKEN }, 'AROAOTHERROLE:execution')).toBe('refused');
  });
});

describe("Step Functions' status change events", () => {
  it('are looked up before an end is recorded, as the run\'s own report with the state machine\'s word; a forged or stale one changes nothing', async () => {
    const { dispatchId, runId } = await submitted();
    const input = JSON.stringify({ dispatchId, attempt: 1 });
    // Another state machine's execution, or another run of this dispatch: not this run.
    expect(await takeOrchestratorMessage(deps(), { ...statusChange(runId, 'SUCCEEDED', input), detail: { ...statusChange(runId, 'SUCCEEDED', input).detail, stateMachineArn: `${STATE_MACHINE}-other` } })).toBe('not_current');
    expect(await takeOrchestratorMessage(deps(), statusChange(`${runId}0`, 'SUCCEEDED', input))).toBe('not_current');
    // The event says SUCCEEDED, Step Functions says it is still running: the lookup's word is recorded, not the event's.
    sfnMock.on(DescribeExecutionCommand).resolves({ executionArn: runId, status: 'RUNNING', startDate: NOW, $metadata: {} });
    sfnMock.on(GetExecutionHistoryCommand).resolves({ events: [{ id: 3, type: 'TaskStateEntered', timestamp: NOW }] });
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'SUCCEEDED', input))).toBe('unchanged');
    expect((await table.getState(dispatchId))?.execution.status).not.toBe('completed');

    sfnMock.reset();
    sfnMock.on(DescribeExecutionCommand).resolves({ executionArn: runId, status: 'FAILED', error: 'States.TaskFailed', cause: 'the reviewer crashed', startDate: NOW, stopDate: NOW, $metadata: {} });
    // The input left out of the event (too large to include): the readable execution name says which dispatch.
    expect(await takeOrchestratorMessage(deps(), { ...statusChange(runId, 'FAILED', null), detail: { ...statusChange(runId, 'FAILED', null).detail, inputDetails: { included: false } } })).toBe('ended');
    const ended = await table.getState(dispatchId);
    expect(ended?.execution).toMatchObject({ status: 'failed', result: { summary: 'States.TaskFailed: the reviewer crashed' } });
    expect(ended && nativeStatusOf(ended.execution)).toBe('FAILED');
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'FAILED', input))).toBe('unchanged');

    // The start event delivered after the end (EventBridge and SQS keep no order), or a redrive event Step
    // Functions does not confirm: nothing (was: recorded as a redrive without a lookup).
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'RUNNING', input))).toBe('unchanged');
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'RUNNING', input, { redriveCount: 1 }))).toBe('unchanged');
    // Redriven outside the ledger after its end, by Step Functions' word: late activity, the recorded end stands.
    sfnMock.reset();
    sfnMock.on(DescribeExecutionCommand).resolves({ executionArn: runId, status: 'RUNNING', startDate: NOW, redriveCount: 1, $metadata: {} });
    sfnMock.on(GetExecutionHistoryCommand).resolves({ events: [{ id: 9, type: 'ExecutionRedriven', timestamp: NOW }] });
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'RUNNING', input, { redriveCount: 1 }))).toBe('late');
    expect((await table.getState(dispatchId))?.execution.status).toBe('failed');
    const { Items = [] } = await documents.send(new QueryCommand({ TableName: tableName, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': `D#${dispatchId}` }, ConsistentRead: true }));
    expect(Items.filter((item) => String(item.sk).startsWith('LATE#')).map((item) => ({ runId: item.runId, type: item.type }))).toEqual([{ runId, type: 'redriven' }]);
  });

  it("are retried, not dropped, when the execution ended before the ledger wrote its run (was: not_current, the end left to the stall deadline's lookup and the slot held till then)", async () => {
    const dispatchId = uniqueName('d').replace(/[^A-Za-z0-9-]/g, '-');
    const runId = arnOf(dispatchId);
    const input = JSON.stringify({ dispatchId, attempt: 1 });
    sfnMock.on(StartExecutionCommand).resolves({ executionArn: runId, startDate: NOW });
    sfnMock.on(DescribeExecutionCommand).resolves({ executionArn: runId, status: 'FAILED', error: 'States.TaskFailed', cause: 'failed at once', startDate: NOW, stopDate: NOW, $metadata: {} });
    const heard: string[] = [];
    // The execution's end event is handled while the intake is still in the StartExecution call.
    const inTheCall = (target: TargetRegistration) => {
      const port = targetFor(target);
      return { ...port, submit: async (request: Parameters<typeof port.submit>[0]) => {
        heard.push(await takeOrchestratorMessage(deps(), statusChange(runId, 'FAILED', input)));
        return port.submit(request);
      } };
    };
    await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor: inTheCall, now: () => NOW }), {
      messageId: uniqueName('m'),
      body: JSON.stringify({ dispatchId, origin: 'planner', target: 'review-flow', task: { goal: 'review' }, delivery: { mode: 'detached' } }),
      senderId: 'test',
    });
    expect(heard).toEqual(['not_yet']);
    // SQS brings it back: the end is looked up and recorded.
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'FAILED', input))).toBe('ended');
    expect((await table.getState(dispatchId))?.execution).toMatchObject({ status: 'failed', result: { summary: 'States.TaskFailed: failed at once' } });
    // Not in a call: a dispatch waiting for its notBefore, or the intake's claim lapsed — none of its runs, acknowledged.
    const waiting = uniqueName('d').replace(/[^A-Za-z0-9-]/g, '-');
    await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor, now: () => NOW }), {
      messageId: uniqueName('m'),
      body: JSON.stringify({ dispatchId: waiting, origin: 'planner', target: 'review-flow', task: { goal: 'review' }, notBefore: new Date(NOW.getTime() + 3_600_000).toISOString(), delivery: { mode: 'detached' } }),
      senderId: 'test',
    });
    expect(await takeOrchestratorMessage(deps(), statusChange(arnOf(waiting), 'FAILED', JSON.stringify({ dispatchId: waiting, attempt: 1 })))).toBe('not_current');
    // Another state machine's execution in the window: not this dispatch's.
    const other: string[] = [];
    const otherId = uniqueName('d').replace(/[^A-Za-z0-9-]/g, '-');
    sfnMock.on(StartExecutionCommand).resolves({ executionArn: arnOf(otherId), startDate: NOW });
    const otherMachine = (target: TargetRegistration) => {
      const port = targetFor(target);
      return { ...port, submit: async (request: Parameters<typeof port.submit>[0]) => {
        const change = statusChange(arnOf(otherId), 'FAILED', null);
        other.push(await takeOrchestratorMessage(deps(), { ...change, detail: { ...change.detail, stateMachineArn: `${STATE_MACHINE}-other` } }));
        return port.submit(request);
      } };
    };
    await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor: otherMachine, now: () => NOW }), {
      messageId: uniqueName('m'),
      body: JSON.stringify({ dispatchId: otherId, origin: 'planner', target: 'review-flow', task: { goal: 'review' }, delivery: { mode: 'detached' } }),
      senderId: 'test',
    });
    expect(other).toEqual(['not_current']);
  });

  it("tell a redispatch's new execution, not recorded yet, from the one it superseded: the new one's event is retried, the old one's acknowledged", async () => {
    const { dispatchId, runId } = await submitted();
    sfnMock.on(DescribeExecutionCommand).resolves({ executionArn: runId, status: 'FAILED', error: 'States.TaskFailed', cause: 'crashed', startDate: NOW, stopDate: NOW, $metadata: {} });
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'FAILED', JSON.stringify({ dispatchId, attempt: 1 })))).toBe('ended');
    const second = runId.replace(/_1$/, '_2');
    sfnMock.on(StartExecutionCommand).resolves({ executionArn: second, startDate: NOW });
    const heard: string[] = [];
    // While the redispatch is in the StartExecution call of attempt 2: the state holds its claim.
    const inTheCall = (target: TargetRegistration) => {
      const port = targetFor(target);
      return { ...port, submit: async (request: Parameters<typeof port.submit>[0]) => {
        heard.push(await takeOrchestratorMessage(deps(), statusChange(runId, 'ABORTED', JSON.stringify({ dispatchId, attempt: 1 }))));
        heard.push(await takeOrchestratorMessage(deps(), statusChange(second, 'FAILED', JSON.stringify({ dispatchId, attempt: 2 }))));
        return port.submit(request);
      } };
    };
    const answer = await route(ledgerApiDeps({ table, documents, tableName, blobs, targetFor: inTheCall, now: () => NOW }), {
      method: 'POST', rawPath: `/dispatches/${dispatchId}/redispatch`, query: {}, headers: { 'x-ledger-origin': 'planner' }, body: Buffer.from(JSON.stringify({ reason: 'run it again' })), iamUserId: undefined,
    });
    expect(answer.statusCode).toBe(202);
    expect(heard).toEqual(['not_current', 'not_yet']);
    expect((await table.getState(dispatchId))?.runId).toBe(second);
  });

  it('a redrive after the end lists the dispatch in GET /attention (kind redriven) until a forced redispatch, which asks the redriven execution to stop (was: kept as late activity only, so no person ever heard of work running outside the ledger; a plain redispatch then started a second writer)', async () => {
    const { dispatchId, runId } = await submitted();
    const input = JSON.stringify({ dispatchId, attempt: 1 });
    sfnMock.on(DescribeExecutionCommand).resolves({ executionArn: runId, status: 'FAILED', error: 'States.TaskFailed', cause: 'crashed', startDate: NOW, stopDate: NOW, $metadata: {} });
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'FAILED', input))).toBe('ended');
    const call = (method: string, rawPath: string, query: Record<string, string> = {}, body?: unknown) =>
      route(api(), { method, rawPath, query, headers: { 'x-ledger-origin': 'planner' }, body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)), iamUserId: undefined });
    const listed = async () => (JSON.parse((await call('GET', '/attention', { kind: 'redriven', limit: '100' })).body).items as Array<{ dispatchId: string; kind: string; reason: string; since: string }>).filter((entry) => entry.dispatchId === dispatchId);
    expect(await listed()).toEqual([]);

    sfnMock.reset();
    sfnMock.on(DescribeExecutionCommand).resolves({ executionArn: runId, status: 'RUNNING', startDate: NOW, redriveCount: 1, $metadata: {} });
    sfnMock.on(GetExecutionHistoryCommand).resolves({ events: [{ id: 9, type: 'ExecutionRedriven', timestamp: NOW }] });
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'RUNNING', input, { redriveCount: 1 }))).toBe('late');
    const state = await table.getState(dispatchId);
    // The recorded end stands; what Step Functions does now is kept beside it.
    expect(state?.execution).toMatchObject({ status: 'failed', redriven: { at: NOW.toISOString(), count: 1 } });
    const [entry] = await listed();
    expect(entry).toMatchObject({ kind: 'redriven', since: NOW.toISOString() });
    expect(entry?.reason).toContain(`npx ledger redispatch ${dispatchId} --force`);
    // Redelivered: one entry, nothing written again.
    const version = (await table.getStored(dispatchId))?.version;
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'RUNNING', input, { redriveCount: 1 }))).toBe('unchanged');
    expect((await listed()).length).toBe(1);
    expect((await table.getStored(dispatchId))?.version).toBe(version);

    // A plain redispatch would be a second writer beside the redriven execution: refused, the redrive named.
    await expect(call('POST', `/dispatches/${dispatchId}/redispatch`, {}, { reason: 'run it again' })).rejects.toMatchObject({ code: 'conflict', details: { runId, redriven: { count: 1 } } });
    // Forced: the redriven execution is asked to stop and fenced; the new attempt runs; off the list.
    sfnMock.on(StopExecutionCommand).resolves({ stopDate: NOW });
    sfnMock.on(StartExecutionCommand).resolves({ executionArn: `${runId.slice(0, -1)}2`, startDate: NOW });
    expect((await call('POST', `/dispatches/${dispatchId}/redispatch`, {}, { reason: 'run it under the ledger', force: true })).statusCode).toBe(202);
    expect(sfnMock.commandCalls(StopExecutionCommand).map((stop) => stop.args[0].input.executionArn)).toEqual([runId]);
    expect(await table.getState(dispatchId)).toMatchObject({ attempt: 2, supersededRuns: [runId] });
    expect(await listed()).toEqual([]);
  });

  it('a redrive that already ended again is still listed; one Step Functions cannot be asked about is retried; one before the recorded end is that end’s own (was: dropped as unchanged, or lost with an unanswered lookup)', async () => {
    const { dispatchId, runId } = await submitted();
    const input = JSON.stringify({ dispatchId, attempt: 1 });
    sfnMock.on(DescribeExecutionCommand).resolves({ executionArn: runId, status: 'FAILED', error: 'States.TaskFailed', cause: 'crashed', startDate: NOW, stopDate: NOW, redriveCount: 1, redriveDate: new Date(NOW.getTime() - 60_000), $metadata: {} });
    // Its end recorded after a redrive Step Functions had already made: that redrive is the recorded end's own.
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'FAILED', input, { redriveCount: 1 }))).toBe('ended');
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'FAILED', input, { redriveCount: 1 }))).toBe('unchanged');
    expect((await table.getState(dispatchId))?.execution.redriven).toBeUndefined();
    // Step Functions cannot be asked: the message is retried, nothing concluded.
    sfnMock.reset();
    sfnMock.on(DescribeExecutionCommand).rejects(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }));
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'SUCCEEDED', input, { redriveCount: 2 }))).toBe('unobserved');
    // Redriven after the recorded end and already over again (its own end event the only word of it): listed.
    sfnMock.reset();
    sfnMock.on(DescribeExecutionCommand).resolves({ executionArn: runId, status: 'SUCCEEDED', output: '{}', startDate: NOW, stopDate: new Date(NOW.getTime() + 9_000), redriveCount: 2, redriveDate: new Date(NOW.getTime() + 5_000), $metadata: {} });
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'SUCCEEDED', input, { redriveCount: 2 }))).toBe('late');
    expect((await table.getState(dispatchId))?.execution).toMatchObject({ status: 'failed', redriven: { count: 2 } });
  });

  it("records a succeeded execution's output as the result's body (kept before the state that names it), and its preview as the summary", async () => {
    const { dispatchId, runId } = await submitted();
    const output = JSON.stringify({ verdict: 'approved', notes: 'n'.repeat(20_000) });
    sfnMock.on(DescribeExecutionCommand).resolves({ executionArn: runId, status: 'SUCCEEDED', output, startDate: NOW, stopDate: NOW, $metadata: {} });
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'SUCCEEDED', JSON.stringify({ dispatchId, attempt: 1 })))).toBe('ended');
    const ended = await table.getState(dispatchId);
    expect(ended?.execution).toMatchObject({ status: 'completed', result: { body: { seq: 0, bytes: output.length, spilled: true } } });
    expect(ended?.execution.result?.summary?.length).toBeLessThanOrEqual(200);
    const body = ended?.execution.result?.body;
    const kept = body && (await table.getResultBody(dispatchId, 1, body.seq, body.digest));
    expect(kept && kept.bodyRef && (await blobs.getText(kept.bodyRef))).toBe(output);
  });

  it("an execution the ledger did not start (AWS's sample event as it is) changes nothing", async () => {
    expect(await takeOrchestratorMessage(deps(), SAMPLE)).toBe('not_current');
  });

  it("keeps an output nested deeper than a result body may be as its preview alone: never a failure", async () => {
    const { dispatchId, runId } = await submitted();
    const output = `${'['.repeat(2_000)}${']'.repeat(2_000)}`;
    sfnMock.on(DescribeExecutionCommand).resolves({ executionArn: runId, status: 'SUCCEEDED', output, startDate: NOW, stopDate: NOW, $metadata: {} });
    expect(await takeOrchestratorMessage(deps(), statusChange(runId, 'SUCCEEDED', JSON.stringify({ dispatchId, attempt: 1 })))).toBe('ended');
    const ended = await table.getState(dispatchId);
    expect(ended?.execution.status).toBe('completed');
    expect(ended?.execution.result?.body).toBeUndefined();
    expect(ended?.execution.result?.summary?.length).toBeGreaterThan(0);
  });

  it('a message that is neither is unreadable', async () => {
    expect(await takeOrchestratorMessage(deps(), { hello: 'world' })).toBe('unreadable');
    expect(await takeOrchestratorMessage(deps(), undefined)).toBe('unreadable');
    expect(await takeOrchestratorMessage(deps(), { ...statusChange(arnOf('x'), 'SUCCEEDED', null), source: 'not.aws.states' })).toBe('unreadable');
  });
});
