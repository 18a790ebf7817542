import {
  DurableExecutionAlreadyStartedException,
  GetDurableExecutionCommand,
  GetDurableExecutionHistoryCommand,
  InvokeCommand,
  LambdaClient,
  ListDurableExecutionsByFunctionCommand,
  ResourceNotFoundException,
  SendDurableExecutionCallbackFailureCommand,
  SendDurableExecutionCallbackSuccessCommand,
  StopDurableExecutionCommand,
  type Execution,
  type GetDurableExecutionCommandOutput,
} from '@aws-sdk/client-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { DURABLE_EXECUTION_NAME_LENGTH, durableTarget } from '../../shared/adapters/durable-target.js';
import { TASK_REF_ABOVE_BYTES } from '../../shared/adapters/submission-body.js';
import type { ApprovalTokenRecord } from '../../shared/dispatch/records.js';
import { accepted } from '../../shared/dispatch/transitions/lifecycle.js';
import type { DurableTargetRegistration, SubmitRequest } from '../../shared/targets/port.js';
import { executionNameOf } from '../../shared/targets/run-names.js';
import { keepFoundBody } from '../../shared/usecases/look-up-run.js';
import { MAX_RESULT_BODY_BYTES } from '../../shared/usecases/result-body.js';
import { newDispatchFactory } from '../support/factories.js';
import { MemoryBlobs } from '../support/memory-blobs.js';
import { MemoryStore } from '../support/memory-store.js';

/** The durable target adapter (CONTRACT §17) against a mocked Lambda client: no local engine runs durable functions. */

const lambdaMock = mockClient(LambdaClient);

