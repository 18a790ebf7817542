import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestPlatform, type TestPlatform } from '../support/platform.js';
import { uniqueName } from '../support/engines.js';

/**
 * A lambda target on the local platform (CONTRACT §12): the intake invokes it through the local Lambda,
 * Lambda's retries run, its on-failure record goes to the failures queue, and the failures function
 * records the run failed with Lambda's error — published as Run Failed, as in AWS.
 */

let t: TestPlatform;
const invoked: unknown[] = [];

beforeAll(async () => {
  t = await startTestPlatform({}, {
    lambdaTargets: [
      {
        name: 'quota-worker',
        timeoutSeconds: 1,
        handler: async (event) => {
          invoked.push(event);
          throw Object.assign(new Error('the model quota is spent'), { name: 'QuotaError' });
        },
      },
    ],
  });
});
afterAll(() => t.stop());

describe('a lambda target on the local platform', () => {
  it("records a function that fails past Lambda's retries as failed with Lambda's error, and publishes Run Failed", async () => {
    const dispatchId = uniqueName('d');
    await t.send(JSON.stringify({ dispatchId, origin: 'planner', target: 'quota-worker', task: { goal: 'review' } }));
    const failed = await t.viewWhen(dispatchId, (view) => view.execution.status === 'failed');
    // CONTRACT §12: Lambda's error is the run's nativeStatus, the runtime's own word.
    expect(failed).toMatchObject({ runId: `${dispatchId}:1`, execution: { status: 'failed', nativeStatus: 'QuotaError', result: { summary: 'QuotaError: the model quota is spent' } } });
    expect(invoked.filter((event) => (event as { dispatchId?: string }).dispatchId === dispatchId)).toHaveLength(3);
    const types = await eventually('Run Failed on the bus', async () => {
      const seen = readFileSync(t.platform.info.eventLog, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as { 'detail-type': string; detail: { dispatchId?: string } });
      const mine = seen.filter((event) => event.detail.dispatchId === dispatchId).map((event) => event['detail-type']);
      return mine.includes('Run Failed') ? mine : undefined;
    });
    expect(types).toContain('Dispatch Submitted');
  });
});
