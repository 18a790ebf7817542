import type { ChangeKind, DispatchState } from '../../shared/dispatch/state.js';

/**
 * Builds the next version of a state for a test fixture: the patch applied, the version advanced and
 * `kind` recorded. Product code never does this — it calls the named transitions of
 * `shared/dispatch/transitions.ts`; fixtures use it to reach a shape directly.
 */
export function advance(state: DispatchState, kind: ChangeKind, now: Date, patch: Partial<DispatchState> = {}): DispatchState {
  return { ...state, ...patch, updatedAt: now.toISOString(), changes: state.version === 0 ? [...state.changes, kind] : [kind], version: state.version + 1 };
}

/** A state the test built (version 1) written as the first version of its dispatch: a fixture seed. */
export function firstVersion(state: DispatchState): { readonly from: DispatchState; readonly next: DispatchState } {
  return { from: { ...state, version: 0 }, next: state };
}
