import { readFileSync } from 'node:fs';
import { DescribeExecutionCommand, ListExecutionsCommand, StartExecutionCommand, type DescribeExecutionCommandOutput } from '@aws-sdk/client-sfn';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_FLOW_FAILURE } from '../../local/demo-flow.js';
import { DEMO_SFN_TARGET } from '../../local/platform.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { executionArnOf, stepFunctionsTarget } from '../../shared/adapters/stepfunctions-target.js';
import type { DispatchView } from '../../shared/dispatch/view.js';
import { executionNameOf, STEP_FUNCTIONS_NAME_LENGTH } from '../../shared/targets/run-names.js';
import type { SubmitRequest } from '../../shared/targets/port.js';
import { uniqueName } from '../support/engines.js';
import { eventually } from '../support/eventually.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * CONTRACT §17 on the local platform: the target `demo-sfn` is the `demo-flow` state machine in moto's
 * Step Functions (executing, with the launcher's fixes: a state machine's second StartExecution, and
 * GetExecutionHistory's newest-first page). moto sends no `aws.states` status changes, so the ledger
 * learns each end from the monitor's lookup when the stall window ends: the dispatches here use short
 * windows and the platform's one-second tick. A cancel's end comes from the lookups that follow a stop the
 * execution had not finished when StopExecution answered (moto stops it on its own thread: CI once saw it
 * RUNNING right after, and the dispatch waited for its ten-minute window).
 */

let t: TestPlatform;
let demoFlowArn: string;
beforeAll(async () => {
  t = await startTestPlatform();
  demoFlowArn = t.platform.resources.demoFlowArn;
});
afterAll(() => t.stop());

const dispatch = (task: Record<string, unknown>, options: { target?: string; stallAfterSeconds?: number } = {}) => ({
  dispatchId: uniqueName('sfn'),
  origin: 'planner',
  target: options.target ?? DEMO_SFN_TARGET,
  task,
  timeouts: { stallAfterSeconds: options.stallAfterSeconds ?? 1 },
  delivery: { mode: 'detached' },
});

const ended = (view: DispatchView): boolean => ['completed', 'failed', 'cancelled'].includes(view.execution.status ?? '');
const describeExecution = (executionArn: string) => t.clients.sfn.send(new DescribeExecutionCommand({ executionArn }));

async function post(path: string, body: unknown): Promise<number> {
  const response = await fetch(`${t.platform.info.apiUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-ledger-origin': 'planner' }, body: JSON.stringify(body) });
  await response.arrayBuffer();
  return response.status;
}

/** Every execution of the state machine, all pages. */
async function executionsOf(stateMachineArn: string): Promise<Array<{ executionArn: string; name: string }>> {
  const found: Array<{ executionArn: string; name: string }> = [];
  let nextToken: string | undefined;
  do {
    const page = await t.clients.sfn.send(new ListExecutionsCommand({ stateMachineArn, maxResults: 100, ...(nextToken ? { nextToken } : {}) }));
    for (const execution of page.executions ?? []) found.push({ executionArn: execution.executionArn ?? '', name: execution.name ?? '' });
    nextToken = page.nextToken;
  } while (nextToken);
  return found;
}

/** The most executions open at one instant, from their start and stop dates (a stop before a start at the same millisecond). */
function mostOpenAtOnce(executions: readonly DescribeExecutionCommandOutput[]): number {
  const moments = executions.flatMap((execution) => {
    if (!execution.startDate || !execution.stopDate) throw new Error(`execution ${execution.executionArn ?? '?'} has no start or stop date`);
    return [
      { at: execution.startDate.getTime(), change: 1 },
      { at: execution.stopDate.getTime(), change: -1 },
    ];
  });
  moments.sort((a, b) => a.at - b.at || a.change - b.change);
  let open = 0;
  let most = 0;
  for (const moment of moments) {
    open += moment.change;
    most = Math.max(most, open);
  }
  return most;
}

describe('the stepfunctions target demo-sfn on the local platform', () => {
  it('completes a dispatch when its execution succeeds, the execution ARN its run id', async () => {
    const message = dispatch({ seconds: 1 });
    await t.send(JSON.stringify(message));
    const view = await t.viewWhen(message.dispatchId, ended);

    expect(view.execution.status).toBe('completed');
    expect(view.runId).toBe(executionArnOf(demoFlowArn, executionNameOf(message.dispatchId, 1, STEP_FUNCTIONS_NAME_LENGTH)));
    expect(view.execution.result?.summary).toContain(message.dispatchId);
    const execution = await describeExecution(view.runId ?? '');
    expect(execution.status).toBe('SUCCEEDED');
    // The input is the §8 submission body: this dispatch and attempt, with its task.
    expect(JSON.parse(execution.input ?? '{}')).toMatchObject({ dispatchId: message.dispatchId, attempt: 1, task: { seconds: 1 } });
  });

  it("fails a dispatch when its execution fails: nativeStatus FAILED, the state machine's error and cause in the summary", async () => {
    const message = dispatch({ seconds: 1, behavior: 'fail' });
    await t.send(JSON.stringify(message));
    const view = await t.viewWhen(message.dispatchId, ended);

    expect(view.execution.status).toBe('failed');
    expect(view.execution.nativeStatus).toBe('FAILED');
    expect(view.execution.result?.summary).toContain(DEMO_FLOW_FAILURE.error);
    expect(view.execution.result?.summary).toContain(DEMO_FLOW_FAILURE.cause);
  });

  it('cancels a dispatch through the API with StopExecution: the execution ABORTED, the dispatch cancelled', async () => {
    const message = dispatch({ seconds: 120 }, { stallAfterSeconds: 600 });
    await t.send(JSON.stringify(message));
    const running = await t.viewWhen(message.dispatchId, (view) => view.runId !== null && view.execution.status === 'running');
    expect((await describeExecution(running.runId ?? '')).status).toBe('RUNNING');

    expect(await post(`/dispatches/${message.dispatchId}/cancel`, { reason: 'not needed' })).toBe(202);
    const view = await t.viewWhen(message.dispatchId, ended);
    expect(view.execution.status).toBe('cancelled');
    expect((await describeExecution(running.runId ?? '')).status).toBe('ABORTED');
  });

  it("settles as handled when the flow's Lambda task uploads the expected evidence with the kit (the platform invokes it with Step Functions' event shape)", async () => {
    // Long enough for the platform's task runner to see it running (it polls every second while idle).
    const message = { ...dispatch({ seconds: 4 }), expectedEvidence: ['out/flow-report.md'] };
    await t.send(JSON.stringify(message));
    const view = await t.viewWhen(message.dispatchId, (seen) => seen.evidence.outcome !== 'pending' && ended(seen));
    expect(view.execution.status).toBe('completed');
    expect(view.evidence.outcome).toBe('handled');
    expect(view.evidence.found).toEqual(['out/flow-report.md']);
  });

  it('counts an execution that succeeded without the expected evidence as an orphan, never handled', async () => {
    const message = { ...dispatch({ seconds: 1, behavior: 'complete_without_evidence' }), expectedEvidence: ['out/flow-report.md'], timeouts: { stallAfterSeconds: 1, deliveryGraceSeconds: 2 } };
    await t.send(JSON.stringify(message));
    const view = await t.viewWhen(message.dispatchId, (seen) => seen.evidence.outcome !== 'pending' && ended(seen));
    expect(view.execution.status).toBe('completed');
    expect(view.evidence.outcome).toBe('orphan_no_delivery');
  });

  it("never gives a dispatch another's execution: a name already taken by an execution whose input is not this dispatch's blocks it, target_rejected", async () => {
    const message = dispatch({ seconds: 1 });
    // Someone started an execution under the name the ledger would give this dispatch's attempt 1, for other work.
    const name = executionNameOf(message.dispatchId, 1, STEP_FUNCTIONS_NAME_LENGTH);
    const squatter = await t.clients.sfn.send(new StartExecutionCommand({ stateMachineArn: demoFlowArn, name, input: JSON.stringify({ dispatchId: `${message.dispatchId}x`, attempt: 1, task: { seconds: 30 } }) }));
    await t.send(JSON.stringify(message));
    const view = await t.viewWhen(message.dispatchId, (seen) => seen.phase === 'blocked');
    expect(view.blockedReason).toContain('target_rejected');
    expect(view.blockedReason).toContain('is not this dispatch');
    expect(view.runId).toBeNull();
    expect((await executionsOf(demoFlowArn)).filter((execution) => execution.name === name)).toEqual([{ executionArn: squatter.executionArn, name }]);
  });

  it('starts one execution for the same submission sent twice, while it runs and after it ended', async () => {
    const target = stepFunctionsTarget({ name: DEMO_SFN_TARGET, kind: 'stepfunctions', stateMachineArn: demoFlowArn }, { sfn: t.clients.sfn, approvalTokens: { tokenOf: async () => undefined, used: async () => undefined }, now: () => new Date() });
    const request: SubmitRequest = { dispatchId: uniqueName('twice'), attempt: 1, origin: 'planner', task: { seconds: 1 }, expectedEvidence: [], callbackUrl: t.platform.info.apiUrl };

    const first = await target.submit(request);
    const second = await target.submit(request);
    expect(first.kind).toBe('accepted');
    expect(second).toMatchObject({ kind: 'accepted', runId: first.kind === 'accepted' ? first.runId : 'none' });
    // Ended, the name is taken for good (ExecutionAlreadyExists): the execution is adopted, not started again.
    const runId = first.kind === 'accepted' ? first.runId : '';
    await eventually('the execution ends', () => describeExecution(runId), { until: (execution) => execution.status !== 'RUNNING' });
    expect(await target.submit(request)).toMatchObject({ kind: 'accepted', runId });

    const name = executionNameOf(request.dispatchId, 1, STEP_FUNCTIONS_NAME_LENGTH);
    expect((await executionsOf(demoFlowArn)).filter((execution) => execution.name === name)).toHaveLength(1);
    // Another attempt is another execution; another dispatch under this name would be refused, never adopted.
    expect(await target.submit({ ...request, attempt: 2 })).toMatchObject({ kind: 'accepted', runId: executionArnOf(demoFlowArn, executionNameOf(request.dispatchId, 2, STEP_FUNCTIONS_NAME_LENGTH)) });
  });

  it('never has more than maxConcurrentRuns executions open, by their start and stop dates', async () => {
    const limited = uniqueName('demo-sfn-limited');
    const ledger = new LedgerTable(DynamoDBDocumentClient.from(t.clients.dynamodb), { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
    await ledger.putTarget({ name: limited, kind: 'stepfunctions', stateMachineArn: demoFlowArn, maxConcurrentRuns: 2 });
    const messages = Array.from({ length: 10 }, () => dispatch({ seconds: 1 }, { target: limited }));
    for (const message of messages) await t.send(JSON.stringify(message));
    const views = await Promise.all(messages.map((message) => t.viewWhen(message.dispatchId, ended, { timeoutMs: 120_000 })));
    expect(views.map((view) => view.execution.status)).toEqual(messages.map(() => 'completed'));

    const names = new Set(messages.map((message) => executionNameOf(message.dispatchId, 1, STEP_FUNCTIONS_NAME_LENGTH)));
    const ours = (await executionsOf(demoFlowArn)).filter((execution) => names.has(execution.name));
    expect(ours).toHaveLength(10);
    const executions = await Promise.all(ours.map((execution) => describeExecution(execution.executionArn)));
    // Two at a time, never three: the limit held, and it was used.
    expect(mostOpenAtOnce(executions)).toBe(2);
  });

  it('keeps a run longer than its stall window running while its history advances, then completed, never failed', async () => {
    const message = dispatch({ seconds: 8, stepSeconds: 1 }, { stallAfterSeconds: 3 });
    await t.send(JSON.stringify(message));
    const seen: DispatchView[] = [];
    const view = await eventually(
      `dispatch ${message.dispatchId}`,
      async () => {
        const current = await t.view(message.dispatchId);
        seen.push(current);
        return current;
      },
      { until: ended },
    );

    expect(view.execution.status).toBe('completed');
    const statuses = new Set(seen.map((one) => one.execution.status));
    expect(statuses.has('running')).toBe(true);
    expect([...statuses].filter((status) => status !== 'running' && status !== 'completed' && status !== null)).toEqual([]);
    expect(seen.filter((one) => one.execution.monitorStatus !== null)).toEqual([]);
    // The monitor recorded the history's newest event as activity: later than the first stall window's end.
    const execution = await describeExecution(view.runId ?? '');
    const activity = seen.map((one) => one.execution.lastActivityAt).filter((at): at is string => at !== null).map((at) => Date.parse(at));
    expect(Math.max(...activity)).toBeGreaterThan((execution.startDate?.getTime() ?? Infinity) + 3_000);
    // Every change it went through, not samples of it: its events on the bus, none a stall or a lost sight.
    const types = await eventsOf(message.dispatchId, 'Run Recovered');
    expect(types.filter((type) => type === 'Run Stalled' || type === 'Run Unobservable' || type === 'Run Failed')).toEqual([]);
  });

  it('takes one wait longer than its stall window, its newest history event older than the window, as unknown (stalled) — then completed when it ends, never failed', async () => {
    const message = dispatch({ seconds: 7 }, { stallAfterSeconds: 2 });
    await t.send(JSON.stringify(message));
    const view = await t.viewWhen(message.dispatchId, ended);
    expect(view.execution.status).toBe('completed');
    const types = await eventsOf(message.dispatchId, 'Run Recovered');
    expect(types).toContain('Run Stalled');
    expect(types.indexOf('Run Stalled')).toBeLessThan(types.indexOf('Run Recovered'));
    expect(types).not.toContain('Run Failed');
  });
});

interface LoggedEvent {
  readonly 'detail-type': string;
  readonly detail: { readonly dispatchId?: string };
}

/** A dispatch's events as the local bus delivered them (the platform's event log), once `last` is among them. */
async function eventsOf(dispatchId: string, last: string): Promise<string[]> {
  return eventually(
    `${dispatchId}'s ${last}`,
    async () =>
      readFileSync(t.platform.info.eventLog, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as LoggedEvent)
        .filter((event) => event.detail.dispatchId === dispatchId)
        .map((event) => event['detail-type']),
    { until: (types) => types.includes(last) },
  );
}