const FUNCTION = 'arn:aws:lambda:us-east-1:111122223333:function:review-flow:live';
const registration: DurableTargetRegistration = { name: 'review-flow', kind: 'durable', functionArn: FUNCTION };
const request: SubmitRequest = { dispatchId: 'd-1', attempt: 2, origin: 'planner', task: { goal: 'review' }, expectedEvidence: ['out/r.md'], callbackUrl: 'https://ledger.example.com', timeouts: { stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 } };
const NAME = 'd-1_2';
const ARN = `arn:aws:lambda:us-east-1:111122223333:function:review-flow:3/durable-execution/${NAME}/7c9e6679-7425-40de-944b-e07fc1f90ae7`;
const STARTED = new Date('2026-12-01T12:00:00.000Z');
/** A callback id as long as Lambda makes them: 1,024 characters, longer than any reason the ledger keeps. */
const CALLBACK_ID = Array.from({ length: 1024 }, (_, at) => 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'[(at * 7 + Math.floor(at / 64)) % 64]).join('');

/** The approval tokens as the table keeps them: `used` erases the token and says when (as `approvalTokens` does). */
const tokens = new Map<string, ApprovalTokenRecord>();
const holdCallback = () => tokens.set('d-1|dur-approval-1', { dispatchId: 'd-1', attempt: 2, approvalId: 'dur-approval-1', at: STARTED.toISOString(), runId: ARN, taskToken: CALLBACK_ID });
holdCallback();
afterEach(() => {
  lambdaMock.reset();
  tokens.clear();
  holdCallback();
});
const target = () =>
  durableTarget(registration, {
    lambda: new LambdaClient({ region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
    approvalTokens: {
      tokenOf: async (dispatchId, approvalId) => tokens.get(`${dispatchId}|${approvalId}`),
      used: async (dispatchId, approvalId, at) => {
        const record = tokens.get(`${dispatchId}|${approvalId}`);
        if (!record) throw new Error('no such approval token');
        const { taskToken: _erased, ...rest } = record;
        tokens.set(`${dispatchId}|${approvalId}`, { ...rest, decidedAt: at.toISOString() });
      },
    },
    now: () => STARTED,
  });

const execution = (fields: Partial<GetDurableExecutionCommandOutput>): GetDurableExecutionCommandOutput => ({
  DurableExecutionArn: ARN,
  DurableExecutionName: NAME,
  FunctionArn: FUNCTION,
  InputPayload: JSON.stringify({ dispatchId: 'd-1', attempt: 2 }),
  StartTimestamp: STARTED,
  Status: 'RUNNING',
  $metadata: {},
  ...fields,
});
const listed = (name: string, arn: string): Execution => ({ DurableExecutionArn: arn, DurableExecutionName: name, FunctionArn: FUNCTION, Status: 'RUNNING', StartTimestamp: STARTED });
const awsError = (name: string, message: string, httpStatusCode = 400): Error => Object.assign(new Error(message), { name, $metadata: { httpStatusCode } });
const alreadyStarted = () => new DurableExecutionAlreadyStartedException({ message: `Execution ${NAME} already started with a different payload`, $metadata: { httpStatusCode: 409 } });
const invokeInput = (call = 0) => lambdaMock.commandCalls(InvokeCommand)[call]?.args[0].input;
/** A payload the adapter sent, as text (it sends bytes). */
const textOf = (blob: unknown): string => (typeof blob === 'string' ? blob : blob instanceof Uint8Array ? Buffer.from(blob).toString('utf8') : '');
const payloadOf = (call = 0): Record<string, unknown> => JSON.parse(textOf(invokeInput(call)?.Payload)) as Record<string, unknown>;

describe('durable target: submission', () => {
  it('invokes the qualified function asynchronously once, named from the dispatch and attempt, the submission body as its payload; the run id is the execution ARN, the proof the invoke', async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202, DurableExecutionArn: ARN, $metadata: { requestId: 'req-7' } });
    expect(await target().submit(request)).toEqual({ kind: 'accepted', runId: ARN, status: 'running', requestId: 'req-7' });
    expect(lambdaMock.calls()).toHaveLength(1);
    const input = invokeInput();
    expect(input).toMatchObject({ FunctionName: FUNCTION, InvocationType: 'Event', DurableExecutionName: NAME });
    expect(input?.DurableExecutionName).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    // The body names no run id: the execution knows itself by its ARN.
    expect(payloadOf()).toEqual(request);
  });

  it('names the execution within 64 characters of [A-Za-z0-9_-] whatever the dispatch id', async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202, DurableExecutionArn: ARN, $metadata: { requestId: 'req-8' } });
    const long = `${'order.'.repeat(21)}x`;
    await target().submit({ ...request, dispatchId: long, attempt: 123_456 });
    const name = invokeInput()?.DurableExecutionName ?? '';
    expect(name).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    expect(name).toBe(executionNameOf(long, 123_456, DURABLE_EXECUTION_NAME_LENGTH));
  });

  it('carries taskRef instead of the task above 200 KB (an asynchronous payload takes 256 KB); the reader adds its execution ARN as runId', async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202, DurableExecutionArn: ARN, $metadata: { requestId: 'req-9' } });
    await target().submit({ ...request, task: { goal: 'x'.repeat(TASK_REF_ABOVE_BYTES) } });
    const body = payloadOf();
    expect(body.task).toBeUndefined();
    expect(body.taskRef).toBe('https://ledger.example.com/dispatches/d-1/task');
  });

  it('an answer naming no durable execution is never accepted, nor tried again: rejected, with why (was: unavailable, so each retry could run a function that is not durable once more)', async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202, $metadata: { requestId: 'req-10' } });
    expect(await target().submit(request)).toMatchObject({ kind: 'rejected', reason: expect.stringContaining('durable') });
  });

  it('adopts the execution a name conflict names when its input is this dispatch and attempt, open or closed: found by its exact name, one execution', async () => {
    lambdaMock.on(InvokeCommand).rejects(alreadyStarted());
    // The name filter matches substrings: `xd-1_2` and `d-1_20` come first and are passed over; the exact name is on the second page.
    lambdaMock
      .on(ListDurableExecutionsByFunctionCommand)
      .resolvesOnce({ DurableExecutions: [listed('xd-1_2', `${ARN}-x`), listed('d-1_20', `${ARN}-20`)], NextMarker: 'page-2' })
      .resolves({ DurableExecutions: [listed(NAME, ARN)] });
    lambdaMock.on(GetDurableExecutionCommand).resolvesOnce(execution({ Status: 'RUNNING' })).resolvesOnce(execution({ Status: 'SUCCEEDED', Result: '{"ok":true}' }));
    expect(await target().submit(request)).toEqual({ kind: 'accepted', runId: ARN, status: 'running', requestId: STARTED.toISOString() });
    const lists = lambdaMock.commandCalls(ListDurableExecutionsByFunctionCommand).map((call) => call.args[0].input);
    expect(lists[0]).toEqual({ FunctionName: 'arn:aws:lambda:us-east-1:111122223333:function:review-flow', Qualifier: 'live', DurableExecutionName: NAME, MaxItems: 100 });
    expect(lists[1]).toMatchObject({ DurableExecutionName: NAME, Marker: 'page-2' });
    // Closed: adopted as well; its end is recorded by the lookup (the next one finds SUCCEEDED).
    expect(await target().submit(request)).toEqual({ kind: 'accepted', runId: ARN, status: 'running', requestId: STARTED.toISOString() });
    expect(lambdaMock.commandCalls(GetDurableExecutionCommand).map((call) => call.args[0].input.DurableExecutionArn)).toEqual([ARN, ARN]);
    // One Invoke per submission, and never another to get round the conflict.
    expect(lambdaMock.commandCalls(InvokeCommand)).toHaveLength(2);
  });

  it("never adopts another dispatch's or another attempt's execution: the submission is refused with the reason", async () => {
    lambdaMock.on(InvokeCommand).rejects(alreadyStarted());
    lambdaMock.on(ListDurableExecutionsByFunctionCommand).resolves({ DurableExecutions: [listed(NAME, ARN)] });
    for (const input of [{ dispatchId: 'd-2', attempt: 2 }, { dispatchId: 'd-1', attempt: 1 }, 'not json', undefined]) {
      lambdaMock.on(GetDurableExecutionCommand).resolves(execution({ InputPayload: typeof input === 'object' ? JSON.stringify(input) : input }));
      const answer = await target().submit(request);
      expect(answer).toMatchObject({ kind: 'rejected', httpStatus: 409 });
      expect(answer.kind === 'rejected' && answer.reason).toMatch(/an execution named d-1_2 exists and is not this dispatch's attempt 2/);
    }
    expect(lambdaMock.commandCalls(InvokeCommand)).toHaveLength(4);
  });

  it('a conflict whose execution is not listed within the bound, or cannot be read, is retried: nothing started, nothing adopted', async () => {
    lambdaMock.on(InvokeCommand).rejects(alreadyStarted());
    lambdaMock.on(ListDurableExecutionsByFunctionCommand).resolves({ DurableExecutions: [listed('d-1_21', `${ARN}-21`)], NextMarker: 'more' });
    expect(await target().submit(request)).toMatchObject({ kind: 'unavailable', reason: expect.stringContaining('d-1_2') });
    expect(lambdaMock.commandCalls(ListDurableExecutionsByFunctionCommand)).toHaveLength(3);
    expect(lambdaMock.commandCalls(GetDurableExecutionCommand)).toHaveLength(0);
    lambdaMock.on(ListDurableExecutionsByFunctionCommand).rejects(awsError('AccessDeniedException', 'not authorized to perform: lambda:ListDurableExecutionsByFunction', 403));
    expect(await target().submit(request)).toEqual({ kind: 'unavailable', reason: 'AccessDeniedException: not authorized to perform: lambda:ListDurableExecutionsByFunction' });
  });

  it('AccessDenied (and every refusal retrying cannot cure) blocks with the reason; throttling and outages are retried', async () => {
    lambdaMock.on(InvokeCommand).rejects(awsError('AccessDeniedException', 'not authorized to perform: lambda:InvokeFunction', 403));
    expect(await target().submit(request)).toEqual({ kind: 'rejected', httpStatus: 403, reason: 'AccessDeniedException: not authorized to perform: lambda:InvokeFunction' });
    lambdaMock.on(InvokeCommand).rejects(awsError('ResourceNotFoundException', 'Function not found', 404));
    expect(await target().submit(request)).toMatchObject({ kind: 'rejected', httpStatus: 404, reason: 'ResourceNotFoundException: Function not found' });
    lambdaMock.on(InvokeCommand).rejects(awsError('TooManyRequestsException', 'Rate exceeded', 429));
    expect(await target().submit(request)).toEqual({ kind: 'unavailable', reason: 'TooManyRequestsException: Rate exceeded' });
    lambdaMock.on(InvokeCommand).rejects(awsError('ServiceException', 'internal error', 500));
    expect(await target().submit(request)).toMatchObject({ kind: 'unavailable' });
    lambdaMock.on(InvokeCommand).rejects(awsError('ResourceConflictException', 'the function is being updated', 409));
    expect(await target().submit(request)).toMatchObject({ kind: 'unavailable' });
  });
});

