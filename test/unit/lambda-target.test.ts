import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { lambdaTarget, TASK_REF_ABOVE_BYTES, type LambdaFailure } from '../../shared/adapters/lambda-target.js';
import { failureOfRecord } from '../../shared/usecases/lambda-failure.js';
import type { LambdaTargetRegistration, SubmitRequest } from '../../shared/targets/port.js';

/** The lambda target adapter (CONTRACT §12) against a mocked Lambda client: no local engine runs Lambda invoke. */

const lambdaMock = mockClient(LambdaClient);
afterEach(() => lambdaMock.reset());

const NOW = new Date('2026-12-01T12:00:00.000Z');
const registration: LambdaTargetRegistration = { name: 'reviewer', kind: 'lambda', functionArn: 'arn:aws:lambda:us-east-1:111122223333:function:reviewer', timeoutSeconds: 60 };
const request: SubmitRequest = { dispatchId: 'd-1', attempt: 2, origin: 'planner', task: { goal: 'review' }, expectedEvidence: ['out/r.md'], callbackUrl: 'https://ledger.example.com', timeouts: { stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 } };

function target(failures: Record<string, LambdaFailure> = {}, now = NOW) {
  return lambdaTarget(registration, {
    lambda: new LambdaClient({ region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
    // No state table in this registration: the document client is never asked.
    documents: { send: () => Promise.reject(new Error('no state table is registered')) },
    failureOf: async (runId) => failures[runId],
    now: () => now,
  });
}

const payloadOf = (call: number): Record<string, unknown> => JSON.parse(Buffer.from(lambdaMock.commandCalls(InvokeCommand)[call]?.args[0].input.Payload as Uint8Array).toString('utf8')) as Record<string, unknown>;

describe('lambdaTarget', () => {
  it('invokes asynchronously with the submission body; the run id is {dispatchId}:{attempt} and the request id the proof', async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202, $metadata: { requestId: 'req-7' } });
    expect(await target().submit(request)).toEqual({ kind: 'accepted', runId: 'd-1:2', status: 'queued', requestId: 'req-7' });
    expect(lambdaMock.commandCalls(InvokeCommand)[0]?.args[0].input).toMatchObject({ FunctionName: registration.functionArn, InvocationType: 'Event' });
    expect(payloadOf(0)).toEqual({ ...request, runId: 'd-1:2' });
  });

  it('carries taskRef instead of a task above 200 KB (Lambda takes 256 KB asynchronously)', async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202, $metadata: { requestId: 'req-8' } });
    await target().submit({ ...request, task: { goal: 'x'.repeat(TASK_REF_ABOVE_BYTES) } });
    const payload = payloadOf(0);
    expect(payload.task).toBeUndefined();
    expect(payload.taskRef).toBe('https://ledger.example.com/dispatches/d-1/task?runId=d-1%3A2');
  });

  it('blocks on what retrying cannot cure and retries the rest', async () => {
    lambdaMock.on(InvokeCommand).rejects(Object.assign(new Error('Function not found'), { name: 'ResourceNotFoundException', $metadata: { httpStatusCode: 404 } }));
    expect(await target().submit(request)).toMatchObject({ kind: 'rejected', httpStatus: 404, reason: 'ResourceNotFoundException: Function not found' });
    lambdaMock.reset();
    lambdaMock.on(InvokeCommand).rejects(Object.assign(new Error('Rate exceeded'), { name: 'TooManyRequestsException', $metadata: { httpStatusCode: 429 } }));
    expect(await target().submit(request)).toMatchObject({ kind: 'unavailable', reason: 'TooManyRequestsException: Rate exceeded' });
  });

  it("looks a run up in Lambda's failure records, else calls it queued within its tries and unknown (not found) past them — never failed by silence", async () => {
    const failed = await target({ 'd-1:2': { runId: 'd-1:2', errorType: 'Error', errorMessage: 'boom' } }).lookup('d-1:2', { submittedAt: NOW.toISOString() });
    expect(failed).toEqual({ kind: 'found', run: { runId: 'd-1:2', status: 'failed', result: { summary: 'Error: boom' } } });
    const submittedAt = new Date(NOW.getTime() - 60_000).toISOString();
    expect(await target().lookup('d-1:2', { submittedAt })).toEqual({ kind: 'found', run: { runId: 'd-1:2', status: 'queued' } });
    const long = new Date(NOW.getTime() - (3 * 60 + 180 + 1) * 1000).toISOString();
    expect(await target().lookup('d-1:2', { submittedAt: long })).toEqual({ kind: 'not_found' });
  });

  it('resumes a run for an approval decision by invoking it again, and tells cancels through the control record', async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202, $metadata: { requestId: 'req-9' } });
    expect(await target().decideApproval('d-1:2', 'ap-1', 'approve')).toEqual({ kind: 'decided', approvalId: 'ap-1', decision: 'approve' });
    expect(payloadOf(0)).toEqual({ resume: 'd-1:2', approvalId: 'ap-1', decision: 'approve' });
    expect((await target().cancel('d-1:2')).kind).toBe('requested');
  });
});

describe("Lambda's on-failure destination records", () => {
  it('name the run from the invocation payload (or a resume) and carry the error, bounded', () => {
    const at = NOW.toISOString();
    const record = { requestContext: { requestId: 'r-1', condition: 'RetriesExhausted' }, requestPayload: { runId: 'd-1:2' }, responsePayload: { errorType: 'Error', errorMessage: 'x'.repeat(5_000) } };
    const failure = failureOfRecord(record, at);
    expect(failure).toMatchObject({ dispatchId: 'd-1', attempt: 2, runId: 'd-1:2', errorType: 'Error', requestId: 'r-1', condition: 'RetriesExhausted' });
    expect(failure?.errorMessage.length).toBeLessThanOrEqual(300);
    expect(failureOfRecord({ requestPayload: JSON.stringify({ resume: 'd-9:1' }) }, at)).toMatchObject({ dispatchId: 'd-9', attempt: 1, errorType: 'Unhandled' });
    for (const unreadable of [null, 'x', { requestPayload: { runId: 'no-attempt' } }, { requestPayload: {} }]) expect(failureOfRecord(unreadable, at)).toBeUndefined();
  });
});
