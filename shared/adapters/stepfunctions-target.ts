import {
  DescribeExecutionCommand,
  GetExecutionHistoryCommand,
  SendTaskFailureCommand,
  SendTaskSuccessCommand,
  StartExecutionCommand,
  StopExecutionCommand,
  SFNClient,
  type SFNClientConfig,
  type DescribeExecutionCommandOutput,
} from '@aws-sdk/client-sfn';
import type { LookupOutcome, SubmitOutcome, TargetRunView } from '../dispatch/target-answers.js';
import { executionNameOf, STEP_FUNCTIONS_NAME_LENGTH } from '../targets/run-names.js';
import type { StepFunctionsTargetRegistration, SubmitRequest, TargetPort } from '../targets/port.js';
import { adoptedIfOurs, cancelledRun, completedRun, failedRun, lookUpRun, refusedSubmission, runningRun, runStopper, tokenApprovals, type RuntimeTargetDeps } from './runtime-runs.js';
import { asSdkError, reasonOf, submissionBody, targetClientConfig, type SdkError } from './submission-body.js';

/**
 * A `stepfunctions` target (CONTRACT §17): one execution of a Standard state machine per attempt.
 * - Submission: `StartExecution` named from the dispatch and attempt (`executionNameOf`), the §8 body
 *   as its input. A name already taken is resolved with `DescribeExecution`: the execution is adopted
 *   only when its input carries this dispatch and attempt — never a second run, never another's.
 * - The run id is the execution's ARN; the proof, its ARN and start date.
 * - Lookup: `DescribeExecution`, and for a running one its newest history event: an execution sends no
 *   heartbeats, so that event's time is its last activity (the monitor judges a stall by it).
 * - Cancel: `StopExecution`. Approvals: the task token the execution sent to the approvals queue,
 *   kept apart from the state, answered with `SendTaskSuccess` / `SendTaskFailure`.
 */

/** The state machines' client; the approval tokens (`RuntimeTargetDeps`) are the task tokens executions sent. */
export interface StepFunctionsTargetDeps extends RuntimeTargetDeps {
  readonly sfn: Pick<SFNClient, 'send'>;
}

/** The Step Functions client of the targets: every call bounded like any call to a target (a hung one must not hold the function). */
export const sfnClientFor = (timeoutMs: number, config: SFNClientConfig = {}): SFNClient => new SFNClient({ ...targetClientConfig(timeoutMs), ...config });

/** Errors that retrying will not cure: the registration, the grant or the input is wrong. */
const REFUSALS = new Set([
  'AccessDeniedException',
  'StateMachineDoesNotExist',
  'StateMachineDeleting',
  'InvalidArn',
  'InvalidName',
  'InvalidExecutionInput',
  'ValidationException',
  'KmsAccessDeniedException',
  'KmsInvalidStateException',
]);

/** `arn:…:stateMachine:NAME` → `arn:…:execution:NAME:EXECUTION` (a Standard state machine's execution ARN). */
export function executionArnOf(stateMachineArn: string, executionName: string): string {
  const parts = stateMachineArn.split(':');
  if (parts.length !== 7 || parts[5] !== 'stateMachine') throw new RangeError(`not a state machine ARN: ${stateMachineArn}`);
  return [...parts.slice(0, 5), 'execution', parts[6], executionName].join(':');
}

/** CONTRACT §17's status map: the ledger's status, and the state machine's own word kept beside it. */
export function runOfExecution(execution: DescribeExecutionCommandOutput, lastActivityAt?: string): TargetRunView | undefined {
  const run = runOfStatus(execution, lastActivityAt);
  // Run again after it ended (a redrive, by Step Functions' own count and date): the ledger tells a redrive
  // after its recorded end from one before it (CONTRACT §17).
  const count = execution.redriveCount ?? 0;
  return run && count > 0 ? { ...run, redrive: { count, ...(execution.redriveDate ? { at: execution.redriveDate.toISOString() } : {}) } } : run;
}

