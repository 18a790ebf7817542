import {
  GetDurableExecutionCommand,
  GetDurableExecutionHistoryCommand,
  InvokeCommand,
  ListDurableExecutionsByFunctionCommand,
  SendDurableExecutionCallbackFailureCommand,
  SendDurableExecutionCallbackSuccessCommand,
  StopDurableExecutionCommand,
  type GetDurableExecutionCommandOutput,
  type LambdaClient,
} from '@aws-sdk/client-lambda';
import type { LookupOutcome, SubmitOutcome, TargetRunView } from '../dispatch/target-answers.js';
import { executionNameOf } from '../targets/run-names.js';
import type { DurableTargetRegistration, SubmitRequest, TargetPort } from '../targets/port.js';
import { clip } from '../text.js';
import { SUMMARY_CHARS, adoptedIfOurs, cancelledRun, completedRun, failedRun, lookUpRun, refusedSubmission, runningRun, runStopper, tokenApprovals, type RuntimeTargetDeps } from './runtime-runs.js';
import { asSdkError, reasonOf, submissionBody, type SdkError } from './submission-body.js';

/**
 * A `durable` target (CONTRACT §17): one Lambda durable execution per attempt, of a function named by
 * a qualified ARN (a version or an alias).
 * - Submission: an asynchronous `Invoke` with `DurableExecutionName` from the dispatch and attempt
 *   (`executionNameOf`, ≤ 64 characters), the §8 body as its payload. Lambda answers the same execution
 *   for the same name and payload while it runs; `DurableExecutionAlreadyStartedException` (another
 *   payload, or a closed execution) names no execution, so it is found by its name
 *   (`ListDurableExecutionsByFunction`) and adopted only when its input carries this dispatch and attempt.
 * - The run id is the durable execution's ARN; the proof, the invoke's request id (the execution's
 *   start time when one is adopted).
 * - Lookup: `GetDurableExecution`, and for a running one its newest history event (its last activity).
 * - Cancel: `StopDurableExecution`. Approvals: the callback id the function's `waitForCallback` reported,
 *   kept apart from the state, answered with `SendDurableExecutionCallbackSuccess` / `…Failure`.
 */

/** Lambda's client; the approval tokens (`RuntimeTargetDeps`) are the callback ids durable functions reported. */
export interface DurableTargetDeps extends RuntimeTargetDeps {
  readonly lambda: Pick<LambdaClient, 'send'>;
}

/** Lambda: a durable execution's name is 1..64 characters (CONTRACT §17: of `[A-Za-z0-9-_]`). */
export const DURABLE_EXECUTION_NAME_LENGTH = 64;

/** The executions listed, at most, to find the one a name conflict names (the name filter matches substrings too). */
const LIST_PAGE_SIZE = 100;
const LIST_PAGES = 3;

/** Errors of an invoke that retrying will not cure: the registration, the grant or the payload is wrong. */
const REFUSALS = new Set([
  'AccessDeniedException',
  'ResourceNotFoundException',
  'InvalidParameterValueException',
  'InvalidRequestContentException',
  'RequestTooLargeException',
  'SerializedRequestEntityTooLargeException',
  'UnsupportedMediaTypeException',
  'ModeNotSupportedException',
  'NoPublishedVersionException',
  'KMSAccessDeniedException',
  'KMSDisabledException',
  'KMSInvalidStateException',
  'KMSNotFoundException',
]);

const resourceNotFound = (error: SdkError): boolean => error.name === 'ResourceNotFoundException';

/** `arn:…:function:NAME:QUALIFIER` → the function's ARN and its qualifier (none for an unqualified ARN). */
function functionOf(functionArn: string): { readonly FunctionName: string; readonly Qualifier?: string } {
  const qualified = /^(arn:[^:]+:lambda:[^:]*:[^:]*:function:[^:]+):([^:]+)$/.exec(functionArn);
  return qualified ? { FunctionName: qualified[1] as string, Qualifier: qualified[2] as string } : { FunctionName: functionArn };
}

