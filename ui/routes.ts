import { z } from 'zod';
import { DISPATCH_ID } from '../shared/dispatch/ids.js';

/**
 * What the status page may ask the ledger for, and nothing more. The page's server holds the
 * operator's credentials on a local port, so it relays only these read routes (CONTRACT §2): a page
 * (or anything else that reaches the port) can never use it to cancel, redispatch, record a receipt or
 * release a slot. Each route takes exactly its own query parameters, bounded; anything else is refused
 * before the ledger is called.
 */
export type ProxyDecision =
  | { readonly kind: 'proxy'; readonly path: string }
  | { readonly kind: 'refused'; readonly status: 400 | 404; readonly code: string; readonly message: string };

/** The page's API prefix: `/api/attention` → `GET /attention` on the ledger. */
export const API_PREFIX = '/api';

// Opaque cursors are the ledger's to judge (a forged one is its 400); here they are only bounded.
const cursor = z.string().min(1).max(4096).optional();
const limit = z.string().regex(/^[1-9][0-9]{0,2}$/, 'limit must be a whole number from 1 to 999').optional();
const word = z.string().min(1).max(128).optional();

const QUERIES = {
  attention: z.strictObject({ kind: z.string().regex(/^[a-z_]{1,32}$/, 'kind must be an attention kind').optional(), limit, cursor }),
  counts: z.strictObject({}),
  dispatches: z.strictObject({ status: word, target: word, origin: word, phase: word, limit, cursor }),
  dispatch: z.strictObject({ refresh: z.literal('true').optional() }),
  page: z.strictObject({ cursor }),
  rejections: z.strictObject({ limit, cursor }),
} as const;

// DISPATCH_ID (CONTRACT §1's alphabet): a path segment can never smuggle another route in.
const DISPATCH_LISTS = new Set(['receipts', 'operator-receipts', 'manual-attestations', 'runs']);

const notAllowed = (path: string): ProxyDecision => ({ kind: 'refused', status: 404, code: 'not_found', message: `the status page does not relay ${path.slice(0, 200)}` });

/** The query as one value per name; a name given twice is refused (which one would the ledger read?). */
function singleValued(search: URLSearchParams): Record<string, string> | string {
  const query: Record<string, string> = {};
  for (const [name, value] of search) {
    if (Object.hasOwn(query, name)) return `query parameter "${name.slice(0, 64)}" given more than once`;
    query[name] = value;
  }
  return query;
}

/**
 * The ledger path a page request maps to, or why it is refused. `pathname` is the raw (still
 * percent-encoded) path of a GET the server received; the path relayed is rebuilt from validated
 * parts, never copied.
 *
 * @example
 * proxyDecision('/api/dispatches/d-1', new URLSearchParams('refresh=true'))
 * // → { kind: 'proxy', path: '/dispatches/d-1?refresh=true' }
 */
export function proxyDecision(pathname: string, search: URLSearchParams): ProxyDecision {
  if (!pathname.startsWith(`${API_PREFIX}/`)) return notAllowed(pathname);
  const segments = pathname.slice(API_PREFIX.length + 1).split('/');
  let decoded: string[];
  try {
    decoded = segments.map((segment) => decodeURIComponent(segment));
  } catch {
    return { kind: 'refused', status: 400, code: 'malformed', message: 'the path is not valid percent-encoding' };
  }
  const [head, id, list, ...beyond] = decoded;
  let schema: z.ZodType<Record<string, string | undefined>>;
  let path: string;
  if (beyond.length > 0) return notAllowed(pathname);
  if ((head === 'attention' || head === 'counts' || head === 'rejections') && id === undefined) {
    schema = QUERIES[head];
    path = `/${head}`;
  } else if (head === 'dispatches' && id === undefined) {
    schema = QUERIES.dispatches;
    path = '/dispatches';
  } else if (head === 'dispatches' && id !== undefined && DISPATCH_ID.test(id) && (list === undefined || DISPATCH_LISTS.has(list))) {
    schema = list === undefined ? QUERIES.dispatch : QUERIES.page;
    path = `/dispatches/${encodeURIComponent(id)}${list === undefined ? '' : `/${list}`}`;
  } else {
    return notAllowed(pathname);
  }
  const query = singleValued(search);
  if (typeof query === 'string') return { kind: 'refused', status: 400, code: 'malformed', message: query };
  const parsed = schema.safeParse(query);
  if (!parsed.success) {
    const problem = parsed.error.issues[0];
    const where = problem?.path.length ? `${problem.path.join('.')}: ` : '';
    return { kind: 'refused', status: 400, code: 'malformed', message: `${where}${problem?.message ?? 'invalid query'}`.slice(0, 300) };
  }
  const kept = new URLSearchParams(Object.entries(parsed.data).filter((entry): entry is [string, string] => entry[1] !== undefined));
  const rebuilt = kept.toString();
  return { kind: 'proxy', path: rebuilt === '' ? path : `${path}?${rebuilt}` };
}
