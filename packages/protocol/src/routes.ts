/**
 * Every route of the ledger's HTTP API, as data (CONTRACT §2, §10, §11, §13, §15): method, path template,
 * and who may call it. The ledger's API is served from this table (a route not
 * in it is a 404), the client calls through it, and docs/protocol.md is generated from it.
 *
 * Plain data, no schemas: the request and answer schemas are in `@dispatch-ledger/protocol/schemas`,
 * and what each route answers and does, in words, in ROUTE_DOCS (`./route-docs.ts`, which no Lambda bundle carries).
 *
 * `who`:
 * - `owner`: the origin that sent the dispatch named in the path (anyone else: 404, whether or not it exists);
 * - `origin`: the origin named in the path, and only it (anyone else: 404);
 * - `operator`: the operator role (under IAM another role gets 403; locally, a caller naming no origin);
 * - `operator_reads`: the operator may read this dispatch route too (never act on it as its origin);
 * - `target`: the registered target of the run (anyone else: 404).
 */

export type RouteCaller = 'owner' | 'origin' | 'operator' | 'operator_reads' | 'target';

export interface RouteSpec {
  readonly method: 'GET' | 'POST' | 'PUT';
  /** `{name}` is one path segment (percent-encoded); `{*name}` the rest of the path (an evidence ref). */
  readonly path: `/${string}`;
  readonly who: readonly RouteCaller[];
}

export const ROUTES = {
  getDispatch: { method: 'GET', path: '/dispatches/{dispatchId}', who: ['owner', 'operator_reads'] },
  listReceipts: { method: 'GET', path: '/dispatches/{dispatchId}/receipts', who: ['owner', 'operator_reads'] },
  listOperatorReceipts: { method: 'GET', path: '/dispatches/{dispatchId}/operator-receipts', who: ['owner', 'operator_reads'] },
  listManualAttestations: { method: 'GET', path: '/dispatches/{dispatchId}/manual-attestations', who: ['owner', 'operator_reads'] },
  listRuns: { method: 'GET', path: '/dispatches/{dispatchId}/runs', who: ['owner', 'operator_reads'] },
  decideApproval: { method: 'POST', path: '/dispatches/{dispatchId}/approval', who: ['owner'] },
  recordReceipt: { method: 'POST', path: '/dispatches/{dispatchId}/receipts', who: ['owner'] },
  redispatch: { method: 'POST', path: '/dispatches/{dispatchId}/redispatch', who: ['owner'] },
  cancel: { method: 'POST', path: '/dispatches/{dispatchId}/cancel', who: ['owner'] },
  evidenceStatus: { method: 'POST', path: '/dispatches/{dispatchId}/evidence-status', who: ['owner'] },
  attestManual: { method: 'POST', path: '/dispatches/{dispatchId}/manual', who: ['owner', 'operator'] },
  putEvidence: { method: 'PUT', path: '/dispatches/{dispatchId}/evidence/{*ref}', who: ['target'] },
  getTask: { method: 'GET', path: '/dispatches/{dispatchId}/task', who: ['target'] },
  postRunEvent: { method: 'POST', path: '/runs/{runId}/events', who: ['target'] },
  getRunControl: { method: 'GET', path: '/runs/{runId}/control', who: ['target'] },
  releaseSlot: { method: 'POST', path: '/targets/{target}/slots/release', who: ['operator'] },
  history: { method: 'GET', path: '/origins/{origin}/dispatches', who: ['origin'] },
  originRejections: { method: 'GET', path: '/origins/{origin}/rejections', who: ['origin'] },
  inboxClaim: { method: 'POST', path: '/origins/{origin}/inbox/claim', who: ['origin'] },
  inboxAck: { method: 'POST', path: '/origins/{origin}/inbox/{resultId}/ack', who: ['origin'] },
  inboxRelease: { method: 'POST', path: '/origins/{origin}/inbox/{resultId}/release', who: ['origin'] },
  inboxRenew: { method: 'POST', path: '/origins/{origin}/inbox/{resultId}/renew', who: ['origin'] },
  inboxList: { method: 'GET', path: '/origins/{origin}/inbox', who: ['origin'] },
  inboxBody: { method: 'GET', path: '/origins/{origin}/inbox/{resultId}/body', who: ['origin'] },
  listDispatches: { method: 'GET', path: '/dispatches', who: ['operator'] },
  counts: { method: 'GET', path: '/counts', who: ['operator'] },
  attention: { method: 'GET', path: '/attention', who: ['operator'] },
  rejections: { method: 'GET', path: '/rejections', who: ['operator'] },
} as const satisfies Record<string, RouteSpec>;

export type RouteName = keyof typeof ROUTES;

/**
 * The target protocol (CONTRACT §8): what the ledger calls on a target's base URL (an http target, or the
 * worker kit's server). A target answers lookups, decisions and cancels of the runs it gave ids to.
 */
export const TARGET_ROUTES = {
  submit: { method: 'POST', path: '/runs' },
  lookUp: { method: 'GET', path: '/runs/{runId}' },
  decide: { method: 'POST', path: '/runs/{runId}/approval' },
  cancel: { method: 'POST', path: '/runs/{runId}/cancel' },
} as const satisfies Record<string, Pick<RouteSpec, 'method' | 'path'>>;

export type TargetRouteName = keyof typeof TARGET_ROUTES;

/** The segments of a route's path: `{name}` → `:name` (one segment), `{*name}` → `*name` (the rest). */
export function routePattern(spec: Pick<RouteSpec, 'path'>): string[] {
  return spec.path
    .split('/')
    .slice(1)
    .map((part) => (part.startsWith('{*') ? `*${part.slice(2, -1)}` : part.startsWith('{') ? `:${part.slice(1, -1)}` : part));
}

/**
 * The path of a route with its parameters filled in, each percent-encoded (`{*name}` segment by
 * segment, so its slashes stay path separators).
 */
export function routePath(spec: Pick<RouteSpec, 'path'>, params: Readonly<Record<string, string>>): string {
  return spec.path.replace(/\{(\*?)([A-Za-z]+)\}/g, (_whole, rest: string, name: string) => {
    const value = params[name];
    if (value === undefined) throw new Error(`${spec.path} needs ${name}`);
    return rest ? value.split('/').map(encodeURIComponent).join('/') : encodeURIComponent(value);
  });
}

/**
 * The parameters of a route whose pattern (`routePattern`) the path's raw, percent-encoded segments
 * match, or undefined: `:name` captures one segment, decoded; `*name` captures the rest, still encoded
 * (an evidence ref spans segments and is validated in both forms). With `decode` left as it is, a
 * malformed escape throws URIError.
 *
 * @example
 * routeParams(routePattern(ROUTES.inboxAck), '/origins/planner/inbox/r%3A1/ack'.split('/').slice(1)) // { origin: 'planner', resultId: 'r:1' }
 */
export function routeParams(pattern: readonly string[], segments: readonly string[], decode: (segment: string) => string = decodeURIComponent): Record<string, string> | undefined {
  const params: Record<string, string> = {};
  for (const [index, part] of pattern.entries()) {
    if (part.startsWith('*')) {
      if (index >= segments.length) return undefined;
      params[part.slice(1)] = segments.slice(index).join('/');
      return params;
    }
    const segment = segments[index];
    if (segment === undefined) return undefined;
    if (part.startsWith(':')) params[part.slice(1)] = decode(segment);
    else if (part !== decode(segment)) return undefined;
  }
  return pattern.length === segments.length ? params : undefined;
}
