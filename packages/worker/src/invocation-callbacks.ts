import { CallbackClient, retryPolicyOf, type RetryPolicy, type Transport } from './callbacks.js';
import type { Log } from './model.js';
import { callbackError } from './results.js';
import { spilledTaskOf } from './parse.js';
import type { Signer } from './signer.js';

/**
 * The ledger callbacks of one Lambda invocation — a Lambda worker's, a state machine task's, a durable
 * function's (CONTRACT §12, §17) — and the read of a spilled task, apart from the run-state store so the
 * subpaths that keep no store (`/durable`) load no DynamoDB SDK.
 */

/** The part of Lambda's context the kit reads. */
export interface LambdaContextLike {
  readonly awsRequestId: string;
  getRemainingTimeInMillis(): number;
}

/** How an invocation's callbacks are made (a Lambda worker's options carry these). */
export interface InvocationCallbackOptions {
  readonly log: Log;
  readonly signer?: Signer | undefined;
  readonly retry?: Partial<RetryPolicy> | undefined;
  readonly transport?: Transport | undefined;
}

/** Time kept back from the function's timeout for the last writes. */
const MARGIN_MS = 2_000;

/**
 * The callbacks of one invocation: none outlives it, since past its timeout Lambda would freeze it
 * mid-way.
 */
export function invocationCallbacks(
  options: InvocationCallbackOptions,
  context: LambdaContextLike,
  stopSignal: AbortSignal,
): CallbackClient {
  const remaining = Math.max(1_000, context.getRemainingTimeInMillis() - MARGIN_MS);
  const policy = retryPolicyOf(options.retry);
  return new CallbackClient({
    log: options.log,
    stopSignal,
    signer: options.signer,
    retry: { ...policy, budgetMs: Math.min(policy.budgetMs, remaining), finalBudgetMs: Math.min(policy.finalBudgetMs, remaining) },
    // However late a callback starts (a control poll at a heartbeat), its retries end before the
    // invocation's margin does: the function's end less the time kept for the last writes (no floor).
    deadlineAt: Date.now() + context.getRemainingTimeInMillis() - MARGIN_MS,
    ...(options.transport ? { transport: options.transport } : {}),
  });
}

/** Reads a spilled task (CONTRACT §8 v2: `GET {callbackUrl}/dispatches/{dispatchId}/task?runId=`), as the run `runId` names itself. */
export async function readTask(callbacks: CallbackClient, run: { readonly callbackUrl: string; readonly dispatchId: string; readonly runId: string }): Promise<Readonly<Record<string, unknown>>> {
  const outcome = await callbacks.getTask(run.callbackUrl, run.dispatchId, run.runId);
  // The http worker's error for the same read: its status and the ledger's code kept.
  if (outcome.kind !== 'delivered') throw callbackError('reading the spilled task', outcome, undefined, 'the invocation ended');
  return spilledTaskOf(outcome.text);
}
