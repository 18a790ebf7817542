import type { DispatchState } from './state.js';

/**
 * The filters of the operator's list (CONTRACT §2 v2 `GET /dispatches`): each exact, all of those given
 * at once. `status` is `execution.status`, `none` for a dispatch never submitted (as `GET /counts` names it).
 */
export interface DispatchFilter {
  readonly status?: string | undefined;
  readonly phase?: string | undefined;
  readonly target?: string | undefined;
  readonly origin?: string | undefined;
}

export const isFiltered = (filter: DispatchFilter): boolean => Object.values(filter).some((value) => value !== undefined);

export function matchesFilter(state: DispatchState, filter: DispatchFilter): boolean {
  return (
    (filter.status === undefined || (state.execution.status ?? 'none') === filter.status) &&
    (filter.phase === undefined || state.phase === filter.phase) &&
    (filter.target === undefined || state.target === filter.target) &&
    (filter.origin === undefined || state.origin === filter.origin)
  );
}
