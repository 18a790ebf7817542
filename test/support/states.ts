import { isNextState, type ChangeKind, type DispatchState, type NextState } from '../../shared/dispatch/state.js';

/**
 * Builds the next state for a test fixture: the patch applied and `kind` recorded, with the product's
 * rule (`shared/dispatch/transitions/core.ts` `advance`): a state a transition already made in this write
 * (a `NextState`) adds to its changes, a state read from the store starts them. Product code never does
 * this — it calls the named transitions of `shared/dispatch/transitions.ts`; fixtures use it to reach a
 * shape directly. The version is the repository's, never the state's.
 */
export function advance(state: DispatchState, kind: ChangeKind, now: Date, patch: Partial<DispatchState> = {}): NextState {
  return {
    ...state,
    ...patch,
    updatedAt: now.toISOString(),
    changes: isNextState(state) ? [...state.changes, kind] : [kind],
    dueAtRead: isNextState(state) ? state.dueAtRead : state.dueAt,
  };
}
