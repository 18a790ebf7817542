import type { DispatchState, NextState } from '../dispatch/state.js';
import { lineageDerived, parentFound, parentMissing } from '../dispatch/transitions/lifecycle.js';
import { blocked } from '../dispatch/transitions/core.js';
import type { DispatchWorkDeps, StoredState } from '../ledger/port.js';
import { commitStep, startAttempt, type AttemptOutcome } from './submit-attempt.js';

/**
 * The parent as its child may see it (CONTRACT §1 V3):
 * - `recorded`: its hop is derived, so the child's is derived from it;
 * - `pending`: not in the ledger yet, or recorded but itself still held for its own parent
 *   (`parentHeld`): the child is held too, and gives up no sooner than the parent can;
 * - `unknown`: recorded, but its hop was never derived and never will be (blocked `unknown_parent`, or
 *   cancelled while it was held) — the child is blocked `unknown_parent`.
 * Another origin's dispatch is "not in the ledger" to this one, so existence never leaks across origins.
 */
export type ParentLookup =
  | { readonly kind: 'recorded'; readonly parent: DispatchState }
  | { readonly kind: 'pending'; readonly parentHeld: boolean }
  | { readonly kind: 'unknown'; readonly detail: string };

export async function parentOf(deps: Pick<DispatchWorkDeps, 'store'>, parentDispatchId: string, origin: string): Promise<ParentLookup> {
  const parent = await deps.store.getState(parentDispatchId);
  if (!parent || parent.origin !== origin) return { kind: 'pending', parentHeld: false };
  if (parent.phase === 'accepted' && parent.waitingFor === 'parent') return { kind: 'pending', parentHeld: true };
  if (!lineageDerived(parent)) return { kind: 'unknown', detail: `parent ${parentDispatchId} never had its own parent recorded: its lineage is not known` };
  return { kind: 'recorded', parent };
}

/** What a child does with its parent's lookup: derive its hop, stay held, or be blocked. */
export function childAfter(child: DispatchState, lookup: ParentLookup, now: Date, deps: Pick<DispatchWorkDeps, 'claimSeconds' | 'parentWaitSeconds'>): NextState {
  if (lookup.kind === 'recorded') return parentFound(child, lookup.parent, now, deps.claimSeconds);
  if (lookup.kind === 'unknown') return blocked(child, 'unknown_parent', lookup.detail, now);
  return parentMissing(child, now, deps.parentWaitSeconds, lookup.parentHeld);
}

/**
 * A child held for its parent came due (CONTRACT §1 V3): the parent is looked up again (one read). Recorded
 * meanwhile → hop and maxHops derived from it, and the child is submitted the one way every dispatch is
 * (`startAttempt`); still missing → held until its next look, or blocked `unknown_parent` once
 * PARENT_WAIT_SECONDS have passed. Each step is a write conditioned on the version read, so a tick that
 * overlaps another, or a cancel that lands meanwhile, acts once.
 */
export async function resumeHeldChild(deps: DispatchWorkDeps, from: StoredState): Promise<AttemptOutcome> {
  const held = from.state;
  const lookup: ParentLookup = held.parentDispatchId ? await parentOf(deps, held.parentDispatchId, held.origin) : { kind: 'pending', parentHeld: false };
  const written = await commitStep(deps, from, childAfter(held, lookup, deps.now(), deps));
  if (written.kind !== 'committed') return written;
  const next = written.state;
  if (next.phase !== 'accepted' || next.waitingFor === 'parent') return written;
  return startAttempt(deps, written, await deps.store.getAcceptedMessage(held.dispatchId));
}
