import { AttentionQuery, CursorQuery, HistoryQuery, InboxListQuery, PageQuery } from '@dispatch-ledger/protocol/requests';
import '@dispatch-ledger/protocol/english';
import { CONFLICTS_IN_VIEW, dispatchView, historyEntry } from '../dispatch/view.js';
import type { DispatchState } from '../dispatch/state.js';
import { newestPage } from './pages.js';
import { attentionEntry, attentionKind } from '../dispatch/attention.js';
import { ORIGIN } from '../dispatch/ids.js';
import { CorruptItemError, InvalidCursorError, type StoredState } from '../ledger/port.js';
import { getBody, getInbox, ownInbox, postClaim, postSettle } from './inbox-routes.js';
import { getRunControl, getTask, postApproval, postRedispatch, postRunEvent } from './lifecycle-routes.js';
import { refreshed } from '../usecases/run-events.js';
import { postEvidenceStatus, putEvidence } from './evidence-routes.js';
import { evidenceCheckOf } from '../usecases/evidence-check.js';
import { postOperatorReceipt } from './receipt-routes.js';
import { postCancel, postSlotRelease } from './flow-routes.js';
import { targetsAtCapacity } from '../usecases/flow.js';
import { callerOrigin, requireOperator, resolveCaller, type Caller } from './caller.js';
import { OPERATOR_LIST_ROUTES } from './operator-routes.js';
import { ownedState, queryOf, type ApiDeps, type Route } from './route-kit.js';

export type { ApiDeps, Route } from './route-kit.js';
import { MANUAL_ROUTES } from './manual-routes.js';
import { ApiError, json, type ApiRequest, type ApiResponse } from './http.js';
import { DEFAULT_LIST_LIMIT, MAX_RUN_ID_CHARS, routeParams, ROUTES, routePattern, type RouteSpec } from '@dispatch-ledger/protocol';






/** The whole view of a dispatch: every list in full (the routes page them). */
export async function fullView(deps: ApiDeps, state: DispatchState) {
  const [message, check, operatorReceipts, marks, pastAttempts, manualAttestations, conflicts] = await Promise.all([
    deps.store.getAcceptedMessage(state.dispatchId),
    evidenceCheckOf(deps.store, state),
    deps.store.listOperatorReceipts(state.dispatchId),
    deps.store.listEvidenceMarks(state.dispatchId, state.attempt),
    // Only a dispatch redispatched at least once has records of what its redispatches ended.
    state.redispatch ? deps.store.listPastAttempts(state.dispatchId) : Promise.resolve([]),
    // Only a manual dispatch has a person's attestations (CONTRACT §13) — or one redispatched since a manual round.
    state.manual || state.redispatch ? deps.store.listManualAttestations(state.dispatchId) : Promise.resolve([]),
    // Its own origin's refused messages that named it (CONTRACT §15 v3): one query, the newest 10.
    deps.store.listRefusals(state.dispatchId, state.origin, CONFLICTS_IN_VIEW),
  ]);
  return dispatchView(state, message, check, operatorReceipts, marks, pastAttempts, manualAttestations, conflicts);
}

/** The `{origin}` of a route that is that origin's alone: the caller's own, or 404 (another origin's, the operator's, none). */
function ownOrigin(params: Record<string, string>, caller: Caller): string {
  const origin = params.origin ?? '';
  if (!ORIGIN.test(origin) || callerOrigin(caller) !== origin) throw new ApiError('not_found', `no origin ${origin}`);
  return origin;
}

/** `POST /dispatches/{dispatchId}/{action}` on a dispatch of the caller's own (404 otherwise), answered by what `act` returns. */
const onOwnDispatch = (
  spec: RouteSpec,
  act: (deps: ApiDeps, stored: StoredState, request: ApiRequest, caller: Caller) => Promise<{ readonly status: number; readonly body: unknown }>,
): Route => ({
  spec,
  handle: async (deps, request, params, caller) => {
    const answer = await act(deps, await ownedState(deps, params.dispatchId ?? '', caller), request, caller);
    return json(answer.status, answer.body);
  },
});


/** The lists of a dispatch view that are paged (CONTRACT §2 v2), each also at `GET /dispatches/{id}/{kebab-case name}`. */
const PAGED_LISTS = [
  ['receipts', ROUTES.listReceipts],
  ['operatorReceipts', ROUTES.listOperatorReceipts],
  ['manualAttestations', ROUTES.listManualAttestations],
  ['runs', ROUTES.listRuns],
] as const;

