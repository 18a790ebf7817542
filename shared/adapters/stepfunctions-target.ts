import {
  DescribeExecutionCommand,
  GetExecutionHistoryCommand,
  SendTaskFailureCommand,
  SendTaskSuccessCommand,
  StartExecutionCommand,
  StopExecutionCommand,
  type DescribeExecutionCommandOutput,
  type SFNClient,
} from '@aws-sdk/client-sfn';
import type { ApprovalOutcome, CancelOutcome, LookupOutcome, SubmitOutcome, TargetRunView } from '../dispatch/target-answers.js';
import { executionNameOf, STEP_FUNCTIONS_NAME_LENGTH } from '../targets/run-names.js';
import type { StepFunctionsTargetRegistration, SubmitRequest, TargetPort } from '../targets/port.js';
import { clip, printable } from '../text.js';
import { asSdkError, reasonOf, submissionBody, type SdkError } from './submission-body.js';

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

export interface StepFunctionsTargetDeps {
  readonly sfn: Pick<SFNClient, 'send'>;
  /** The task token an approval waits on, stored apart from the dispatch (never in a view, an event or a log). */
  readonly approvalTokenOf: (dispatchId: string, approvalId: string) => Promise<{ readonly runId: string; readonly taskToken: string } | undefined>;
}

/** A summary is a preview of the execution's output or error: bounded like a reported one. */
const SUMMARY_CHARS = 200;

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

/** The dispatch and attempt an execution's input names, if it is a submission body. */
function submissionOf(input: string | undefined): { readonly dispatchId: unknown; readonly attempt: unknown } | undefined {
  if (input === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(input);
    return typeof value === 'object' && value !== null ? (value as { dispatchId: unknown; attempt: unknown }) : undefined;
  } catch {
    return undefined;
  }
}

