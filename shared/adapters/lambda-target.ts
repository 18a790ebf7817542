import { InvokeCommand, LambdaClient, type LambdaClientConfig } from '@aws-sdk/client-lambda';
import { GetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { clip, printable } from '../text.js';
import { asSdkError, reasonOf, submissionBody, targetClientConfig, type SdkError } from './submission-body.js';
import { lambdaRunIdOf, NATIVE_STATUS, TARGET_RUN_STATUSES, type LambdaTargetRegistration, type SubmitRequest, type TargetPort } from '../targets/port.js';
export { TASK_REF_ABOVE_BYTES } from './submission-body.js';
import { type LookupOutcome, type SubmitOutcome, type TargetRunStatus } from '../dispatch/target-answers.js';
import { isTerminal } from '../dispatch/state.js';

/**
 * A `lambda` target (CONTRACT §12): the ledger invokes the function asynchronously with the
 * submission body; the run id is `{dispatchId}:{attempt}` and the invoke's request id is the proof. The
 * run reports through the API like any target (the worker kit); its lookups read the kit's run state
 * and the failures Lambda's on-failure destination delivered. Silence past the function's timeout and
 * Lambda's own retries, with neither record, is `unknown` — never `failed`.
 */

/** Lambda retries a failed asynchronous invocation twice, about one and two minutes apart. */
const ASYNC_TRIES = 3;
const RETRY_DELAYS_SECONDS = 60 + 120;

/** What Lambda's on-failure destination said about a run (kept by the ledger when it took the record in). */
export interface LambdaFailure {
  readonly runId: string;
  readonly errorType: string;
  readonly errorMessage: string;
}

export interface LambdaTargetDeps {
  readonly lambda: Pick<LambdaClient, 'send'>;
  /** Reads the kit's run-state table (strongly consistent). */
  readonly documents: Pick<DynamoDBDocumentClient, 'send'>;
  /** The failure the on-failure destination delivered for a run, if any. */
  readonly failureOf: (runId: string) => Promise<LambdaFailure | undefined>;
  readonly now: () => Date;
}

/** The Lambda client of the targets: every call bounded like any call to a target (`targetClientConfig`). */
export const lambdaClientFor = (timeoutMs: number, config: LambdaClientConfig = {}): LambdaClient => new LambdaClient({ ...targetClientConfig(timeoutMs), ...config });

/** Errors of an invoke that retrying will not cure: the registration or the payload is wrong. */
const REFUSALS = new Set(['ResourceNotFoundException', 'InvalidRequestContentException', 'RequestTooLargeException', 'InvalidParameterValueException', 'AccessDeniedException', 'UnsupportedMediaTypeException']);

/** The body the function is invoked with: the submission, under the run id the ledger names (CONTRACT §12). */
export const invocationPayload = (request: SubmitRequest): string => submissionBody(request, lambdaRunIdOf(request.dispatchId, request.attempt));

const isStatus = (value: unknown): value is TargetRunStatus => typeof value === 'string' && (TARGET_RUN_STATUSES as readonly string[]).includes(value);

export function lambdaTarget(registration: LambdaTargetRegistration, deps: LambdaTargetDeps): TargetPort {
  const invoke = async (payload: string): Promise<{ readonly requestId: string } | { readonly refused: SdkError } | { readonly unavailable: SdkError }> => {
    try {
      const answer = await deps.lambda.send(new InvokeCommand({ FunctionName: registration.functionArn, InvocationType: 'Event', Payload: Buffer.from(payload, 'utf8') }));
      if (answer.StatusCode !== 202) return { unavailable: { name: 'UnexpectedStatus', message: `Invoke answered ${answer.StatusCode ?? 'no status'}` } };
      return { requestId: answer.$metadata.requestId ?? '' };
    } catch (caught) {
      const error = asSdkError(caught);
      return REFUSALS.has(error.name) ? { refused: error } : { unavailable: error };
    }
  };

  return {
    async submit(request: SubmitRequest): Promise<SubmitOutcome> {
      const answer = await invoke(invocationPayload(request));
      if ('refused' in answer) return { kind: 'rejected', httpStatus: answer.refused.$metadata?.httpStatusCode ?? 400, reason: reasonOf(answer.refused) };
      if ('unavailable' in answer) return { kind: 'unavailable', reason: reasonOf(answer.unavailable) };
      // Queued with Lambda: the kit reports from here on, and keeps the run by its id across Lambda's retries.
      return { kind: 'accepted', runId: lambdaRunIdOf(request.dispatchId, request.attempt), status: 'queued', requestId: answer.requestId };
    },

    async lookup(runId, hints): Promise<LookupOutcome> {
      try {
        // Lambda's own word that it gave up outweighs a kit record still saying the run is under way.
        const failure = await deps.failureOf(runId);
        if (registration.stateTable) {
          const { Item } = await deps.documents.send(new GetCommand({ TableName: registration.stateTable, Key: { runId }, ConsistentRead: true }));
          if (Item && isStatus(Item.status) && (!failure || Item.status === 'completed' || Item.status === 'failed' || Item.status === 'cancelled')) {
            const summary = typeof Item.result === 'object' && Item.result !== null && typeof (Item.result as { summary?: unknown }).summary === 'string' ? (Item.result as { summary: string }).summary : undefined;
            // A final run's body, as the kit keeps it beside its result: read too, so a run whose final event never
            // reached the ledger loses nothing (kept within §10's bounds, or its summary alone, by the one who records it).
            const bodyJson = isTerminal(Item.status) && typeof Item.resultBodyJson === 'string' ? Item.resultBodyJson : undefined;
            const pending = Item.pendingApproval as { approvalId?: unknown; requestedAt?: unknown } | undefined;
            return {
              kind: 'found',
              run: {
                runId,
                status: Item.status,
                // CONTRACT V3 §2: the kit's own word for a final status (worker_restarted), when it is one.
                ...(typeof Item.nativeStatus === 'string' && NATIVE_STATUS.test(Item.nativeStatus) ? { nativeStatus: Item.nativeStatus } : {}),
                ...(summary === undefined && bodyJson === undefined ? {} : { result: { ...(summary === undefined ? {} : { summary }), ...(bodyJson === undefined ? {} : { bodyJson }) } }),
                ...(pending && typeof pending.approvalId === 'string' ? { pendingApproval: { approvalId: pending.approvalId, ...(typeof pending.requestedAt === 'string' ? { requestedAt: pending.requestedAt } : {}) } } : {}),
              },
            };
          }
        }
        if (failure) return { kind: 'found', run: { runId, status: 'failed', result: { summary: clip(printable(`${failure.errorType}: ${failure.errorMessage}`), 200) } } };
      } catch (caught) {
        return { kind: 'unavailable', reason: reasonOf(asSdkError(caught)) };
      }
      // Neither the kit's word nor Lambda's: still within the function's tries → queued; past them → not found (unknown).
      const since = hints?.submittedAt ? Date.parse(hints.submittedAt) : Number.NaN;
      const window = (registration.timeoutSeconds * ASYNC_TRIES + RETRY_DELAYS_SECONDS) * 1000;
      if (Number.isFinite(since) && deps.now().getTime() - since <= window) return { kind: 'found', run: { runId, status: 'queued' } };
      return { kind: 'not_found' };
    },

    async decideApproval(runId, approvalId, decision) {
      // A Lambda cannot be called: the decision is read from the run's control record when the
      // function is invoked again to resume the run (CONTRACT §12).
      const answer = await invoke(JSON.stringify({ resume: runId, approvalId, decision }));
      if ('requestId' in answer) return { kind: 'decided', approvalId, decision };
      return { kind: 'unavailable', reason: reasonOf('refused' in answer ? answer.refused : answer.unavailable) };
    },

    async cancel() {
      // Cancels and supersedes reach a Lambda run through its control record, which the worker kit polls once a heartbeat interval.
      return { kind: 'requested', how: 'the run is told through its control record, polled once a heartbeat interval' };
    },
  };
}
