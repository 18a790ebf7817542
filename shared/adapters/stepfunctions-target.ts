import {
  DescribeExecutionCommand,
  GetExecutionHistoryCommand,
  SendTaskFailureCommand,
  SendTaskSuccessCommand,
  StartExecutionCommand,
  StopExecutionCommand,
  SFNClient,
  type DescribeExecutionCommandOutput,
} from '@aws-sdk/client-sfn';
import type { ApprovalTokens } from './approval-tokens.js';
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
  /** The task tokens approvals wait on, stored apart from the dispatch (never in a view, an event or a log). */
  readonly approvalTokens: Pick<ApprovalTokens, 'tokenOf' | 'used'>;
  readonly now: () => Date;
}

/** The Step Functions client of the targets: every call bounded like any call to a target (a hung one must not hold the function). */
export const sfnClientFor = (timeoutMs: number): SFNClient => new SFNClient({ requestHandler: { requestTimeout: timeoutMs, connectionTimeout: timeoutMs } });

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
export function runOfExecution(execution: DescribeExecutionCommandOutput, lastActivityAt?: string): TargetRunView | undefined {
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
    case 'FAILED':
    case 'TIMED_OUT':
    case 'PENDING_REDRIVE': {
      // PENDING_REDRIVE: failed as recorded (a redrive outside the ledger is late activity).
      const summary = preview([execution.error, execution.cause].filter((part) => part !== undefined && part !== '').join(': '));
      return { runId, status: 'failed', nativeStatus: native, ...(summary ? { result: { summary } } : {}) };
    }
    default:
      return undefined;
  }
}

/**
 * A lookup of one execution: `DescribeExecution`, and for a running one its newest history event (its
 * last activity). Alone, so what only looks runs up (the orchestrators function) calls nothing else.
 */
export async function lookUpExecution(sfn: Pick<SFNClient, 'send'>, runId: string): Promise<LookupOutcome> {
  try {
    const execution = await sfn.send(new DescribeExecutionCommand({ executionArn: runId }));
    const newest = execution.status === 'RUNNING' ? (await sfn.send(new GetExecutionHistoryCommand({ executionArn: runId, reverseOrder: true, maxResults: 1 }))).events?.[0]?.timestamp : undefined;
    const run = runOfExecution(execution, newest?.toISOString());
    // A status this version does not know (a new one, or none): nothing concluded from it.
    return run ? { kind: 'found', run } : { kind: 'unavailable', reason: `DescribeExecution answered a status the ledger does not know: ${clip(printable(execution.status ?? 'none'), 40)}` };
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
      let held: Awaited<ReturnType<ApprovalTokens['tokenOf']>>;
      try {
        held = await deps.approvalTokens.tokenOf(dispatchId, approvalId);
      } catch (caught) {
        return { kind: 'unavailable', reason: reasonOf(asSdkError(caught)) };
      }
      if (!held || held.runId !== runId) return { kind: 'conflict', reason: `approval ${approvalId} is not one this run waits on` };
      const taskToken = held.taskToken;
      if (taskToken === undefined) return { kind: 'conflict', reason: `approval ${approvalId} was decided already` };
      // An SDK error's text may quote what it was sent: the token never leaves in a reason.
      const hidden = (error: SdkError): string => reasonOf(error).replaceAll(taskToken, '[task token]');
      try {
        if (decision === 'approve') await deps.sfn.send(new SendTaskSuccessCommand({ taskToken, output: JSON.stringify({ approvalId, decision }) }));
        else await deps.sfn.send(new SendTaskFailureCommand({ taskToken, error: 'ApprovalCancelled', cause: `approval ${approvalId} was cancelled through the ledger` }));
      } catch (caught) {
        const error = asSdkError(caught);
        if (error.name === 'TaskDoesNotExist' || error.name === 'TaskTimedOut' || error.name === 'InvalidToken') return { kind: 'conflict', reason: hidden(error) };
        return { kind: 'unavailable', reason: hidden(error) };
      }
      // Used: erased. If that write fails the token stays until its record expires; the decision stands either way.
      await deps.approvalTokens.used(dispatchId, approvalId, deps.now()).catch(() => undefined);
      return { kind: 'decided', approvalId, decision };
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
