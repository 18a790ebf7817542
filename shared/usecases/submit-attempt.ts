import type { DispatchState } from '../dispatch/state.js';
import { blocked, submitted } from '../dispatch/transitions.js';
import { taskOf } from '../dispatch/task.js';
import { crashPoint } from '../faults.js';
import type { AcceptedMessage, DispatchWorkDeps } from '../ledger/port.js';

/**
 * The one submission sequence (intake's first try, monitor retries, redispatch): the target's
 * registration, the task (inline, in hand, or read back from the blob store), one call with the
 * attempt's Idempotency-Key, and the transition its answer means. The caller holds the dispatch
 * (`claimed`) and commits the returned state in place of it.
 *
 * Never throws for what the target or the payload store does: an unreadable payload counts against the
 * retry budget instead of holding the claim forever.
 */
export async function submitAttempt(
  deps: Pick<DispatchWorkDeps, 'store' | 'blobs' | 'targetFor' | 'callbackUrl' | 'retryPolicy' | 'now'>,
  claimed: DispatchState,
  message: AcceptedMessage | undefined,
  inHand?: Record<string, unknown>,
): Promise<DispatchState> {
  const registration = await deps.store.getTarget(claimed.target);
  if (!registration) return blocked(claimed, 'unknown_target', `no target named "${claimed.target}" is registered`, deps.now());
  if (!message?.content.valid) return blocked(claimed, 'invalid_fields', 'the accepted message is missing or invalid', deps.now());
  const { expectedEvidence } = message.content;
  const outcome = await taskOf(deps.blobs, message, inHand).then(
    (task) =>
      deps.targetFor(registration).submit({
        dispatchId: claimed.dispatchId,
        attempt: claimed.attempt,
        origin: claimed.origin,
        task,
        expectedEvidence,
        callbackUrl: deps.callbackUrl,
        timeouts: claimed.timeouts,
      }),
    (error: unknown) => ({ kind: 'unavailable' as const, reason: `the task payload could not be read: ${error instanceof Error ? error.name : 'error'}` }),
  );
  if (outcome.kind === 'accepted') crashPoint('submit.after_target_accepted', claimed.dispatchId);
  return submitted(claimed, outcome, deps.retryPolicy, deps.now());
}
