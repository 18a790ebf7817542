import { DescribeExecutionCommand, ListExecutionsCommand, type SFNClient } from '@aws-sdk/client-sfn';
import { sigv4Signer } from '@dispatch-ledger/worker';
import { stepFunctionsTask } from '@dispatch-ledger/worker/stepfunctions';
import { withinTimeout } from './runtime/context.js';

/**
 * demo-flow's Lambda task, and the part Step Functions plays in running it, locally (CONTRACT §17).
 *
 * In AWS a flow's Task state invokes its function with the documented Parameters
 * (`{ "submission.$": "$$.Execution.Input", "executionArn.$": "$$.Execution.Id" }`), and the function
 * uploads the run's evidence with the worker kit. moto runs Pass, Wait, Choice, Succeed and Fail but
 * invokes no Lambda task, so the local platform plays that part: each execution of demo-flow it sees
 * start gets one invocation of the task, with exactly that event, while the flow waits. The task uploads
 * every expected evidence file, unless the dispatch asked for `complete_without_evidence` (the orphan case).
 */
export const demoFlowTask = stepFunctionsTask(
  async (task, ctx) => {
    if (task.behavior === 'complete_without_evidence') return { uploaded: [] };
    for (const ref of ctx.expectedEvidence) await ctx.putEvidence(ref, `demo-flow's task wrote ${ref} for ${ctx.dispatchId} (attempt ${ctx.attempt})\n`);
    return { uploaded: ctx.expectedEvidence };
  },
  // Signed as the example Lambda worker signs: with the function's own credentials.
  { name: 'demo-flow-task', signer: sigv4Signer({ region: process.env.AWS_REGION ?? 'us-east-1' }) },
);

export interface FlowTaskRunner {
  stop(): Promise<void>;
}

/**
 * Invokes `handler` once for each execution of `stateMachineArn` seen running, with the event its Task
 * state would pass. Polls ListExecutions (RUNNING) every `intervalMs` while executions run, backing off to
 * every second while none does; what a handler throws is logged,
 * as Step Functions would record the Task's failure.
 */
export function startFlowTasks(options: {
  readonly sfn: SFNClient;
  readonly stateMachineArn: string;
  readonly handler: (event: unknown, context: { awsRequestId: string; functionName: string; getRemainingTimeInMillis: () => number }) => Promise<unknown>;
  readonly intervalMs?: number;
  /** The task function's timeout: a task is ended then, as Lambda ends it. @default 60 s */
  readonly timeoutMs?: number;
  readonly log: (entry: Record<string, unknown>) => void;
}): FlowTaskRunner {
  // The executions whose task was handed out: only those still running are remembered.
  let started = new Set<string>();
  const running = new Set<Promise<unknown>>();
  const stop = new AbortController();
  const invoke = async (executionArn: string, input: string | undefined): Promise<void> => {
    const event = { submission: JSON.parse(input ?? '{}') as unknown, executionArn };
    const timeoutMs = options.timeoutMs ?? 60_000;
    const deadline = Date.now() + timeoutMs;
    // Bounded (regression: a hung task was awaited for ever, and stopping awaits every task under way).
    await withinTimeout(
      options.handler(event, { awsRequestId: `${executionArn.split(':').at(-1) ?? ''}-task`, functionName: 'demo-flow-task', getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()) }),
      timeoutMs,
    );
  };
  /** True when the poll handed out a task: the next one comes soon; an idle runner backs off (a platform that runs no flow costs moto almost nothing). */
  const poll = async (): Promise<boolean> => {
    let handed = false;
    const open = new Set<string>();
    let nextToken: string | undefined;
    do {
      const page = await options.sfn.send(new ListExecutionsCommand({ stateMachineArn: options.stateMachineArn, statusFilter: 'RUNNING', maxResults: 100, ...(nextToken ? { nextToken } : {}) }));
      for (const { executionArn } of page.executions ?? []) if (executionArn) open.add(executionArn);
      nextToken = page.nextToken;
    } while (nextToken && !stop.signal.aborted);
    for (const executionArn of open) {
      if (started.has(executionArn) || stop.signal.aborted) continue;
      // Handed out once its input is read: a describe that fails is tried again at the next poll.
      const { input } = await options.sfn.send(new DescribeExecutionCommand({ executionArn }));
      started.add(executionArn);
      handed = true;
      const task = invoke(executionArn, input).catch((error: unknown) => options.log({ level: 'warn', msg: 'a flow task failed', executionArn, error: String(error) }));
      running.add(task);
      void task.finally(() => running.delete(task));
    }
    started = new Set([...started].filter((executionArn) => open.has(executionArn)));
    return handed || open.size > 0;
  };
  const fastest = options.intervalMs ?? 250;
  const slowest = 1_000;
  const loop = (async () => {
    let interval = fastest;
    while (!stop.signal.aborted) {
      const busy = await poll().catch((error: unknown) => {
        options.log({ level: 'warn', msg: 'listing the flow executions failed', error: String(error) });
        return false;
      });
      interval = busy ? fastest : Math.min(slowest, interval * 2);
      await new Promise((resolve) => setTimeout(resolve, interval));
    }
  })();
  return {
    async stop() {
      stop.abort();
      await loop;
      // Stopped before the API (see the platform): a task under way finishes its calls, as Lambda would let it.
      await Promise.allSettled([...running]);
    },
  };
}
