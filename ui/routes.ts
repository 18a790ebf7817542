import { z } from 'zod';
import { DISPATCH_ID, routeParams, routePath, routePattern, ROUTES, type RouteName } from '@dispatch-ledger/protocol';
import { readQuery } from '@dispatch-ledger/protocol/requests';
import { queryNamesOf, ROUTE_SCHEMAS, type RouteSchemas } from '@dispatch-ledger/protocol/route-schemas';

/**
 * What the status page may ask the ledger for, and nothing more. The page's server holds the
 * operator's credentials on a local port, so it relays only the routes of the protocol's table that
 * are GETs the operator may call (docs/protocol.md §2): a page (or anything else that reaches the port)
 * can never use it to cancel, redispatch, record a receipt or release a slot. Each route takes exactly
 * the query parameters the protocol names for it (a list's: its query schema, which checks their
 * values as the ledger does), bounded; anything else is refused before the ledger is called.
 */
export type ProxyDecision =
  | {
      readonly kind: 'proxy';
      readonly route: RouteName;
      readonly params: Readonly<Record<string, string>>;
      readonly query: Readonly<Record<string, string>>;
      /** The ledger path and query relayed, for logs and tests. */
      readonly path: string;
    }
  | { readonly kind: 'refused'; readonly status: 400 | 404; readonly code: string; readonly message: string };

/** The page's API prefix: `/api/attention` → `GET /attention` on the ledger. */
export const API_PREFIX = '/api';

/** The routes relayed: every GET of the table that the operator may call, with its path's segments. */
export const RELAYED = (Object.keys(ROUTES) as RouteName[])
  .filter((name) => ROUTES[name].method === 'GET' && ROUTES[name].who.some((who) => who === 'operator' || who === 'operator_reads'))
  .map((name) => ({ name, pattern: routePattern(ROUTES[name]) }));

// A query that is no list's (the view's `refresh`); a list's is checked by its schema. Opaque cursors are
// the ledger's to judge (a forged one is its 400); its schema only bounds them.
const VALUE = { refresh: z.literal('true') } as const;
const WORD = z.string().min(1).max(128);

const notAllowed = (path: string): ProxyDecision => ({ kind: 'refused', status: 404, code: 'not_found', message: `the status page does not relay ${path.slice(0, 200)}` });
const malformed = (message: string): ProxyDecision => ({ kind: 'refused', status: 400, code: 'malformed', message: message.slice(0, 300) });

/**
 * The ledger route a page request maps to, or why it is refused. `pathname` is the raw (still
 * percent-encoded) path of a GET the server received; what is relayed is rebuilt from validated
 * parts (the route's name, its decoded parameters, its documented query), never copied.
 *
 * @example
 * proxyDecision('/api/dispatches/d-1', new URLSearchParams('refresh=true'))
 * // → { kind: 'proxy', route: 'getDispatch', params: { dispatchId: 'd-1' }, query: { refresh: 'true' }, path: '/dispatches/d-1?refresh=true' }
 */
export function proxyDecision(pathname: string, search: URLSearchParams): ProxyDecision {
  if (!pathname.startsWith(`${API_PREFIX}/`)) return notAllowed(pathname);
  const segments = pathname.slice(API_PREFIX.length).split('/').slice(1);
  let found: { name: RouteName; params: Record<string, string> } | undefined;
  try {
    for (const { name, pattern } of RELAYED) {
      const params = routeParams(pattern, segments);
      if (params) found = { name, params };
    }
  } catch {
    return malformed('the path is not valid percent-encoding');
  }
  // A dispatch id by CONTRACT §1's alphabet: a path segment can never smuggle another route in.
  if (!found || (found.params['dispatchId'] !== undefined && !DISPATCH_ID.test(found.params['dispatchId']))) return notAllowed(pathname);
  const allowed = new Set(queryNamesOf(found.name));
  const schemas: RouteSchemas<unknown> = ROUTE_SCHEMAS[found.name];
  const query: Record<string, string> = {};
  for (const [name, value] of search) {
    if (Object.hasOwn(query, name)) return malformed(`query parameter "${name.slice(0, 64)}" given more than once`);
    if (!allowed.has(name)) return malformed(`unknown query parameter "${name.slice(0, 64)}" for ${ROUTES[found.name].path}`);
    const read = schemas.query ? undefined : (VALUE[name as keyof typeof VALUE] ?? WORD).safeParse(value);
    if (read && !read.success) return malformed(`${name}: ${read.error.issues[0]?.message ?? 'invalid'}`);
    query[name] = value;
  }
  const listed = schemas.query && readQuery(schemas.query(), query);
  if (listed && !listed.ok) return malformed(listed.problem);
  const rebuilt = new URLSearchParams(query).toString();
  const path = routePath(ROUTES[found.name], found.params);
  return { kind: 'proxy', route: found.name, params: found.params, query, path: rebuilt === '' ? path : `${path}?${rebuilt}` };
}
