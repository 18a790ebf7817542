import { DescribeExecutionCommand, ListExecutionsCommand, type SFNClient } from '@aws-sdk/client-sfn';
import { sigv4Signer } from '@dispatch-ledger/worker';
import { stepFunctionsTask } from '@dispatch-ledger/worker/stepfunctions';

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
 * state would pass. Polls ListExecutions (RUNNING) every `intervalMs`; what a handler throws is logged,
 * as Step Functions would record the Task's failure.
 */
export function startFlowTasks(options: {
  readonly sfn: SFNClient;
  readonly stateMachineArn: string;
  readonly handler: (event: unknown, context: { awsRequestId: string; functionName: string; getRemainingTimeInMillis: () => number }) => Promise<unknown>;
  readonly intervalMs?: number;
  readonly log: (entry: Record<string, unknown>) => void;
}): FlowTaskRunner {
  const seen = new Set<string>();
  const running = new Set<Promise<unknown>>();
  let stopped = false;
  const invoke = async (executionArn: string): Promise<void> => {
    const { input } = await options.sfn.send(new DescribeExecutionCommand({ executionArn }));
    const event = { submission: JSON.parse(input ?? '{}') as unknown, executionArn };
    await options.handler(event, { awsRequestId: `${executionArn.split(':').at(-1) ?? ''}-task`, functionName: 'demo-flow-task', getRemainingTimeInMillis: () => 60_000 });
  };
  const poll = async (): Promise<void> => {
    const page = await options.sfn.send(new ListExecutionsCommand({ stateMachineArn: options.stateMachineArn, statusFilter: 'RUNNING', maxResults: 100 }));
    for (const { executionArn } of page.executions ?? []) {
      if (!executionArn || seen.has(executionArn)) continue;
      seen.add(executionArn);
      const task = invoke(executionArn).catch((error: unknown) => options.log({ level: 'warn', msg: 'a flow task failed', executionArn, error: String(error) }));
      running.add(task);
      void task.finally(() => running.delete(task));
    }
  };
  const loop = (async () => {
    while (!stopped) {
      await poll().catch((error: unknown) => options.log({ level: 'warn', msg: 'listing the flow executions failed', error: String(error) }));
      await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 250));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      await Promise.allSettled([...running]);
    },
  };
}