function runOfStatus(execution: DescribeExecutionCommandOutput, lastActivityAt?: string): TargetRunView | undefined {
  const runId = execution.executionArn ?? '';
  const native = execution.status ?? 'UNKNOWN';
  switch (execution.status) {
    case 'RUNNING':
      return runningRun(runId, lastActivityAt);
    case 'SUCCEEDED':
      // The output is the result: its preview the summary, the JSON itself the body (kept within §10's bounds).
      return completedRun(runId, native, execution.output);
    case 'ABORTED':
      return cancelledRun(runId, native);
    case 'FAILED':
    case 'TIMED_OUT':
    case 'PENDING_REDRIVE':
      // PENDING_REDRIVE: failed as recorded (a redrive outside the ledger is late activity).
      return failedRun(runId, native, execution.error, execution.cause);
    default:
      return undefined;
  }
}

const executionDoesNotExist = (error: SdkError): boolean => error.name === 'ExecutionDoesNotExist';

/**
 * A lookup of one execution: `DescribeExecution`, and for a running one its newest history event (its
 * last activity). Alone, so what only looks runs up (the orchestrators function) calls nothing else. One
 * read, with the execution's data: `includedData: METADATA_ONLY` is documented only for a KMS-encrypted
 * definition, not as leaving the input out, so a read without data would add a call and save nothing sure.
 */
export function lookUpExecution(sfn: Pick<SFNClient, 'send'>, runId: string): Promise<LookupOutcome> {
  return lookUpRun({
    describedBy: 'DescribeExecution',
    describe: () => sfn.send(new DescribeExecutionCommand({ executionArn: runId })),
    endsWithData: new Set(),
    statusOf: (execution) => execution.status,
    newestEventAt: async () => (await sfn.send(new GetExecutionHistoryCommand({ executionArn: runId, reverseOrder: true, maxResults: 1 }))).events?.[0]?.timestamp,
    runOf: runOfExecution,
    notFound: executionDoesNotExist,
  });
}

export function stepFunctionsTarget(registration: StepFunctionsTargetRegistration, deps: StepFunctionsTargetDeps): TargetPort {
  const describe = (executionArn: string) => deps.sfn.send(new DescribeExecutionCommand({ executionArn }));

  /** A name already taken: adopted only when the execution's input is this very submission. */
  async function adopt(request: SubmitRequest, executionArn: string): Promise<SubmitOutcome> {
    let execution: DescribeExecutionCommandOutput;
    try {
      execution = await describe(executionArn);
    } catch (caught) {
      return { kind: 'unavailable', reason: reasonOf(asSdkError(caught)) };
    }
    return adoptedIfOurs(request, executionArn.split(':').at(-1) ?? '', { runId: executionArn, input: execution.input, startedAt: execution.startDate });
  }

  return {
    async submit(request) {
      const name = executionNameOf(request.dispatchId, request.attempt, STEP_FUNCTIONS_NAME_LENGTH);
      try {
        const started = await deps.sfn.send(new StartExecutionCommand({ stateMachineArn: registration.stateMachineArn, name, input: submissionBody(request) }));
        return { kind: 'accepted', runId: started.executionArn ?? executionArnOf(registration.stateMachineArn, name), status: 'running', requestId: started.startDate?.toISOString() ?? '' };
      } catch (caught) {
        const error = asSdkError(caught);
        if (error.name === 'ExecutionAlreadyExists') return adopt(request, executionArnOf(registration.stateMachineArn, name));
        return refusedSubmission(error, REFUSALS);
      }
    },

    lookup: (runId) => lookUpExecution(deps.sfn, runId),

    decideApproval: tokenApprovals(deps, {
      waiter: 'a state machine',
      tokenMark: '[task token]',
      send: (taskToken, id, chosen) =>
        chosen === 'approve'
          ? deps.sfn.send(new SendTaskSuccessCommand({ taskToken, output: JSON.stringify({ approvalId: id, decision: chosen }) }))
          : deps.sfn.send(new SendTaskFailureCommand({ taskToken, error: 'ApprovalCancelled', cause: `approval ${id} was cancelled through the ledger` })),
      gone: (error) => error.name === 'TaskDoesNotExist' || error.name === 'TaskTimedOut' || error.name === 'InvalidToken',
    }),

    cancel: runStopper({
      stoppedBy: 'StopExecution',
      stop: (runId) => deps.sfn.send(new StopExecutionCommand({ executionArn: runId, error: 'CancelledThroughLedger' })),
      statusAfter: async (runId) => (await describe(runId)).status,
      stoppedStatus: 'ABORTED',
      notFound: executionDoesNotExist,
    }),
  };
}