const SERVED_ROUTES: readonly Route[] = [
  ...OPERATOR_LIST_ROUTES,
  ...MANUAL_ROUTES,
  {
    spec: ROUTES.getDispatch,
    handle: async (deps, request, params, caller) => {
      const stored = await ownedState(deps, params.dispatchId ?? '', caller, true);
      const state = request.query.refresh === 'true' ? await refreshed(deps, stored) : stored.state;
      const view = await fullView(deps, state);
      // The view stays small whatever the history: the newest entries of each list, the rest paged.
      const pages = PAGED_LISTS.map(([list]) => [list, newestPage<unknown>(list, view[list], undefined)] as const);
      return json(200, { ...view, ...Object.fromEntries(pages.map(([list, page]) => [list, page.items])), more: Object.fromEntries(pages.map(([list, page]) => [list, page.more])) });
    },
  },
  ...PAGED_LISTS.map(
    ([list, spec]): Route => ({
      spec,
      handle: async (deps, request, params, caller) => {
        const { cursor } = queryOf(CursorQuery(), request);
        const view = await fullView(deps, (await ownedState(deps, params.dispatchId ?? '', caller, true)).state);
        const page = newestPage<unknown>(list, view[list], cursor);
        return json(200, { items: page.items, cursor: page.more });
      },
    }),
  ),
  onOwnDispatch(ROUTES.decideApproval, (deps, state, request) => postApproval(deps, state, request.body)),
  onOwnDispatch(ROUTES.recordReceipt, (deps, stored, request, caller) => postOperatorReceipt(deps, stored.state, request.body, { caller, principalId: request.iamUserId })),
  onOwnDispatch(ROUTES.redispatch, (deps, state, request) => postRedispatch(deps, state, request.body)),
  onOwnDispatch(ROUTES.cancel, (deps, state, request, caller) => postCancel(deps, state, request.body, { caller, principalId: request.iamUserId })),
  {
    spec: ROUTES.releaseSlot,
    handle: async (deps, request, params, caller) => {
      const answer = await postSlotRelease(deps, params.target ?? '', request.body, { caller, principalId: request.iamUserId });
      return json(answer.status, answer.body);
    },
  },
  onOwnDispatch(ROUTES.evidenceStatus, (deps, stored, request) => postEvidenceStatus(deps, stored.state, request.body)),
  {
    spec: ROUTES.putEvidence,
    handle: async (deps, request, params, caller) => {
      const answer = await putEvidence(deps, params.dispatchId ?? '', params.ref ?? '', request, caller);
      return json(answer.status, answer.body);
    },
  },
  {
    spec: ROUTES.postRunEvent,
    handle: async (deps, request, params, caller) => {
      const answer = await postRunEvent(deps, params.runId ?? '', request.body, caller);
      return json(answer.status, answer.body);
    },
  },
  {
    spec: ROUTES.getTask,
    handle: async (deps, request, params, caller) => {
      const answer = await getTask(deps, params.dispatchId ?? '', request.query.runId, caller);
      return json(answer.status, answer.body);
    },
  },
  {
    spec: ROUTES.getRunControl,
    handle: async (deps, request, params, caller) => {
      const answer = await getRunControl(deps, params.runId ?? '', request.query.dispatchId, caller);
      return json(answer.status, answer.body);
    },
  },
  {
    spec: ROUTES.history,
    handle: async (deps, request, params, caller) => {
      const origin = ownOrigin(params, caller);
      const { limit = DEFAULT_LIST_LIMIT, ...query } = queryOf(HistoryQuery(), request);
      const page = await deps.feeds.listOriginDispatches(origin, { ...query, limit });
      return json(200, { items: page.items.map(historyEntry), cursor: page.cursor });
    },
  },
  {
    spec: ROUTES.originRejections,
    // That origin's own refused messages (CONTRACT §15 v3); anyone else — another origin, the operator — 404.
    handle: async (deps, request, params, caller) => {
      const { limit = DEFAULT_LIST_LIMIT, cursor } = queryOf(PageQuery(), request);
      return json(200, await deps.feeds.listOriginRejections(ownOrigin(params, caller), { limit, cursor }));
    },
  },
  {
    spec: ROUTES.inboxClaim,
    handle: async (deps, request, params, caller) => postClaim(deps, ownInbox(params.origin ?? '', caller), request.body),
  },
  ...([
    ['ack', ROUTES.inboxAck],
    ['release', ROUTES.inboxRelease],
    ['renew', ROUTES.inboxRenew],
  ] as const).map(
    ([action, spec]): Route => ({
      spec,
      handle: async (deps, request, params, caller) => postSettle(deps, ownInbox(params.origin ?? '', caller), params.resultId ?? '', action, request),
    }),
  ),
  {
    spec: ROUTES.inboxList,
    handle: async (deps, request, params, caller) => {
      const { limit = DEFAULT_LIST_LIMIT, state, cursor } = queryOf(InboxListQuery(), request);
      return getInbox(deps, ownInbox(params.origin ?? '', caller), { state, limit, cursor });
    },
  },
  {
    spec: ROUTES.inboxBody,
    handle: async (deps, _request, params, caller) => getBody(deps, ownInbox(params.origin ?? '', caller), params.resultId ?? ''),
  },
  {
    spec: ROUTES.attention,
    handle: async (deps, request) => {
      const { kind, limit = DEFAULT_LIST_LIMIT, cursor } = queryOf(AttentionQuery(), request);
      // Targets at capacity (CONTRACT §11) lead the first page: a target, not a dispatch, needs a look.
      const targets = (kind === undefined || kind === 'at_capacity') && cursor === undefined ? await targetsAtCapacity(deps.store) : [];
      if (kind === 'at_capacity') return json(200, { items: targets, cursor: null });
      const page = await deps.feeds.listAttention({ kind, limit, cursor });
      // The index is a moment behind: each entry says why it is listed from the state itself.
      const items = page.items.flatMap((state) => {
        const now = attentionKind(state);
        return now ? [attentionEntry(state, now)] : [];
      });
      return json(200, { items: [...targets, ...items], cursor: page.cursor });
    },
  },
  {
    spec: ROUTES.rejections,
    handle: async (deps, request) => {
      const { limit = DEFAULT_LIST_LIMIT, cursor } = queryOf(PageQuery(), request);
      const page = await deps.feeds.listRejections({ limit, cursor });
      return json(200, page);
    },
  },
];

