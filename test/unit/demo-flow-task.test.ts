import { DescribeExecutionCommand, ListExecutionsCommand, SFNClient } from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { startFlowTasks } from '../../local/demo-flow-task.js';
import { eventually } from '../support/eventually.js';

/**
 * The local stand-in for Step Functions' Lambda task of demo-flow (local/demo-flow-task.ts). Step Functions
 * is mocked at the SDK here: the runner's own bounds are under test, not moto.
 */

const sfnMock = mockClient(SFNClient);
afterEach(() => sfnMock.reset());

const EXECUTION = 'arn:aws:states:us-east-1:000000000000:execution:demo-flow:d-1_1';

describe('the demo flow task runner', () => {
  // Regression: the runner awaited a task without a bound, and stopping awaited every task under way, so
  // one hung task held the platform's stop (`ledger local down`) for ever, where Lambda ends it at its timeout.
  it("ends a task at its function's timeout, says so, and stops", async () => {
    sfnMock.on(ListExecutionsCommand).resolves({ executions: [{ executionArn: EXECUTION, stateMachineArn: 'arn:sm', name: 'd-1_1', status: 'RUNNING', startDate: new Date() }] });
    sfnMock.on(DescribeExecutionCommand).resolves({ executionArn: EXECUTION, input: '{}', status: 'RUNNING', startDate: new Date(), stateMachineArn: 'arn:sm' });
    const log: Array<Record<string, unknown>> = [];
    const remaining: number[] = [];
    const runner = startFlowTasks({
      sfn: new SFNClient({ region: 'us-east-1' }),
      stateMachineArn: 'arn:sm',
      timeoutMs: 100,
      handler: (_event, context) => {
        remaining.push(context.getRemainingTimeInMillis());
        return new Promise(() => undefined);
      },
      log: (line) => log.push(line),
    });
    await eventually('the task timed out', async () => log.find((line) => line.msg === 'a flow task failed'), { until: (line) => line !== undefined });
    await runner.stop();
    expect(log.find((line) => line.msg === 'a flow task failed')).toMatchObject({ executionArn: EXECUTION, error: expect.stringMatching(/Task timed out after 0\.10 seconds/) });
    // It was told the time it had: the timeout, not a fixed minute.
    expect(remaining).toHaveLength(1);
    expect(remaining[0]).toBeLessThanOrEqual(100);
  });
});
