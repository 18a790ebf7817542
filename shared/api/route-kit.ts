import type * as z from 'zod/mini';
import { DISPATCH_ID } from '../dispatch/ids.js';
import type { InboxStore, LedgerFeeds, StoredState } from '../ledger/port.js';
import type { PrincipalMode, PrincipalRegistry } from '../principals/principals.js';
import { callerOrigin, isOperator, type Caller } from './caller.js';
import { ApiError, type ApiRequest, type ApiResponse } from './http.js';
import type { LifecycleDeps } from './lifecycle-routes.js';
import type { RouteSpec } from '@dispatch-ledger/protocol';

/*
 * What every group of routes shares — the API's deps, the route shape, the caller's own dispatch, a
 * list's limit and a query's parse — apart from routes.ts, which gathers the groups into the table.
 */

export interface ApiDeps extends LifecycleDeps {
  /** The lists: an origin's history, rejections, attention. */
  readonly feeds: LedgerFeeds;
  readonly principals: PrincipalRegistry;
  readonly principalMode: PrincipalMode;
  /** The results inbox (CONTRACT §10). */
  readonly inbox: InboxStore;
  readonly inboxShards?: number;
  /** Waits between the polls of an inbox long poll (tests pass a fake). */
  readonly sleep?: (ms: number) => Promise<void>;
}

/** A route of the protocol's table (`@dispatch-ledger/protocol` ROUTES: method, path, who) and how it is answered. */
export interface Route {
  readonly spec: RouteSpec;
  readonly handle: (deps: ApiDeps, request: ApiRequest, params: Record<string, string>, caller: Caller) => Promise<ApiResponse>;
}

/** The largest page any list route answers (`limit`). */
export const MAX_LIMIT = 100;

export function limitOf(request: ApiRequest, fallback = 25): number {
  const raw = request.query.limit;
  if (raw === undefined) return fallback;
  const limit = Number(raw);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw new ApiError('malformed', `limit must be an integer from 1 to ${MAX_LIMIT}`);
  return limit;
}

/**
 * A dispatch the caller owns, or 404 — the same 404 whether it does not exist or is someone else's.
 * `operatorMayRead`: the operator may read any dispatch (CONTRACT §2 v2), never act on one as its origin.
 */
export async function ownedState(deps: ApiDeps, dispatchId: string, caller: Caller, operatorMayRead = false): Promise<StoredState> {
  const notFound = new ApiError('not_found', `no dispatch ${dispatchId}`);
  if (!DISPATCH_ID.test(dispatchId)) throw notFound;
  // With its version: a route that acts on the dispatch writes on the state it read.
  const stored = await deps.store.getStored(dispatchId);
  if (stored && operatorMayRead && isOperator(caller)) return stored;
  const origin = callerOrigin(caller);
  if (!stored || origin === undefined || stored.state.origin !== origin) throw notFound;
  return stored;
}

/** A query's values through its schema (each exact); the first problem is the 400. */
export function queryOf<T>(schema: z.ZodMiniType<T>, values: Readonly<Record<string, unknown>>): T {
  const parsed = schema.safeParse(values);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new ApiError('malformed', `${String(issue?.path[0])}: ${issue?.message ?? 'not valid'}`);
}
