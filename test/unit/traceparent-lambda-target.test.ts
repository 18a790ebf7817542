import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { lambdaTarget, TASK_REF_ABOVE_BYTES } from '../../shared/adapters/lambda-target.js';
import type { LambdaTargetRegistration, SubmitRequest } from '../../shared/targets/port.js';

// CONTRACT §1 v2, §12: an asynchronous invoke has no headers of ours, so a lambda target gets the
// message's traceparent in the payload it is invoked with. Lambda is mocked at the SDK boundary (no local engine invokes it here).

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const lambdaMock = mockClient(LambdaClient);
beforeEach(() => lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202, $metadata: { requestId: 'req-traced' } }));
afterEach(() => lambdaMock.reset());

const registration: LambdaTargetRegistration = { name: 'reviewer', kind: 'lambda', functionArn: 'arn:aws:lambda:us-east-1:111122223333:function:reviewer', timeoutSeconds: 60 };

function submitRequestFactory(overrides: Partial<SubmitRequest> = {}): SubmitRequest {
  return { dispatchId: 'd-traced', attempt: 3, origin: 'planner', task: { goal: 'review' }, expectedEvidence: ['out/r.md'], callbackUrl: 'https://ledger.example.com', ...overrides };
}

const target = () =>
  lambdaTarget(registration, {
    lambda: new LambdaClient({ region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
    documents: { send: () => Promise.reject(new Error('no state table is registered')) },
    failureOf: async () => undefined,
    now: () => new Date('2026-12-01T12:00:00.000Z'),
  });

function invokedWith(): Record<string, unknown> {
  const calls = lambdaMock.commandCalls(InvokeCommand);
  expect(calls).toHaveLength(1);
  return JSON.parse(Buffer.from(calls[0]?.args[0].input.Payload as Uint8Array).toString('utf8')) as Record<string, unknown>;
}

describe('lambdaTarget submit and traceparent', () => {
  it('puts the traceparent in the invocation payload when the request carries one', async () => {
    expect(await target().submit(submitRequestFactory({ traceparent: TRACEPARENT }))).toMatchObject({ kind: 'accepted', runId: 'd-traced:3' });
    expect(invokedWith()).toEqual({ ...submitRequestFactory(), runId: 'd-traced:3', traceparent: TRACEPARENT });
  });

  it('keeps the traceparent when the task travels as taskRef', async () => {
    await target().submit(submitRequestFactory({ traceparent: TRACEPARENT, task: { goal: 'x'.repeat(TASK_REF_ABOVE_BYTES) } }));
    const payload = invokedWith();
    expect(payload.task).toBeUndefined();
    expect(payload).toMatchObject({ taskRef: expect.any(String), traceparent: TRACEPARENT });
  });

  it('leaves traceparent out of the payload when the request carries none', async () => {
    await target().submit(submitRequestFactory());
    expect(invokedWith()).not.toHaveProperty('traceparent');
  });
});