/** CONTRACT §17's status map: the ledger's status, and the durable execution's own word kept beside it. */
export function runOfDurableExecution(execution: GetDurableExecutionCommandOutput, lastActivityAt?: string): TargetRunView | undefined {
  const runId = execution.DurableExecutionArn ?? '';
  const native = execution.Status ?? 'UNKNOWN';
  switch (execution.Status) {
    case 'RUNNING':
      return runningRun(runId, lastActivityAt);
    case 'SUCCEEDED':
      return completedDurableRun(runId, native, execution.Result);
    case 'STOPPED':
      return cancelledRun(runId, native);
    case 'FAILED':
    case 'TIMED_OUT':
      return failedRun(runId, native, execution.Error?.ErrorType, execution.Error?.ErrorMessage);
    default:
      return undefined;
  }
}

/**
 * A succeeded durable execution. The worker kit's `durableRun` returns the result it reports in its final
 * event, `{ summary, body? }`, as the execution's output: such an output is read as that result, so a
 * lookup (after a lost final event) records the summary and body the event would have — not the wrapper
 * as the body. The summary is taken as an event's is (bounded; shown escaped, like every target's text).
 * Any other output is the run's result body, its preview the summary, as for Step Functions.
 */
function completedDurableRun(runId: string, native: string, output: string | undefined): TargetRunView {
  const reported = reportedResultOf(output);
  if (!reported) return completedRun(runId, native, output);
  const result = { summary: clip(reported.summary, SUMMARY_CHARS), ...(reported.bodyJson === undefined ? {} : { bodyJson: reported.bodyJson }) };
  return { runId, status: 'completed', nativeStatus: native, result };
}

