import type * as z from 'zod/mini';
import { readQuery } from '@dispatch-ledger/protocol/requests';
import { DISPATCH_ID } from '../dispatch/ids.js';
import type { InboxStore, LedgerFeeds, StoredState } from '../ledger/port.js';
import type { PrincipalMode, PrincipalRegistry } from '../principals/principals.js';
import { callerOrigin, isOperator, type Caller } from './caller.js';
import { ApiError, type ApiRequest, type ApiResponse } from './http.js';
import type { LifecycleDeps } from './lifecycle-routes.js';
import type { RouteSpec } from '@dispatch-ledger/protocol';

/*
 * What every group of routes shares — the API's deps, the route shape, the caller's own dispatch and a
 * list's query — apart from routes.ts, which gathers the groups into the table.
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

/**
 * A list's query, read with its protocol schema (`@dispatch-ledger/protocol/requests`, the client checks
 * with the same): the fields the schema names, `limit` as a number; any other parameter is not read. The first problem is the 400.
 */
export function queryOf<S extends z.ZodMiniObject>(schema: S, request: ApiRequest): z.output<S> {
  const named = Object.keys(schema.shape).flatMap((name) => (request.query[name] === undefined ? [] : [[name, request.query[name]] as const]));
  const read = readQuery(schema, Object.fromEntries(named));
  if (!read.ok) throw new ApiError('malformed', read.problem);
  return read.query;
}