describe('durable target: lookup (the status map)', () => {
  it('RUNNING → running, with its newest history event (newest first, one, no data) as its last activity', async () => {
    const moved = new Date('2026-12-01T12:09:30.000Z');
    lambdaMock.on(GetDurableExecutionCommand).resolves(execution({ Status: 'RUNNING' }));
    lambdaMock.on(GetDurableExecutionHistoryCommand).resolves({ Events: [{ EventId: 9, EventType: 'WaitSucceeded', EventTimestamp: moved }] });
    expect(await target().lookup(ARN)).toEqual({ kind: 'found', run: { runId: ARN, status: 'running', lastActivityAt: moved.toISOString() } });
    // Read once, without its data (was: with it, the submission body of up to 200 KB, at each stall window).
    expect(lambdaMock.commandCalls(GetDurableExecutionCommand).map((call) => call.args[0].input)).toEqual([{ DurableExecutionArn: ARN, IncludeExecutionData: false }]);
    expect(lambdaMock.commandCalls(GetDurableExecutionHistoryCommand)[0]?.args[0].input).toEqual({ DurableExecutionArn: ARN, ReverseOrder: true, MaxItems: 1, IncludeExecutionData: false });
  });

  it('reads an execution with its data only when it ended with a result or an error to record', async () => {
    const reads = () => lambdaMock.commandCalls(GetDurableExecutionCommand).map((call) => call.args[0].input);
    lambdaMock.on(GetDurableExecutionCommand).resolvesOnce(execution({ Status: 'SUCCEEDED' })).resolvesOnce(execution({ Status: 'SUCCEEDED', Result: '{"summary":"done","body":{"pages":3}}' }));
    expect(await target().lookup(ARN)).toEqual({ kind: 'found', run: { runId: ARN, status: 'completed', nativeStatus: 'SUCCEEDED', result: { summary: 'done', bodyJson: '{"pages":3}' } } });
    expect(reads()).toEqual([{ DurableExecutionArn: ARN, IncludeExecutionData: false }, { DurableExecutionArn: ARN, IncludeExecutionData: true }]);

    for (const Status of ['FAILED', 'TIMED_OUT'] as const) {
      lambdaMock.reset();
      lambdaMock.on(GetDurableExecutionCommand).resolvesOnce(execution({ Status })).resolvesOnce(execution({ Status, Error: { ErrorType: 'ReviewError' } }));
      expect(await target().lookup(ARN)).toMatchObject({ kind: 'found', run: { status: 'failed', result: { summary: 'ReviewError' } } });
      expect(reads()).toEqual([{ DurableExecutionArn: ARN, IncludeExecutionData: false }, { DurableExecutionArn: ARN, IncludeExecutionData: true }]);
    }
    // The status mapped is the second read's (it moved between the reads): never the first's beside the second's data.
    lambdaMock.reset();
    lambdaMock.on(GetDurableExecutionCommand).resolvesOnce(execution({ Status: 'SUCCEEDED' })).resolvesOnce(execution({ Status: 'FAILED', Error: { ErrorType: 'ReviewError' } }));
    expect(await target().lookup(ARN)).toMatchObject({ kind: 'found', run: { status: 'failed', nativeStatus: 'FAILED' } });

    lambdaMock.reset();
    lambdaMock.on(GetDurableExecutionCommand).resolves(execution({ Status: 'STOPPED' }));
    expect(await target().lookup(ARN)).toMatchObject({ kind: 'found', run: { status: 'cancelled' } });
    expect(reads()).toEqual([{ DurableExecutionArn: ARN, IncludeExecutionData: false }]);
  });

  it.each([
    [{ Status: 'SUCCEEDED', Result: '{"verdict":"approved"}' }, { status: 'completed', nativeStatus: 'SUCCEEDED', result: { summary: '{"verdict":"approved"}', bodyJson: '{"verdict":"approved"}' } }],
    [{ Status: 'SUCCEEDED' }, { status: 'completed', nativeStatus: 'SUCCEEDED' }],
    // The worker kit's durableRun returns the result it reported: read as that result (was: the wrapper kept as the body).
    [{ Status: 'SUCCEEDED', Result: '{"summary":"reviewed","body":{"pages":3}}' }, { status: 'completed', nativeStatus: 'SUCCEEDED', result: { summary: 'reviewed', bodyJson: '{"pages":3}' } }],
    [{ Status: 'SUCCEEDED', Result: '{"summary":"done"}' }, { status: 'completed', nativeStatus: 'SUCCEEDED', result: { summary: 'done' } }],
    // The summary as an event's (kept as written, shown escaped), an empty one too.
    [{ Status: 'SUCCEEDED', Result: '{"body":[1],"summary":"two\\u0007lines"}' }, { status: 'completed', nativeStatus: 'SUCCEEDED', result: { summary: 'two\u0007lines', bodyJson: '[1]' } }],
    [{ Status: 'SUCCEEDED', Result: '{"summary":""}' }, { status: 'completed', nativeStatus: 'SUCCEEDED', result: { summary: '' } }],
    // Anything else is the body, its preview the summary: another member, a summary that is not text, no summary.
    [{ Status: 'SUCCEEDED', Result: '{"summary":"x","pages":3}' }, { status: 'completed', nativeStatus: 'SUCCEEDED', result: { summary: '{"summary":"x","pages":3}', bodyJson: '{"summary":"x","pages":3}' } }],
    [{ Status: 'SUCCEEDED', Result: '{"summary":5}' }, { status: 'completed', nativeStatus: 'SUCCEEDED', result: { summary: '{"summary":5}', bodyJson: '{"summary":5}' } }],
    [{ Status: 'SUCCEEDED', Result: '{"body":{"pages":3}}' }, { status: 'completed', nativeStatus: 'SUCCEEDED', result: { summary: '{"body":{"pages":3}}', bodyJson: '{"body":{"pages":3}}' } }],
    [{ Status: 'FAILED', Error: { ErrorType: 'ReviewError', ErrorMessage: 'the model refused' } }, { status: 'failed', nativeStatus: 'FAILED', result: { summary: 'ReviewError: the model refused' } }],
    [{ Status: 'TIMED_OUT', Error: { ErrorType: 'ExecutionTimedOut' } }, { status: 'failed', nativeStatus: 'TIMED_OUT', result: { summary: 'ExecutionTimedOut' } }],
    [{ Status: 'TIMED_OUT' }, { status: 'failed', nativeStatus: 'TIMED_OUT' }],
    [{ Status: 'STOPPED', Error: { ErrorType: 'CancelledThroughLedger' } }, { status: 'cancelled', nativeStatus: 'STOPPED' }],
  ] as const)('%o → %o', async (got, run) => {
    lambdaMock.on(GetDurableExecutionCommand).resolves(execution(got));
    expect(await target().lookup(ARN)).toEqual({ kind: 'found', run: { runId: ARN, ...run } });
    expect(lambdaMock.commandCalls(GetDurableExecutionHistoryCommand)).toHaveLength(0);
  });

  it('a status this version does not know (or none) concludes nothing: unavailable, never failed', async () => {
    lambdaMock.on(GetDurableExecutionCommand).resolves(execution({ Status: 'PAUSED' as GetDurableExecutionCommandOutput['Status'] }));
    expect(await target().lookup(ARN)).toMatchObject({ kind: 'unavailable', reason: 'GetDurableExecution answered a status the ledger does not know: PAUSED' });
    lambdaMock.on(GetDurableExecutionCommand).resolves(execution({ Status: undefined }));
    expect(await target().lookup(ARN)).toMatchObject({ kind: 'unavailable' });
  });

  it("a Result is the result's body within §10's bounds; beyond them the ledger keeps its preview alone, and the run is completed all the same", async () => {
    const store = new MemoryStore();
    const blobs = new MemoryBlobs();
    const state = accepted(newDispatchFactory({ dispatchId: 'd-1', target: 'review-flow' }), STARTED);
    const within = JSON.stringify({ verdict: 'approved', notes: 'n'.repeat(10_000) });
    lambdaMock.on(GetDurableExecutionCommand).resolves(execution({ Status: 'SUCCEEDED', Result: within }));
    const kept = await target().lookup(ARN);
    expect(kept).toMatchObject({ kind: 'found', run: { status: 'completed', result: { bodyJson: within } } });
    expect(await keepFoundBody({ store, blobs, now: () => STARTED }, state, kept)).toMatchObject({ bytes: Buffer.byteLength(within) });

    // An asynchronous durable result may hold 1 MB; §10 keeps 256 KB.
    const beyond = JSON.stringify({ text: `a\u0007${'x'.repeat(MAX_RESULT_BODY_BYTES)}` });
    lambdaMock.on(GetDurableExecutionCommand).resolves(execution({ Status: 'SUCCEEDED', Result: beyond }));
    const previewed = await target().lookup(ARN);
    expect(previewed).toMatchObject({ kind: 'found', run: { status: 'completed', nativeStatus: 'SUCCEEDED' } });
    const summary = previewed.kind === 'found' ? (previewed.run.result?.summary ?? '') : '';
    expect(summary.length).toBeGreaterThan(0);
    expect(summary.length).toBeLessThanOrEqual(200);
    expect(summary).not.toContain('\u0007');
    expect(await keepFoundBody({ store, blobs, now: () => STARTED }, state, previewed)).toBeUndefined();
  });

  it('a kit-shaped output whose body nests too deep to write again is kept as any output: completed, never a lookup that fails each time', async () => {
    const store = new MemoryStore();
    const blobs = new MemoryBlobs();
    const state = accepted(newDispatchFactory({ dispatchId: 'd-1', target: 'review-flow' }), STARTED);
    // JSON.parse takes 20,000 levels; JSON.stringify of the parsed value overflows the stack.
    const deep = `{"summary":"done","body":${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
    lambdaMock.on(GetDurableExecutionCommand).resolves(execution({ Status: 'SUCCEEDED', Result: deep }));
    const found = await target().lookup(ARN);
    expect(found).toMatchObject({ kind: 'found', run: { status: 'completed', nativeStatus: 'SUCCEEDED', result: { bodyJson: deep } } });
    // The ledger's bounds drop the body (too deep) and keep the preview.
    expect(await keepFoundBody({ store, blobs, now: () => STARTED }, state, found)).toBeUndefined();
  });

  it("bounds a failure's summary: the error type and a long message, control characters escaped", async () => {
    lambdaMock.on(GetDurableExecutionCommand).resolves(execution({ Status: 'FAILED', Error: { ErrorType: 'StepFailed', ErrorMessage: `bad\u001b[31m ${'y'.repeat(5_000)}` } }));
    const answer = await target().lookup(ARN);
    const summary = answer.kind === 'found' ? (answer.run.result?.summary ?? '') : '';
    expect(summary).toMatch(/^StepFailed: bad /);
    expect(summary.length).toBeLessThanOrEqual(200);
    expect(summary).not.toContain('\u001b');
  });

  it('an execution Lambda does not know → not_found; AccessDenied, throttling and outages → unavailable, never failed', async () => {
    lambdaMock.on(GetDurableExecutionCommand).rejects(new ResourceNotFoundException({ message: 'Durable execution not found', $metadata: {} }));
    expect(await target().lookup(ARN)).toEqual({ kind: 'not_found' });
    lambdaMock.on(GetDurableExecutionCommand).rejects(awsError('AccessDeniedException', 'not authorized to perform: lambda:GetDurableExecution', 403));
    expect(await target().lookup(ARN)).toEqual({ kind: 'unavailable', reason: 'AccessDeniedException: not authorized to perform: lambda:GetDurableExecution' });
    lambdaMock.on(GetDurableExecutionCommand).rejects(awsError('TooManyRequestsException', 'Rate exceeded', 429));
    expect(await target().lookup(ARN)).toEqual({ kind: 'unavailable', reason: 'TooManyRequestsException: Rate exceeded' });
    lambdaMock.on(GetDurableExecutionCommand).resolves(execution({ Status: 'RUNNING' }));
    lambdaMock.on(GetDurableExecutionHistoryCommand).rejects(awsError('AccessDeniedException', 'not authorized to perform: lambda:GetDurableExecutionHistory', 403));
    expect(await target().lookup(ARN)).toMatchObject({ kind: 'unavailable', reason: expect.stringContaining('GetDurableExecutionHistory') });
  });
});

describe('durable target: cancel', () => {
  it("cancel → StopDurableExecution; the execution's own STOPPED is its word that the run is cancelled", async () => {
    lambdaMock.on(StopDurableExecutionCommand).resolves({ StopTimestamp: STARTED });
    lambdaMock.on(GetDurableExecutionCommand).resolvesOnce(execution({ Status: 'STOPPED' })).resolvesOnce(execution({ Status: 'RUNNING' })).resolvesOnce(execution({ Status: 'SUCCEEDED' }));
    expect(await target().cancel(ARN)).toEqual({ kind: 'cancelled', status: 'cancelled' });
    expect(lambdaMock.commandCalls(StopDurableExecutionCommand)[0]?.args[0].input).toEqual({ DurableExecutionArn: ARN, Error: { ErrorType: 'CancelledThroughLedger', ErrorMessage: 'cancelled through the ledger' } });
    expect(lambdaMock.commandCalls(GetDurableExecutionCommand)[0]?.args[0].input).toEqual({ DurableExecutionArn: ARN, IncludeExecutionData: false });
    // Still running: asked, not yet done.
    expect(await target().cancel(ARN)).toEqual({ kind: 'requested', how: 'StopDurableExecution was accepted; the execution has not ended yet' });
    // It had ended another way before the stop reached it: the lookup records how, with its result.
    expect(await target().cancel(ARN)).toMatchObject({ kind: 'requested', how: expect.stringContaining('SUCCEEDED') });
  });

  it('an execution Lambda does not know → not_found; other errors → unavailable', async () => {
    lambdaMock.on(StopDurableExecutionCommand).rejects(new ResourceNotFoundException({ message: 'Durable execution not found', $metadata: {} }));
    expect(await target().cancel(ARN)).toEqual({ kind: 'not_found' });
    lambdaMock.on(StopDurableExecutionCommand).rejects(awsError('TooManyRequestsException', 'Rate exceeded', 429));
    expect(await target().cancel(ARN)).toEqual({ kind: 'unavailable', reason: 'TooManyRequestsException: Rate exceeded' });
    lambdaMock.on(StopDurableExecutionCommand).resolves({ StopTimestamp: STARTED });
    lambdaMock.on(GetDurableExecutionCommand).rejects(awsError('ServiceException', 'internal error', 500));
    expect(await target().cancel(ARN)).toMatchObject({ kind: 'unavailable' });
  });
});

describe('durable target: approvals', () => {
  it('approve → SendDurableExecutionCallbackSuccess with the stored 1,024-character callback id, then erased; a second decision is a conflict, nothing sent', async () => {
    lambdaMock.on(SendDurableExecutionCallbackSuccessCommand).resolves({});
    lambdaMock.on(SendDurableExecutionCallbackFailureCommand).resolves({});
    expect(CALLBACK_ID).toHaveLength(1024);
    const approved = await target().decideApproval(ARN, 'dur-approval-1', 'approve', 'd-1');
    expect(approved).toEqual({ kind: 'decided', approvalId: 'dur-approval-1', decision: 'approve' });
    const sent = lambdaMock.commandCalls(SendDurableExecutionCallbackSuccessCommand)[0]?.args[0].input;
    expect(sent?.CallbackId).toBe(CALLBACK_ID);
    expect(JSON.parse(textOf(sent?.Result))).toEqual({ approvalId: 'dur-approval-1', decision: 'approve' });
    expect(tokens.get('d-1|dur-approval-1')).toEqual({ dispatchId: 'd-1', attempt: 2, approvalId: 'dur-approval-1', at: STARTED.toISOString(), runId: ARN, decidedAt: STARTED.toISOString() });

    const again = await target().decideApproval(ARN, 'dur-approval-1', 'cancel', 'd-1');
    expect(again).toEqual({ kind: 'conflict', reason: 'approval dur-approval-1 was decided already' });
    expect(lambdaMock.commandCalls(SendDurableExecutionCallbackSuccessCommand)).toHaveLength(1);
    expect(lambdaMock.commandCalls(SendDurableExecutionCallbackFailureCommand)).toHaveLength(0);
    expect(JSON.stringify([approved, again])).not.toContain(CALLBACK_ID.slice(0, 32));
  });

  it('cancel → SendDurableExecutionCallbackFailure with the callback id, then erased', async () => {
    lambdaMock.on(SendDurableExecutionCallbackFailureCommand).resolves({});
    expect(await target().decideApproval(ARN, 'dur-approval-1', 'cancel', 'd-1')).toEqual({ kind: 'decided', approvalId: 'dur-approval-1', decision: 'cancel' });
    expect(lambdaMock.commandCalls(SendDurableExecutionCallbackFailureCommand)[0]?.args[0].input).toEqual({
      CallbackId: CALLBACK_ID,
      Error: { ErrorType: 'ApprovalCancelled', ErrorMessage: 'approval dur-approval-1 was cancelled through the ledger' },
    });
    expect(lambdaMock.commandCalls(SendDurableExecutionCallbackSuccessCommand)).toHaveLength(0);
    expect(tokens.get('d-1|dur-approval-1')?.taskToken).toBeUndefined();
  });

  it('an SDK error quoting the callback id is reported without any of it, even cut by the reason bound (the id is longer than a reason)', async () => {
    lambdaMock.on(SendDurableExecutionCallbackSuccessCommand).rejects(awsError('CallbackTimeoutException', `Callback '${CALLBACK_ID}' has expired`));
    const expired = await target().decideApproval(ARN, 'dur-approval-1', 'approve', 'd-1');
    expect(expired).toEqual({ kind: 'conflict', reason: "CallbackTimeoutException: Callback '[callback id]' has expired" });
    lambdaMock.on(SendDurableExecutionCallbackSuccessCommand).rejects(awsError('TooManyRequestsException', `Rate exceeded for ${CALLBACK_ID}`, 429));
    const throttled = await target().decideApproval(ARN, 'dur-approval-1', 'approve', 'd-1');
    expect(throttled).toEqual({ kind: 'unavailable', reason: 'TooManyRequestsException: Rate exceeded for [callback id]' });
    expect(JSON.stringify([expired, throttled])).not.toContain(CALLBACK_ID.slice(0, 32));
    // Nothing was decided: the callback id is kept for a decision that reaches Lambda.
    expect(tokens.get('d-1|dur-approval-1')?.taskToken).toBe(CALLBACK_ID);
  });

  it("an approval this run does not wait on, or one Lambda no longer holds, is a conflict; nothing is sent for another run's callback", async () => {
    expect(await target().decideApproval(ARN, 'dur-approval-2', 'approve', 'd-1')).toMatchObject({ kind: 'conflict' });
    expect(await target().decideApproval(`${ARN}-other`, 'dur-approval-1', 'approve', 'd-1')).toMatchObject({ kind: 'conflict' });
    expect(await target().decideApproval(ARN, 'dur-approval-1', 'approve')).toMatchObject({ kind: 'conflict' });
    expect(lambdaMock.commandCalls(SendDurableExecutionCallbackSuccessCommand)).toHaveLength(0);
    lambdaMock.on(SendDurableExecutionCallbackSuccessCommand).rejects(new ResourceNotFoundException({ message: 'Callback not found', $metadata: {} }));
    expect(await target().decideApproval(ARN, 'dur-approval-1', 'approve', 'd-1')).toMatchObject({ kind: 'conflict' });
  });
});

describe('durable execution names', () => {
  it('give two dispatch ids a naive mapping (each character outside [A-Za-z0-9_-] written `_`, cut at 64) would confuse two different names', () => {
    const naive = (dispatchId: string, attempt: number): string => `${dispatchId.replace(/[^A-Za-z0-9_-]/g, '_')}_${attempt}`.slice(0, DURABLE_EXECUTION_NAME_LENGTH);
    const pairs: ReadonlyArray<readonly [string, string]> = [
      ['order.7', 'order:7'],
      ['order.7', 'order_7'],
      [`${'a'.repeat(100)}.x`, `${'a'.repeat(100)}.y`],
    ];
    for (const [one, other] of pairs) {
      expect(naive(one, 1)).toBe(naive(other, 1));
      const names = [executionNameOf(one, 1, DURABLE_EXECUTION_NAME_LENGTH), executionNameOf(other, 1, DURABLE_EXECUTION_NAME_LENGTH)];
      expect(names[0]).not.toBe(names[1]);
      for (const name of names) expect(name).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    }
  });
});
