import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';

/** A Lambda `Context` for a local invocation: the fields handlers and Powertools read. */
export function lambdaContext(functionName: string, timeoutMs: number, region: string, memoryMb = 256): Context {
  const deadline = Date.now() + timeoutMs;
  const awsRequestId = randomUUID();
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${region}:000000000000:function:${functionName}`,
    memoryLimitInMB: String(memoryMb),
    awsRequestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: `local/${awsRequestId}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** An invocation Lambda ended at its function's timeout. */
export class TimedOut extends Error {
  override readonly name = 'Sandbox.Timedout';
}

/**
 * A handler's run as Lambda bounds it: failed with TimedOut once `timeoutMs` has passed (the run itself
 * cannot be stopped in-process; its result is ignored). Regression: the SQS, stream and schedule sources
 * awaited a handler without a bound, so one hung call stopped a source's loop, and its stop, for ever.
 */
export async function withinTimeout<T>(run: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimedOut(`Task timed out after ${(timeoutMs / 1000).toFixed(2)} seconds`)), timeoutMs);
  });
  try {
    return await Promise.race([run, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** What the local runtime records about each invocation (the analogue of Lambda's REPORT line). */
export interface InvocationReport {
  readonly at: string;
  readonly function: string;
  readonly requestId: string;
  readonly trigger: 'sqs' | 'stream' | 'schedule' | 'http';
  readonly durationMs: number;
  readonly outcome: 'ok' | 'partial' | 'error';
  /** SQS message ids or stream sequence numbers the invocation received. */
  readonly items?: readonly string[];
  /** Items reported back as failed (ReportBatchItemFailures). */
  readonly failedItems?: readonly string[];
  readonly error?: string;
}

export type InvocationListener = (report: InvocationReport) => void;

/** How an invocation error is recorded: its class and message, never its stack. */
export function describeError(thrown: unknown): string {
  return thrown instanceof Error ? `${thrown.name}: ${thrown.message}` : String(thrown);
}
