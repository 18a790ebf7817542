import * as z from 'zod/mini';
import '../zod-english.js';
import { EXECUTION_BUCKETS, PHASES } from '../dispatch/counts.js';
import { ORIGIN, TARGET_NAME } from '../dispatch/ids.js';
import { historyEntry } from '../dispatch/view.js';
import { ROUTES } from '@dispatch-ledger/protocol';
import { json, type ApiRequest } from './http.js';
import { limitOf, queryOf, type Route } from './routes.js';
import { lazy } from '../lazy.js';

/**
 * The operator's lists (CONTRACT §2 v2): `GET /dispatches` (every origin's dispatches, newest first)
 * and `GET /counts` (counts by phase, execution status and evidence outcome).
 */

/** The filters of `GET /dispatches`, each exact; `status` also takes `none` (never submitted), as `GET /counts` names it. */
const ListQuery = /* @__PURE__ */ lazy(() => z.object({
  status: z.optional(z.enum(EXECUTION_BUCKETS as [string, ...string[]])),
  phase: z.optional(z.enum(PHASES as [string, ...string[]])),
  target: z.optional(z.string().check(z.regex(TARGET_NAME))),
  origin: z.optional(z.string().check(z.regex(ORIGIN))),
}));

function filterOf(request: ApiRequest) {
  const { status, phase, target, origin } = request.query;
  return queryOf(ListQuery(), { status, phase, target, origin });
}

export const OPERATOR_LIST_ROUTES: readonly Route[] = [
  {
    spec: ROUTES.listDispatches,
    handle: async (deps, request) => {
      const filter = filterOf(request);
      const page = await deps.feeds.listDispatches({ limit: limitOf(request), cursor: request.query.cursor, filter });
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