/** `{ summary: string, body?: JSON }` and no other member: a result as a final event carries it (CONTRACT §2). */
function reportedResultOf(output: string | undefined): { readonly summary: string; readonly bodyJson?: string } | undefined {
  if (output === undefined || output === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(output);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const members = Object.keys(value);
  const { summary, body } = value as { readonly summary?: unknown; readonly body?: unknown };
  if (typeof summary !== 'string' || !members.every((member) => member === 'summary' || member === 'body')) return undefined;
  if (body === undefined) return { summary };
  try {
    return { summary, bodyJson: JSON.stringify(body) };
  } catch {
    // Nested too deep to write again (JSON.parse takes more levels than JSON.stringify): the output is kept
    // like every other output, and the ledger's bounds drop the body and keep its preview (never a failed lookup).
    return undefined;
  }
}

/**
 * A lookup of one durable execution: `GetDurableExecution` (without its data unless it ended with a result
 * or an error: `lookUpRun`), and for a running one its newest history event (its last activity). Alone, so
 * what only looks runs up calls nothing else.
 */
export function lookUpDurableExecution(lambda: Pick<LambdaClient, 'send'>, runId: string): Promise<LookupOutcome> {
  return lookUpRun({
    describedBy: 'GetDurableExecution',
    describe: (withData) => lambda.send(new GetDurableExecutionCommand({ DurableExecutionArn: runId, IncludeExecutionData: withData })),
    endsWithData: new Set(['SUCCEEDED', 'FAILED', 'TIMED_OUT']),
    statusOf: (execution) => execution.Status,
    // Newest first, one event, without its data: only its time is read.
    newestEventAt: async () => (await lambda.send(new GetDurableExecutionHistoryCommand({ DurableExecutionArn: runId, ReverseOrder: true, MaxItems: 1, IncludeExecutionData: false }))).Events?.[0]?.EventTimestamp,
    runOf: runOfDurableExecution,
    notFound: resourceNotFound,
  });
}

export function durableTarget(registration: DurableTargetRegistration, deps: DurableTargetDeps): TargetPort {
  const statusOf = async (runId: string) => (await deps.lambda.send(new GetDurableExecutionCommand({ DurableExecutionArn: runId, IncludeExecutionData: false }))).Status;

  /** The ARN of the function's execution of exactly this name, newest first, within a bounded listing. */
  async function executionNamed(name: string): Promise<string | undefined> {
    let Marker: string | undefined;
    for (let page = 0; page < LIST_PAGES; page += 1) {
      const listed = await deps.lambda.send(new ListDurableExecutionsByFunctionCommand({ ...functionOf(registration.functionArn), DurableExecutionName: name, MaxItems: LIST_PAGE_SIZE, ...(Marker ? { Marker } : {}) }));
      const match = listed.DurableExecutions?.find((execution) => execution.DurableExecutionName === name && execution.DurableExecutionArn);
      if (match?.DurableExecutionArn) return match.DurableExecutionArn;
      Marker = listed.NextMarker;
      if (!Marker) return undefined;
    }
    return undefined;
  }

  /** A name already taken: adopted only when the execution's input is this very submission. */
  async function adopt(request: SubmitRequest, name: string): Promise<SubmitOutcome> {
    try {
      const arn = await executionNamed(name);
      // Taken, yet not listed (yet): nothing is started and nothing adopted; the submission is retried.
      if (arn === undefined) return { kind: 'unavailable', reason: `an execution named ${name} exists and is not listed under ${registration.functionArn} yet` };
      const execution = await deps.lambda.send(new GetDurableExecutionCommand({ DurableExecutionArn: arn }));
      return adoptedIfOurs(request, name, { runId: execution.DurableExecutionArn ?? arn, input: execution.InputPayload, startedAt: execution.StartTimestamp });
    } catch (caught) {
      return { kind: 'unavailable', reason: reasonOf(asSdkError(caught)) };
    }
  }

  return {
    async submit(request) {
      const name = executionNameOf(request.dispatchId, request.attempt, DURABLE_EXECUTION_NAME_LENGTH);
      try {
        const answer = await deps.lambda.send(
          new InvokeCommand({ FunctionName: registration.functionArn, InvocationType: 'Event', DurableExecutionName: name, Payload: Buffer.from(submissionBody(request), 'utf8') }),
        );
        // No execution named in the answer: nothing to supervise (a function that is not durable, say). Never
        // accepted, and never tried again: an Invoke that started no execution may have run the function
        // as a plain asynchronous call, so a retry could run the work twice (CONTRACT §17: never a second run).
        if (!answer.DurableExecutionArn) return { kind: 'rejected', httpStatus: 502, reason: `Invoke named no durable execution (status ${answer.StatusCode ?? 'none'}): is ${registration.functionArn} a durable function?` };
        return { kind: 'accepted', runId: answer.DurableExecutionArn, status: 'running', requestId: answer.$metadata.requestId ?? '' };
      } catch (caught) {
        const error = asSdkError(caught);
        if (error.name === 'DurableExecutionAlreadyStartedException') return adopt(request, name);
        return refusedSubmission(error, REFUSALS);
      }
    },

    lookup: (runId) => lookUpDurableExecution(deps.lambda, runId),

    decideApproval: tokenApprovals(deps, {
      waiter: 'a durable function',
      tokenMark: '[callback id]',
      send: (CallbackId, id, chosen) =>
        chosen === 'approve'
          ? deps.lambda.send(new SendDurableExecutionCallbackSuccessCommand({ CallbackId, Result: Buffer.from(JSON.stringify({ approvalId: id, decision: chosen }), 'utf8') }))
          : deps.lambda.send(new SendDurableExecutionCallbackFailureCommand({ CallbackId, Error: { ErrorType: 'ApprovalCancelled', ErrorMessage: `approval ${id} was cancelled through the ledger` } })),
      // Expired, closed, or not one Lambda knows: the callback waits no more.
      gone: (error) => error.name === 'CallbackTimeoutException' || error.name === 'ResourceNotFoundException' || error.name === 'InvalidParameterValueException',
    }),

    cancel: runStopper({
      stoppedBy: 'StopDurableExecution',
      stop: (runId) => deps.lambda.send(new StopDurableExecutionCommand({ DurableExecutionArn: runId, Error: { ErrorType: 'CancelledThroughLedger', ErrorMessage: 'cancelled through the ledger' } })),
      statusAfter: statusOf,
      stoppedStatus: 'STOPPED',
      notFound: resourceNotFound,
    }),
  };
}
