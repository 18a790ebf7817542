import type { DispatchState } from '../dispatch/state.js';
import { parentFound, parentMissing } from '../dispatch/transitions.js';
import type { DispatchWorkDeps } from '../ledger/port.js';
import { startAttempt, type AttemptOutcome } from './submit-attempt.js';

/**
 * The parent as its child may see it: another origin's dispatch is "not in the ledger" to this one, so
 * existence never leaks across origins (the child is held, then blocked `unknown_parent`, as for none).
 */
export async function parentOf(deps: Pick<DispatchWorkDeps, 'store'>, parentDispatchId: string, origin: string): Promise<DispatchState | undefined> {
  const parent = await deps.store.getState(parentDispatchId);
  return parent && parent.origin === origin ? parent : undefined;
}

/**
 * A child held for its parent came due (CONTRACT §1 V3): the parent is looked up again (one read). Recorded
 * meanwhile → hop and maxHops derived from it, and the child is submitted the one way every dispatch is
 * (`startAttempt`); still missing → held until its next look, or blocked `unknown_parent` once
 * PARENT_WAIT_SECONDS have passed. Each step is a write conditioned on the version read, so a tick that
 * overlaps another, or a cancel that lands meanwhile, acts once.
 */
export async function resumeHeldChild(deps: DispatchWorkDeps, held: DispatchState): Promise<AttemptOutcome> {
  const parent = held.parentDispatchId ? await parentOf(deps, held.parentDispatchId, held.origin) : undefined;
  const now = deps.now();
  const next = parent ? parentFound(held, parent, now, deps.claimSeconds) : parentMissing(held, now, deps.parentWaitSeconds);
  const written = await deps.store.commit(held, next);
  if (written.kind !== 'committed') return { kind: 'conflict', existing: written.kind === 'conflict' ? written.existing : undefined };
  if (next.phase !== 'accepted' || next.waitingFor === 'parent') return { kind: 'committed', state: next };
  return startAttempt(deps, next, await deps.store.getAcceptedMessage(held.dispatchId));
}
