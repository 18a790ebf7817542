import type { DispatchState } from '../dispatch/state.js';
import { blocked, parentFound, parentMissing } from '../dispatch/transitions.js';
import type { DispatchWorkDeps } from '../ledger/port.js';
import { startAttempt, type AttemptOutcome } from './submit-attempt.js';

/**
 * The parent as its child may see it (CONTRACT §1 V3):
 * - `recorded`: its hop is known, so the child's is derived from it;
 * - `pending`: not in the ledger yet, or recorded but itself held for its own parent (its hop is a
 *   placeholder until then) — the child is held too, at least as long as the parent may be (`until`);
 * - `unknown`: blocked `unknown_parent`, so its lineage is never known — the child is blocked the same way.
 * Another origin's dispatch is "not in the ledger" to this one, so existence never leaks across origins.
 */
export type ParentLookup =
  | { readonly kind: 'recorded'; readonly parent: DispatchState }
  | { readonly kind: 'pending'; readonly heldSince?: string }
  | { readonly kind: 'unknown'; readonly detail: string };

export async function parentOf(deps: Pick<DispatchWorkDeps, 'store'>, parentDispatchId: string, origin: string): Promise<ParentLookup> {
  const parent = await deps.store.getState(parentDispatchId);
  if (!parent || parent.origin !== origin) return { kind: 'pending' };
  if (parent.phase === 'accepted' && parent.waitingFor === 'parent') return { kind: 'pending', heldSince: parent.createdAt };
  if (parent.phase === 'blocked' && parent.blockedCode === 'unknown_parent') {
    return { kind: 'unknown', detail: `parent ${parentDispatchId} was blocked unknown_parent: its lineage is not known` };
  }
  return { kind: 'recorded', parent };
}

/** What a child does with its parent's lookup: derive its hop, stay held, or be blocked. */
export function childAfter(child: DispatchState, lookup: ParentLookup, now: Date, deps: Pick<DispatchWorkDeps, 'claimSeconds' | 'parentWaitSeconds'>): DispatchState {
  if (lookup.kind === 'recorded') return parentFound(child, lookup.parent, now, deps.claimSeconds);
  if (lookup.kind === 'unknown') return blocked(child, 'unknown_parent', lookup.detail, now);
  return parentMissing(child, now, deps.parentWaitSeconds, lookup.heldSince);
}

/**
 * A child held for its parent came due (CONTRACT §1 V3): the parent is looked up again (one read). Recorded
 * meanwhile → hop and maxHops derived from it, and the child is submitted the one way every dispatch is
 * (`startAttempt`); still missing → held until its next look, or blocked `unknown_parent` once
 * PARENT_WAIT_SECONDS have passed. Each step is a write conditioned on the version read, so a tick that
 * overlaps another, or a cancel that lands meanwhile, acts once.
 */
export async function resumeHeldChild(deps: DispatchWorkDeps, held: DispatchState): Promise<AttemptOutcome> {
  const lookup: ParentLookup = held.parentDispatchId ? await parentOf(deps, held.parentDispatchId, held.origin) : { kind: 'pending' };
  const next = childAfter(held, lookup, deps.now(), deps);
  const written = await deps.store.commit(held, next);
  if (written.kind !== 'committed') return { kind: 'conflict', existing: written.kind === 'conflict' ? written.existing : undefined };
  if (next.phase !== 'accepted' || next.waitingFor === 'parent') return { kind: 'committed', state: next };
  return startAttempt(deps, next, await deps.store.getAcceptedMessage(held.dispatchId));
}
