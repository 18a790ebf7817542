import {
  DescribeExecutionCommand,
  ExecutionAlreadyExists,
  ExecutionDoesNotExist,
  GetExecutionHistoryCommand,
  SendTaskFailureCommand,
  SendTaskSuccessCommand,
  SFNClient,
  StartExecutionCommand,
  StopExecutionCommand,
  TaskTimedOut,
  type DescribeExecutionCommandOutput,
} from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { executionArnOf, stepFunctionsTarget } from '../../shared/adapters/stepfunctions-target.js';
import { TASK_REF_ABOVE_BYTES } from '../../shared/adapters/submission-body.js';
import type { StepFunctionsTargetRegistration, SubmitRequest } from '../../shared/targets/port.js';
import { executionNameOf, STEP_FUNCTIONS_NAME_LENGTH } from '../../shared/targets/run-names.js';

/** The stepfunctions target adapter (CONTRACT §17) against a mocked Step Functions client, call by call. */

const sfnMock = mockClient(SFNClient);


const STATE_MACHINE = 'arn:aws:states:us-east-1:111122223333:stateMachine:review-flow';
const registration: StepFunctionsTargetRegistration = { name: 'review-flow', kind: 'stepfunctions', stateMachineArn: STATE_MACHINE };
const request: SubmitRequest = { dispatchId: 'd-1', attempt: 2, origin: 'planner', task: { goal: 'review' }, expectedEvidence: ['out/r.md'], callbackUrl: 'https://ledger.example.com', timeouts: { stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 } };
const NAME = 'd-1_2';
const ARN = `arn:aws:states:us-east-1:111122223333:execution:review-flow:${NAME}`;
const STARTED = new Date('2026-12-01T12:00:00.000Z');
const TOKEN = 'AQCEAAAAKgAAAAMAAAAAAAAAAT-secret-task-token';