/** Every route the API serves, one per entry of the protocol's table (test/unit/route-table.test.ts), with its path's segments. */
export const SERVED: ReadonlyArray<{ readonly candidate: Route; readonly pattern: readonly string[] }> = SERVED_ROUTES.map((candidate) => ({ candidate, pattern: routePattern(candidate.spec) }));

/** Routes a request. Throws ApiError for answers given on purpose; anything else is a bug (500). */
export async function route(deps: ApiDeps, request: ApiRequest): Promise<ApiResponse> {
  // Empty segments are kept: `a//b` in an evidence ref must be seen (and refused), not collapsed.
  const segments = request.rawPath.split('/').slice(1);
  let candidates: Array<{ candidate: Route; params: Record<string, string> | undefined }>;
  try {
    candidates = SERVED.map(({ candidate, pattern }) => ({ candidate, params: routeParams(pattern, segments) })).filter((entry) => entry.params);
  } catch {
    throw new ApiError('malformed', 'the path is not valid percent-encoding');
  }
  if (candidates.length === 0) throw new ApiError('not_found', `no route for ${request.method} ${request.rawPath}`);
  const found = candidates.find((entry) => entry.candidate.spec.method === request.method);
  if (!found?.params) throw new ApiError('method_not_allowed', `${request.method} is not allowed on ${request.rawPath}`);
  // A run id in the path is bounded like one in a body (CONTRACT §17: up to 1,024 characters, `/` allowed).
  const { runId } = found.params;
  if (runId !== undefined && (runId.length === 0 || runId.length > MAX_RUN_ID_CHARS)) throw new ApiError('malformed', `a run id is 1..${MAX_RUN_ID_CHARS} characters`);
  const caller = await resolveCaller(request, deps.principalMode, deps.principals);
  // The table says who may call: an operator route is refused here, before its handler reads anything.
  if (found.candidate.spec.who.length === 1 && found.candidate.spec.who[0] === 'operator') requireOperator(caller);
  try {
    return await found.candidate.handle(deps, request, found.params, caller);
  } catch (error) {
    // A record that fails decoding is reported as what it is (and never cast into an answer).
    if (error instanceof CorruptItemError) throw new ApiError('audit_failure', `a stored record failed validation: ${error.problem}`, { key: error.key });
    // Whichever list read it (every list's cursor is checked where it is decoded): 400, never a 500.
    if (error instanceof InvalidCursorError) throw new ApiError('malformed', error.message);
    throw error;
  }
}
