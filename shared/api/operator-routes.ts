import { OperatorListQuery } from '@dispatch-ledger/protocol/requests';
import '@dispatch-ledger/protocol/english';
import { historyEntry } from '../dispatch/view.js';
import { DEFAULT_LIST_LIMIT, ROUTES } from '@dispatch-ledger/protocol';
import { json } from './http.js';
import { queryOf, type Route } from './route-kit.js';

/**
 * The operator's lists (CONTRACT §2 v2): `GET /dispatches` (every origin's dispatches, newest first)
 * and `GET /counts` (counts by phase, execution status and evidence outcome).
 */

export const OPERATOR_LIST_ROUTES: readonly Route[] = [
  {
    spec: ROUTES.listDispatches,
    handle: async (deps, request) => {
      const { limit = DEFAULT_LIST_LIMIT, cursor, ...filter } = queryOf(OperatorListQuery(), request);
      const page = await deps.feeds.listDispatches({ limit, cursor, filter });
      return json(200, { items: page.items.map((state) => ({ ...historyEntry(state), origin: state.origin })), cursor: page.cursor });
    },
  },
  {
    spec: ROUTES.counts,
    handle: async (deps) => {
      // Kept by the publisher from the table's stream: a moment behind the states, like the events.
      const counts = await deps.feeds.readCounts();
      return json(200, { ...counts, asOf: deps.now().toISOString() });
    },
  },
];
