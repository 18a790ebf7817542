import type { DispatchState } from '../dispatch/state.js';
import type { DispatchWorkDeps } from '../ledger/port.js';
import { notRegistered } from '../targets/port.js';
import { type LookupOutcome } from '../dispatch/target-answers.js';

/**
 * Asks the target about the dispatch's current run (the monitor's stall watch and a refresh alike).
 * A target no longer registered cannot be asked: that is an unavailable lookup, never a verdict.
 */
export async function lookUpRun(deps: Pick<DispatchWorkDeps, 'store' | 'targetFor'>, state: DispatchState): Promise<LookupOutcome> {
  const registration = await deps.store.getTarget(state.target);
  if (!registration || !state.runId) return { kind: 'unavailable', reason: notRegistered(state.target) };
  const submittedAt = state.receipts.findLast((receipt) => receipt.event === 'dispatch_submitted' && receipt.attempt === state.attempt)?.at;
  return deps.targetFor(registration).lookup(state.runId, { submittedAt });
}