const tokens = new Map<string, { dispatchId: string; attempt: number; approvalId: string; at: string; runId: string; taskToken?: string }>();
const used: string[] = [];
const holdToken = () => tokens.set('d-1|sfn-approval-1', { dispatchId: 'd-1', attempt: 2, approvalId: 'sfn-approval-1', at: STARTED.toISOString(), runId: ARN, taskToken: TOKEN });
holdToken();
afterEach(() => {
  sfnMock.reset();
  used.length = 0;
  holdToken();
});
const target = () =>
  stepFunctionsTarget(registration, {
    sfn: new SFNClient({ region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
    approvalTokens: {
      tokenOf: async (dispatchId: string, approvalId: string) => tokens.get(`${dispatchId}|${approvalId}`),
      used: async (dispatchId: string, approvalId: string) => {
        used.push(`${dispatchId}|${approvalId}`);
      },
    },
    now: () => STARTED,
  });

const execution = (fields: Partial<DescribeExecutionCommandOutput>): DescribeExecutionCommandOutput =>
  ({ executionArn: ARN, stateMachineArn: STATE_MACHINE, startDate: STARTED, input: JSON.stringify({ dispatchId: 'd-1', attempt: 2 }), $metadata: {}, ...fields }) as DescribeExecutionCommandOutput;
const awsError = (name: string, message: string, httpStatusCode = 400): Error => Object.assign(new Error(message), { name, $metadata: { httpStatusCode } });

describe('stepfunctions target: submission', () => {
  it('starts one execution named from the dispatch and attempt, the submission body as its input; the run id is its ARN, the proof its start date', async () => {
    sfnMock.on(StartExecutionCommand).resolves({ executionArn: ARN, startDate: STARTED });
    expect(await target().submit(request)).toEqual({ kind: 'accepted', runId: ARN, status: 'running', requestId: STARTED.toISOString() });
    const input = sfnMock.commandCalls(StartExecutionCommand)[0]?.args[0].input;
    expect(input).toMatchObject({ stateMachineArn: STATE_MACHINE, name: NAME });
    expect(JSON.parse(input?.input ?? '')).toEqual(request);
  });

  it('carries taskRef instead of the task above 200 KB (an input takes 256 KB); the reader adds its execution ARN as runId', async () => {
    sfnMock.on(StartExecutionCommand).resolves({ executionArn: ARN, startDate: STARTED });
    await target().submit({ ...request, task: { goal: 'x'.repeat(TASK_REF_ABOVE_BYTES) } });
    const body = JSON.parse(sfnMock.commandCalls(StartExecutionCommand)[0]?.args[0].input.input ?? '') as Record<string, unknown>;
    expect(body.task).toBeUndefined();
    expect(body.taskRef).toBe('https://ledger.example.com/dispatches/d-1/task');
  });

  it('adopts the execution a name conflict names when its input is this dispatch and attempt, open or closed: never a second run', async () => {
    sfnMock.on(StartExecutionCommand).rejects(new ExecutionAlreadyExists({ message: 'Execution Already Exists', $metadata: {} }));
    sfnMock.on(DescribeExecutionCommand).resolvesOnce(execution({ status: 'RUNNING' })).resolvesOnce(execution({ status: 'SUCCEEDED', output: '{"ok":true}' }));
    expect(await target().submit(request)).toEqual({ kind: 'accepted', runId: ARN, status: 'running', requestId: STARTED.toISOString() });
    // Closed: adopted as well; its end is recorded by the lookup (the next one finds SUCCEEDED).
    expect(await target().submit(request)).toEqual({ kind: 'accepted', runId: ARN, status: 'running', requestId: STARTED.toISOString() });
    expect(sfnMock.commandCalls(DescribeExecutionCommand).map((call) => call.args[0].input.executionArn)).toEqual([ARN, ARN]);
    expect(sfnMock.commandCalls(StartExecutionCommand)).toHaveLength(2);
  });

  it("never adopts another dispatch's or another attempt's execution: the submission is refused with the reason", async () => {
    sfnMock.on(StartExecutionCommand).rejects(new ExecutionAlreadyExists({ message: 'Execution Already Exists', $metadata: {} }));
    for (const input of [{ dispatchId: 'd-2', attempt: 2 }, { dispatchId: 'd-1', attempt: 1 }, 'not json']) {
      sfnMock.on(DescribeExecutionCommand).resolves(execution({ status: 'RUNNING', input: typeof input === 'string' ? input : JSON.stringify(input) }));
      const answer = await target().submit(request);
      expect(answer).toMatchObject({ kind: 'rejected', httpStatus: 409 });
      expect(answer.kind === 'rejected' && answer.reason).toMatch(/exists and is not this dispatch's attempt 2/);
    }
  });

  it('AccessDenied (and every refusal retrying cannot cure) blocks with the reason; throttling and outages are retried', async () => {
    sfnMock.reset();
    sfnMock.on(StartExecutionCommand).rejects(awsError('AccessDeniedException', 'not authorized to perform: states:StartExecution'));
    expect(await target().submit(request)).toEqual({ kind: 'rejected', httpStatus: 400, reason: 'AccessDeniedException: not authorized to perform: states:StartExecution' });
    sfnMock.reset();
    sfnMock.on(StartExecutionCommand).rejects(awsError('StateMachineDoesNotExist', 'State Machine Does Not Exist'));
    expect(await target().submit(request)).toMatchObject({ kind: 'rejected', reason: 'StateMachineDoesNotExist: State Machine Does Not Exist' });
    sfnMock.reset();
    sfnMock.on(StartExecutionCommand).rejects(awsError('ThrottlingException', 'Rate exceeded'));
    expect(await target().submit(request)).toEqual({ kind: 'unavailable', reason: 'ThrottlingException: Rate exceeded' });
    sfnMock.reset();
    sfnMock.on(StartExecutionCommand).rejects(awsError('ExecutionLimitExceeded', 'too many open executions'));
    expect(await target().submit(request)).toMatchObject({ kind: 'unavailable' });
    sfnMock.reset();
    sfnMock.on(StartExecutionCommand).rejects(awsError('ServiceUnavailable', 'try later', 503));
    expect(await target().submit(request)).toMatchObject({ kind: 'unavailable' });
  });
});

describe('stepfunctions target: lookup (the status map)', () => {
  it('RUNNING → running, with its newest history event as its last activity', async () => {
    const moved = new Date('2026-12-01T12:09:30.000Z');
    sfnMock.on(DescribeExecutionCommand).resolves(execution({ status: 'RUNNING' }));
    sfnMock.on(GetExecutionHistoryCommand).resolves({ events: [{ id: 7, type: 'WaitStateExited', timestamp: moved }] });
    expect(await target().lookup(ARN)).toEqual({ kind: 'found', run: { runId: ARN, status: 'running', lastActivityAt: moved.toISOString() } });
    expect(sfnMock.commandCalls(GetExecutionHistoryCommand)[0]?.args[0].input).toEqual({ executionArn: ARN, reverseOrder: true, maxResults: 1 });
    // One read, with the execution's data: METADATA_ONLY is not documented to leave the input out.
    expect(sfnMock.commandCalls(DescribeExecutionCommand).map((call) => call.args[0].input)).toEqual([{ executionArn: ARN }]);
  });

  it.each([
    [{ status: 'SUCCEEDED', output: '{"verdict":"approved"}' }, { status: 'completed', nativeStatus: 'SUCCEEDED', result: { summary: '{"verdict":"approved"}', bodyJson: '{"verdict":"approved"}' } }],
    [{ status: 'SUCCEEDED' }, { status: 'completed', nativeStatus: 'SUCCEEDED' }],
    [{ status: 'FAILED', error: 'States.TaskFailed', cause: 'the model refused' }, { status: 'failed', nativeStatus: 'FAILED', result: { summary: 'States.TaskFailed: the model refused' } }],
    [{ status: 'TIMED_OUT', error: 'States.Timeout' }, { status: 'failed', nativeStatus: 'TIMED_OUT', result: { summary: 'States.Timeout' } }],
    [{ status: 'ABORTED' }, { status: 'cancelled', nativeStatus: 'ABORTED' }],
    [{ status: 'PENDING_REDRIVE', error: 'States.Runtime', cause: 'bad path' }, { status: 'failed', nativeStatus: 'PENDING_REDRIVE', result: { summary: 'States.Runtime: bad path' } }],
  ] as const)('%o → %o', async (described, run) => {
    sfnMock.on(DescribeExecutionCommand).resolves(execution(described));
    expect(await target().lookup(ARN)).toEqual({ kind: 'found', run: { runId: ARN, ...run } });
    expect(sfnMock.commandCalls(GetExecutionHistoryCommand)).toHaveLength(0);
  });

  it('a status this version does not know (or none) concludes nothing: unavailable, never failed', async () => {
    sfnMock.on(DescribeExecutionCommand).resolves(execution({ status: 'SOMETHING_NEW' as DescribeExecutionCommandOutput['status'] }));
    expect(await target().lookup(ARN)).toMatchObject({ kind: 'unavailable', reason: expect.stringContaining('SOMETHING_NEW') });
    sfnMock.on(DescribeExecutionCommand).resolves(execution({ status: undefined }));
    expect(await target().lookup(ARN)).toMatchObject({ kind: 'unavailable' });
  });

  it('bounds the summary: a preview of a large output or cause, control characters escaped', async () => {
    sfnMock.on(DescribeExecutionCommand).resolves(execution({ status: 'SUCCEEDED', output: JSON.stringify({ text: `a\u0007${'x'.repeat(10_000)}` }) }));
    const answer = await target().lookup(ARN);
    const summary = answer.kind === 'found' ? answer.run.result?.summary ?? '' : '';
    expect(summary.length).toBeLessThanOrEqual(200);
    expect(summary).not.toContain('\u0007');
  });

  it('an execution Step Functions does not know → not_found; AccessDenied, throttling and outages → unavailable, never failed', async () => {
    sfnMock.reset();
    sfnMock.on(DescribeExecutionCommand).rejects(new ExecutionDoesNotExist({ message: 'Execution Does Not Exist', $metadata: {} }));
    expect(await target().lookup(ARN)).toEqual({ kind: 'not_found' });
    sfnMock.reset();
    sfnMock.on(DescribeExecutionCommand).rejects(awsError('AccessDeniedException', 'not authorized to perform: states:DescribeExecution'));
    expect(await target().lookup(ARN)).toEqual({ kind: 'unavailable', reason: 'AccessDeniedException: not authorized to perform: states:DescribeExecution' });
    sfnMock.reset();
    sfnMock.on(DescribeExecutionCommand).rejects(awsError('ThrottlingException', 'Rate exceeded'));
    expect(await target().lookup(ARN)).toMatchObject({ kind: 'unavailable' });
    sfnMock.reset();
    sfnMock.on(DescribeExecutionCommand).resolves(execution({ status: 'RUNNING' }));
    sfnMock.on(GetExecutionHistoryCommand).rejects(awsError('AccessDeniedException', 'not authorized to perform: states:GetExecutionHistory'));
    expect(await target().lookup(ARN)).toMatchObject({ kind: 'unavailable', reason: expect.stringContaining('GetExecutionHistory') });
  });
});

describe('stepfunctions target: cancel and approvals', () => {
  it('cancel → StopExecution; the execution stopped (ABORTED) is its word that the run is cancelled', async () => {
    sfnMock.on(StopExecutionCommand).resolves({ stopDate: STARTED });
    sfnMock.on(DescribeExecutionCommand).resolvesOnce(execution({ status: 'ABORTED' })).resolvesOnce(execution({ status: 'SUCCEEDED' }));
    expect(await target().cancel(ARN)).toEqual({ kind: 'cancelled', status: 'cancelled' });
    expect(sfnMock.commandCalls(StopExecutionCommand)[0]?.args[0].input).toMatchObject({ executionArn: ARN });
    // It had ended another way before the stop reached it: the lookup records how, with its output.
    expect(await target().cancel(ARN)).toMatchObject({ kind: 'requested', how: expect.stringContaining('SUCCEEDED') });
    sfnMock.reset();
    sfnMock.on(StopExecutionCommand).rejects(new ExecutionDoesNotExist({ message: 'Execution Does Not Exist', $metadata: {} }));
    expect(await target().cancel(ARN)).toEqual({ kind: 'not_found' });
    sfnMock.reset();
    sfnMock.on(StopExecutionCommand).rejects(awsError('ThrottlingException', 'Rate exceeded'));
    expect(await target().cancel(ARN)).toMatchObject({ kind: 'unavailable' });
  });

  it('approve → SendTaskSuccess and cancel → SendTaskFailure with the stored token; the token is in no answer', async () => {
    sfnMock.on(SendTaskSuccessCommand).resolves({});
    sfnMock.on(SendTaskFailureCommand).resolves({});
    const approved = await target().decideApproval(ARN, 'sfn-approval-1', 'approve', 'd-1');
    expect(approved).toEqual({ kind: 'decided', approvalId: 'sfn-approval-1', decision: 'approve' });
    expect(sfnMock.commandCalls(SendTaskSuccessCommand)[0]?.args[0].input).toEqual({ taskToken: TOKEN, output: JSON.stringify({ approvalId: 'sfn-approval-1', decision: 'approve' }) });
    const cancelled = await target().decideApproval(ARN, 'sfn-approval-1', 'cancel', 'd-1');
    expect(cancelled).toEqual({ kind: 'decided', approvalId: 'sfn-approval-1', decision: 'cancel' });
    expect(sfnMock.commandCalls(SendTaskFailureCommand)[0]?.args[0].input).toMatchObject({ taskToken: TOKEN, error: 'ApprovalCancelled' });
    expect(JSON.stringify([approved, cancelled])).not.toContain(TOKEN);
    // Each token, once used, is erased from the store.
    expect(used).toEqual(['d-1|sfn-approval-1', 'd-1|sfn-approval-1']);
  });

  it('a token already used is never sent again (the decision was taken): a conflict, nothing sent', async () => {
    const record = tokens.get('d-1|sfn-approval-1');
    if (!record) throw new Error('the token is held');
    tokens.set('d-1|sfn-approval-1', { ...record, taskToken: undefined });
    expect(await target().decideApproval(ARN, 'sfn-approval-1', 'approve', 'd-1')).toMatchObject({ kind: 'conflict', reason: expect.stringContaining('decided already') });
    expect(sfnMock.commandCalls(SendTaskSuccessCommand)).toHaveLength(0);
  });

  it("an SDK error that quotes the token is reported without it", async () => {
    sfnMock.on(SendTaskSuccessCommand).rejects(awsError('InvalidToken', `Invalid Token: '${TOKEN}'`));
    const answer = await target().decideApproval(ARN, 'sfn-approval-1', 'approve', 'd-1');
    expect(answer).toMatchObject({ kind: 'conflict', reason: expect.stringContaining('[task token]') });
    expect(JSON.stringify(answer)).not.toContain(TOKEN);
    expect(used).toEqual([]);
  });

  it("an approval this run does not wait on, or one Step Functions no longer holds, is a conflict; nothing is sent for another run's token", async () => {
    expect(await target().decideApproval(ARN, 'sfn-approval-2', 'approve', 'd-1')).toMatchObject({ kind: 'conflict' });
    expect(await target().decideApproval(`${ARN}-other`, 'sfn-approval-1', 'approve', 'd-1')).toMatchObject({ kind: 'conflict' });
    expect(sfnMock.commandCalls(SendTaskSuccessCommand)).toHaveLength(0);
    sfnMock.reset();
    sfnMock.on(SendTaskSuccessCommand).rejects(new TaskTimedOut({ message: 'Task Timed Out', $metadata: {} }));
    const answer = await target().decideApproval(ARN, 'sfn-approval-1', 'approve', 'd-1');
    expect(answer).toMatchObject({ kind: 'conflict' });
    expect(JSON.stringify(answer)).not.toContain(TOKEN);
    sfnMock.reset();
    sfnMock.on(SendTaskSuccessCommand).rejects(awsError('ThrottlingException', 'Rate exceeded'));
    expect(await target().decideApproval(ARN, 'sfn-approval-1', 'approve', 'd-1')).toMatchObject({ kind: 'unavailable' });
  });
});

describe('execution names', () => {
  it('read as the dispatch and attempt where they fit, within 80 characters of [A-Za-z0-9-_]', () => {
    expect(executionNameOf('d-1', 2, STEP_FUNCTIONS_NAME_LENGTH)).toBe('d-1_2');
    expect(executionNameOf('order.7:retry_x', 12, STEP_FUNCTIONS_NAME_LENGTH)).toBe('order_d7_cretry__x_12');
    expect(executionArnOf(STATE_MACHINE, 'd-1_2')).toBe(ARN);
  });

  it('are a digest (with a readable prefix) where the readable name is too long, and never collide with a readable one', () => {
    const long = `${'a'.repeat(100)}.b`;
    const name = executionNameOf(long, 1, STEP_FUNCTIONS_NAME_LENGTH);
    expect(name.length).toBeLessThanOrEqual(STEP_FUNCTIONS_NAME_LENGTH);
    expect(name).toMatch(/^a{32}_[A-Za-z0-9_-]{43}h$/);
    expect(executionNameOf(long, 2, STEP_FUNCTIONS_NAME_LENGTH)).not.toBe(name);
    // Readable names end in a digit, digests in `h`.
    expect(executionNameOf('x', 1, STEP_FUNCTIONS_NAME_LENGTH)).toMatch(/\d$/);
  });

  it('give distinct names to distinct attempts, whatever the ids (the pairs that escape alike included)', () => {
    const ids = ['a_c', 'a:', 'a_', 'a.', 'a__', 'a_d', 'a', 'a_1', 'a-1', 'a:1', `${'_'.repeat(64)}`, `${':'.repeat(64)}`, `${'.'.repeat(63)}x`, 'a'.repeat(128), `${'a'.repeat(127)}b`];
    const names = new Map<string, string>();
    for (const id of ids) {
      for (const attempt of [1, 2, 11, 12, 112]) {
        const name = executionNameOf(id, attempt, STEP_FUNCTIONS_NAME_LENGTH);
        expect(name).toMatch(/^[A-Za-z0-9_-]{1,80}$/);
        expect(names.get(name), `${id}:${attempt} and ${names.get(name) ?? ''} share ${name}`).toBeUndefined();
        names.set(name, `${id}:${attempt}`);
      }
    }
    expect(names.size).toBe(ids.length * 5);
  });
});

describe('execution names, as a property', () => {
  it('two different (dispatchId, attempt) pairs never share a name', () => {
    const id = fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/);
    const attempt = fc.integer({ min: 1, max: 999_999 });
    fc.assert(
      fc.property(id, attempt, id, attempt, (a, n, b, m) => {
        fc.pre(a !== b || n !== m);
        expect(executionNameOf(a, n, STEP_FUNCTIONS_NAME_LENGTH)).not.toBe(executionNameOf(b, m, STEP_FUNCTIONS_NAME_LENGTH));
      }),
      { numRuns: 2_000 },
    );
    // Pairs that differ only where the escapes are: the property's generator rarely draws them.
    fc.assert(
      fc.property(fc.array(fc.constantFrom('_', '.', ':', 'c', 'd', '1', 'a'), { minLength: 1, maxLength: 12 }), fc.array(fc.constantFrom('_', '.', ':', 'c', 'd', '1', 'a'), { minLength: 1, maxLength: 12 }), attempt, attempt, (a, b, n, m) => {
        fc.pre(a.join('') !== b.join('') || n !== m);
        expect(executionNameOf(a.join(''), n, STEP_FUNCTIONS_NAME_LENGTH)).not.toBe(executionNameOf(b.join(''), m, STEP_FUNCTIONS_NAME_LENGTH));
      }),
      { numRuns: 5_000 },
    );
  });
});