function isJson(text: string | undefined): text is string {
  if (text === undefined || text === '') return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

const preview = (text: string | undefined): string | undefined => (text === undefined || text === '' ? undefined : clip(printable(text), SUMMARY_CHARS));

/** CONTRACT §17's status map: the ledger's status, and the state machine's own word kept beside it. */
export function runOfExecution(execution: DescribeExecutionCommandOutput, lastActivityAt?: string): TargetRunView {
  const runId = execution.executionArn ?? '';
  const native = execution.status ?? 'UNKNOWN';
  switch (execution.status) {
    case 'RUNNING':
      return { runId, status: 'running', ...(lastActivityAt ? { lastActivityAt } : {}) };
    case 'SUCCEEDED': {
      // The output is the result: its preview the summary, the JSON itself the body (kept within §10's bounds).
      const summary = preview(execution.output);
      const bodyJson = isJson(execution.output) ? execution.output : undefined;
      return { runId, status: 'completed', nativeStatus: native, ...(summary || bodyJson ? { result: { ...(summary ? { summary } : {}), ...(bodyJson ? { bodyJson } : {}) } } : {}) };
    }
    case 'ABORTED':
      return { runId, status: 'cancelled', nativeStatus: native };
    default: {
      // FAILED, TIMED_OUT, and PENDING_REDRIVE (failed as recorded: a redrive outside the ledger is late activity).
      const summary = preview([execution.error, execution.cause].filter((part) => part !== undefined && part !== '').join(': '));
      return { runId, status: 'failed', nativeStatus: native, ...(summary ? { result: { summary } } : {}) };
    }
  }
}

/**
 * A lookup of one execution: `DescribeExecution`, and for a running one its newest history event (its
 * last activity). Alone, so what only looks runs up (the orchestrators function) calls nothing else.
 */
export async function lookUpExecution(sfn: Pick<SFNClient, 'send'>, runId: string): Promise<LookupOutcome> {
  try {
    const execution = await sfn.send(new DescribeExecutionCommand({ executionArn: runId }));
    if (execution.status !== 'RUNNING') return { kind: 'found', run: runOfExecution(execution) };
    const history = await sfn.send(new GetExecutionHistoryCommand({ executionArn: runId, reverseOrder: true, maxResults: 1 }));
    const newest = history.events?.[0]?.timestamp;
    return { kind: 'found', run: runOfExecution(execution, newest ? newest.toISOString() : undefined) };
  } catch (caught) {
    const error = asSdkError(caught);
    if (error.name === 'ExecutionDoesNotExist') return { kind: 'not_found' };
    // AccessDenied included: the run may well be going on; the ledger cannot see it (never failed).
    return { kind: 'unavailable', reason: reasonOf(error) };
  }
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
    const named = submissionOf(execution.input);
    if (named?.dispatchId !== request.dispatchId || named.attempt !== request.attempt) {
      return { kind: 'rejected', httpStatus: 409, reason: `an execution named ${executionArn.split(':').at(-1) ?? ''} exists and is not this dispatch's attempt ${request.attempt}` };
    }
    // Ours (a retried submission): its end, if it has one, is found by the next lookup.
    return { kind: 'accepted', runId: executionArn, status: 'running', requestId: execution.startDate?.toISOString() ?? '' };
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
        return refused(error) ? { kind: 'rejected', httpStatus: error.$metadata?.httpStatusCode ?? 400, reason: reasonOf(error) } : { kind: 'unavailable', reason: reasonOf(error) };
      }
    },

    lookup: (runId) => lookUpExecution(deps.sfn, runId),

    async decideApproval(runId, approvalId, decision, dispatchId): Promise<ApprovalOutcome> {
      if (dispatchId === undefined) return { kind: 'conflict', reason: 'an approval of a state machine is answered for its dispatch' };
      let held: Awaited<ReturnType<StepFunctionsTargetDeps['approvalTokenOf']>>;
      try {
        held = await deps.approvalTokenOf(dispatchId, approvalId);
      } catch (caught) {
        return { kind: 'unavailable', reason: reasonOf(asSdkError(caught)) };
      }
      if (!held || held.runId !== runId) return { kind: 'conflict', reason: `approval ${approvalId} is not one this run waits on` };
      try {
        if (decision === 'approve') await deps.sfn.send(new SendTaskSuccessCommand({ taskToken: held.taskToken, output: JSON.stringify({ approvalId, decision }) }));
        else await deps.sfn.send(new SendTaskFailureCommand({ taskToken: held.taskToken, error: 'ApprovalCancelled', cause: `approval ${approvalId} was cancelled through the ledger` }));
        return { kind: 'decided', approvalId, decision };
      } catch (caught) {
        const error = asSdkError(caught);
        if (error.name === 'TaskDoesNotExist' || error.name === 'TaskTimedOut' || error.name === 'InvalidToken') return { kind: 'conflict', reason: reasonOf(error) };
        return { kind: 'unavailable', reason: reasonOf(error) };
      }
    },

    async cancel(runId): Promise<CancelOutcome> {
      try {
        await deps.sfn.send(new StopExecutionCommand({ executionArn: runId, error: 'CancelledThroughLedger' }));
        // The execution's own word: stopped (ABORTED). One that had ended another way before the stop
        // reached it, or has not ended yet, is recorded by the next lookup, with its output or error.
        const { status } = await describe(runId);
        return status === 'ABORTED' ? { kind: 'cancelled', status: 'cancelled' } : { kind: 'requested', how: status === 'RUNNING' ? 'StopExecution was accepted; the execution has not ended yet' : `the execution had ended (${status ?? 'no status'}) before the stop reached it` };
      } catch (caught) {
        const error = asSdkError(caught);
        if (error.name === 'ExecutionDoesNotExist') return { kind: 'not_found' };
        return { kind: 'unavailable', reason: reasonOf(error) };
      }
    },
  };
}

const refused = (error: SdkError): boolean => REFUSALS.has(error.name);
