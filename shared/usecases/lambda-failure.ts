import { isTerminal } from '../dispatch/state.js';
import { runFailedByRuntime } from '../dispatch/transitions/run.js';
import { submissionInFlight } from '../dispatch/transitions/lifecycle.js';
import { dispatchAsFound } from './dispatch-as-found.js';
import type { LedgerStoreWithWrites } from '../ledger/port.js';
import type { LambdaFailureRecord } from '../dispatch/records.js';
import { updateDispatch } from '../ledger/repository.js';
import { NATIVE_STATUS, parseLambdaRunId } from '../targets/port.js';
import { effectiveSender, resolvePrincipal, type PrincipalMode, type PrincipalRegistry } from '../principals/principals.js';
import { clip, printable } from '../text.js';

/**
 * Lambda's on-failure destination for a lambda target (CONTRACT §12): after Lambda's own retries an
 * invocation that threw or timed out arrives here, and the run is recorded `failed` with Lambda's
 * error — the runtime's own word. The record is kept first (a lookup reads it), then the state; a
 * record for a run the dispatch no longer follows, or one already final, changes nothing. One that
 * comes while the attempt it names is still being submitted (the intake's or a submitter's claim held)
 * is `not_yet`: kept, and retried by SQS. One for an attempt not made yet is none of its runs: not kept.
 */

/** `not_yet`: the run's attempt is in flight and not recorded yet — the record is kept, and the message retried. */
/** `refused_redriven`: moved back from the DLQ by an operator, for a first sender that is not the run's function (kept for the DLQ, never dropped). */
export type LambdaFailureOutcome = 'failed' | 'already_final' | 'not_current' | 'not_yet' | 'unreadable' | 'refused' | 'refused_redriven' | 'conflict';

export interface LambdaFailureDeps {
  readonly store: LedgerStoreWithWrites;
  readonly now: () => Date;
  /** Who may put a failure on the queue: in AWS, the failed function's own role (Lambda sends as it). */
  readonly principals?: PrincipalRegistry;
  readonly principalMode?: PrincipalMode;
}

/** The function an on-failure record names, without its version or alias qualifier. */
const unqualified = (arn: unknown): string | undefined => (typeof arn === 'string' ? arn.split(':').slice(0, 7).join(':') : undefined);

const MAX_TEXT = 300;

interface DestinationRecord {
  readonly requestContext?: { readonly requestId?: unknown; readonly condition?: unknown };
  readonly requestPayload?: unknown;
  readonly responsePayload?: unknown;
}

const text = (value: unknown, fallback: string): string => (typeof value === 'string' && value.trim() !== '' ? clip(printable(value), MAX_TEXT) : fallback);

/** The run and error a destination record names (the invocation's payload carries the run id, or `resume` for a resumed run). */
export function failureOfRecord(record: unknown, at: string): LambdaFailureRecord | undefined {
  if (typeof record !== 'object' || record === null) return undefined;
  const { requestContext, requestPayload, responsePayload } = record as DestinationRecord;
  const payload = typeof requestPayload === 'string' ? safeJson(requestPayload) : requestPayload;
  const runId = typeof payload === 'object' && payload !== null ? ((payload as { runId?: unknown }).runId ?? (payload as { resume?: unknown }).resume) : undefined;
  if (typeof runId !== 'string') return undefined;
  const named = parseLambdaRunId(runId);
  if (!named) return undefined;
  const response = typeof responsePayload === 'object' && responsePayload !== null ? (responsePayload as { errorType?: unknown; errorMessage?: unknown }) : {};
  return {
    dispatchId: named.dispatchId,
    attempt: named.attempt,
    runId,
    errorType: text(response.errorType, 'Unhandled'),
    errorMessage: text(response.errorMessage, 'the function failed without an error message'),
    requestId: text(requestContext?.requestId, ''),
    condition: text(requestContext?.condition, ''),
    at,
  };
}

function safeJson(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    return undefined;
  }
}

/**
 * `senderId`: the SQS SenderId of the record. A record is believed only for a run of a lambda target
 * whose function it names, sent (in AWS) by a principal registered as that target: a worker cannot
 * fail another target's runs by putting a forged record on the shared queue. `redrivenFor`: the first
 * sender of a record an operator moved back from the DLQ, believed only from a registered operator.
 */
export async function takeLambdaFailure(deps: LambdaFailureDeps, record: unknown, senderId?: string, redrivenFor?: string): Promise<LambdaFailureOutcome> {
  const failure = failureOfRecord(record, deps.now().toISOString());
  if (!failure) return 'unreadable';
  const read = await deps.store.getStored(failure.dispatchId);
  // Its target even before its first run is written (the intake writes it after Invoke returns, and a function can fail before that).
  const { target, submitting } = await dispatchAsFound(deps, failure.dispatchId, read);
  if (target === undefined) return 'not_current';
  // An attempt the dispatch has not made is none of its runs: nothing kept (a kept record is what a lookup of that run reads).
  if (failure.attempt > (read?.state.attempt ?? 1)) return 'not_current';
  const registration = await deps.store.getTarget(target);
  const named = unqualified((record as { requestContext?: { functionArn?: unknown } }).requestContext?.functionArn);
  if (registration?.kind !== 'lambda' || named !== registration.functionArn) return 'refused';
  if ((deps.principalMode ?? 'enforce') === 'enforce') {
    const speaking = deps.principals ? await effectiveSender(deps.principals, 'enforce', senderId, redrivenFor) : undefined;
    const sender = speaking && deps.principals ? await resolvePrincipal(deps.principals, speaking) : undefined;
    if (sender?.role !== 'target' || sender.target !== target) {
      // Moved back by an operator: kept for the DLQ, whatever first sender it carries (the operator's own, too).
      const mover = redrivenFor !== undefined && senderId && deps.principals ? await resolvePrincipal(deps.principals, senderId) : undefined;
      return mover?.role === 'operator' ? 'refused_redriven' : 'refused';
    }
  }
  // Kept before anything else: a lookup of the run reads it, whatever the state says yet.
  await deps.store.putLambdaFailure(failure);
  // No state yet: while the intake's claim on the message holds, it is presumed to be in the Invoke call.
  if (!read) return submitting ? 'not_yet' : 'not_current';
  const updated = await updateDispatch<LambdaFailureOutcome>(
    deps.store,
    failure.dispatchId,
    (state) => {
      // The attempt it names is being submitted (a claim held, not a wait or a retry's backoff), its run not recorded yet: retried once it is.
      if (state && state.attempt === failure.attempt && submissionInFlight(state, deps.now())) return { answer: 'not_yet' };
      if (!state || state.attempt !== failure.attempt || state.runId !== failure.runId) return { answer: 'not_current' };
      if (isTerminal(state.execution.nativeStatus)) return { answer: 'already_final' };
      // CONTRACT §12: Lambda's error type is the run's nativeStatus, where it fits the bound every nativeStatus keeps.
      return { write: runFailedByRuntime(state, `${failure.errorType}: ${failure.errorMessage}`, deps.now(), NATIVE_STATUS.test(failure.errorType) ? failure.errorType : undefined), answer: 'failed' };
    },
    { first: read },
  );
  return updated.kind === 'lost' ? 'conflict' : updated.answer;
}
