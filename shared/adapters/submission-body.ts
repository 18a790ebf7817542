import type { SubmitRequest } from '../targets/port.js';
import { clip, printable } from '../text.js';

/**
 * The submission body (CONTRACT §8) for a target the ledger hands it to as one payload — a Lambda's
 * invoke, a state machine's execution input: the task inline or, above `TASK_REF_ABOVE_BYTES`, by
 * reference, and the message's `traceparent` when it has one (a payload has no headers to carry it).
 */

/** Lambda's limit for an asynchronous payload and Step Functions' for an input are 256 KB: above this the body carries `taskRef`. */
export const TASK_REF_ABOVE_BYTES = 200 * 1024;

/**
 * `runId`: the run's id when the ledger names it before the runtime answers (a lambda run); the task's
 * reference then names it too. An execution's id is its ARN, known only once started: its body has
 * none, and the task is read with the ARN the execution knows itself by (`?runId=` added by the reader).
 */
export function submissionBody(request: SubmitRequest, runId?: string): string {
  const body = {
    dispatchId: request.dispatchId,
    attempt: request.attempt,
    origin: request.origin,
    ...(runId === undefined ? {} : { runId }),
    task: request.task,
    expectedEvidence: request.expectedEvidence,
    callbackUrl: request.callbackUrl,
    ...(request.timeouts ? { timeouts: request.timeouts } : {}),
    ...(request.traceparent ? { traceparent: request.traceparent } : {}),
  };
  const inline = JSON.stringify(body);
  if (Buffer.byteLength(inline, 'utf8') <= TASK_REF_ABOVE_BYTES) return inline;
  const { task: _task, ...rest } = body;
  const taskRef = `${request.callbackUrl}/dispatches/${encodeURIComponent(request.dispatchId)}/task${runId === undefined ? '' : `?runId=${encodeURIComponent(runId)}`}`;
  return JSON.stringify({ ...rest, taskRef });
}

/** An AWS SDK error as the target adapters read it: its name, message and HTTP status. */
export interface SdkError {
  readonly name: string;
  readonly message: string;
  readonly $metadata?: { readonly httpStatusCode?: number };
}
export const asSdkError = (error: unknown): SdkError => (error instanceof Error ? (error as Error & SdkError) : { name: 'Error', message: String(error) });
/** What a refusal or an outage is recorded as: the error's name and message, printable and bounded. */
export const reasonOf = (error: SdkError): string => clip(printable(`${error.name}: ${error.message}`), 300);

/** The SDK's tries of one call to a target (its standard retry: a throttle or a 5xx is tried again). */
const SDK_TRIES = 3;

/**
 * How every SDK client of the targets is set up: each of the SDK's tries connected and answered within
 * a third of `timeoutMs`, else it fails as a `TimeoutError`, so a call that hangs ends by about the
 * target timeout, its tries included, and counts as an unavailable target. The SDK's `requestTimeout`
 * alone only logs a warning when it passes — `throwOnRequestTimeout` makes it an error — so a hung call
 * held the function to its own timeout, past the submission claim that must outlast a call. Throttles
 * stay the SDK's to try again: a lookup refused once would otherwise lose sight of its run.
 */
export const targetClientConfig = (timeoutMs: number) => {
  const perTryMs = Math.max(1, Math.ceil(timeoutMs / SDK_TRIES));
  return { maxAttempts: SDK_TRIES, requestHandler: { requestTimeout: perTryMs, connectionTimeout: perTryMs, throwOnRequestTimeout: true } } as const;
};
