import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTE_DOCS, ROUTES, type RouteName } from '@dispatch-ledger/protocol';
import { queryValues } from '@dispatch-ledger/protocol/requests';
import { ROUTE_SCHEMAS, queryNamesOf, type RouteSchemas } from '@dispatch-ledger/protocol/route-schemas';
import { LedgerValidationError } from '@dispatch-ledger/client';
import { ApiError, type ApiRequest } from '../../shared/api/http.js';
import { route, type ApiDeps } from '../../shared/api/routes.js';
import { accepted } from '../../shared/dispatch/transitions/lifecycle.js';
import { newDispatchFactory, NOW, noTargetWork } from '../support/factories.js';
import { MemoryBlobs } from '../support/memory-blobs.js';
import { MemoryStore } from '../support/memory-store.js';
import { startFakeLedger, type FakeLedger } from '../support/fake-ledger.js';

/*
 * A list's query has one home, its schema in the protocol (docs/protocol.md §2, §10, §15): the ledger reads
 * the query string with it and the client checks a query with it before sending, so they agree.
 * Regression: only the history and the operator list had a query schema. The other lists' `limit` was
 * bounded by a second spelling in the API (`limitOf`, its own MAX_LIMIT), their `kind` and `state` by
 * hand, and the client sent `limit: 500`, an unknown `kind` or `state` to the ledger, which answered 400;
 * the client's own check of the history refused `limit: "5"` as text, which the ledger takes.
 */

/** The routes whose answer is a page (`{ items, cursor }`). */
const LISTS = (Object.keys(ROUTE_SCHEMAS) as RouteName[]).filter((name) => {
  const answer = ROUTE_SCHEMAS[name].answer as unknown as { readonly def: { readonly shape?: Record<string, unknown> } };
  return answer.def.shape?.['items'] !== undefined;
});

describe('a list query has one home', () => {
  it('gives every list a query schema with its cursor, and names no route’s query twice', () => {
    expect(LISTS.length).toBeGreaterThanOrEqual(10);
    for (const name of LISTS) {
      const schemas: RouteSchemas<unknown> = ROUTE_SCHEMAS[name];
      expect(schemas.query, name).toBeDefined();
      expect(queryNamesOf(name), name).toContain('cursor');
    }
    for (const name of Object.keys(ROUTES) as RouteName[]) {
      const schemas: RouteSchemas<unknown> = ROUTE_SCHEMAS[name];
      expect(schemas.query !== undefined && ROUTE_DOCS[name].query !== undefined, name).toBe(false);
    }
    expect(queryNamesOf('attention')).toEqual(['kind', 'limit', 'cursor']);
    expect(queryNamesOf('getDispatch')).toEqual(['refresh']);
  });
});

/** Route deps around an in-memory store holding one dispatch, `d-1` of `planner`. */
function apiDeps(): ApiDeps {
  const store = new MemoryStore();
  store.states.set('d-1', accepted(newDispatchFactory({ dispatchId: 'd-1', origin: 'planner', deliveryMode: 'detached' }), NOW));
  return { feeds: store, inbox: store, store, principals: new MemoryStore(), principalMode: 'open', ...noTargetWork(() => NOW, 'no target in query tests', new MemoryBlobs()) };
}

/** Each list's path, called as `planner` where the list is an origin's or a dispatch's, as the operator otherwise. */
const PATHS: Partial<Record<RouteName, { readonly path: string; readonly origin?: string }>> = {
  listReceipts: { path: '/dispatches/d-1/receipts', origin: 'planner' },
  listOperatorReceipts: { path: '/dispatches/d-1/operator-receipts', origin: 'planner' },
  listManualAttestations: { path: '/dispatches/d-1/manual-attestations', origin: 'planner' },
  listRuns: { path: '/dispatches/d-1/runs', origin: 'planner' },
  history: { path: '/origins/planner/dispatches', origin: 'planner' },
  originRejections: { path: '/origins/planner/rejections', origin: 'planner' },
  inboxList: { path: '/origins/planner/inbox', origin: 'planner' },
  listDispatches: { path: '/dispatches' },
  attention: { path: '/attention' },
  rejections: { path: '/rejections' },
};

/** Values each query field may be sent with, good and bad, as a query string carries them. */
const TRIED: Readonly<Record<string, readonly string[]>> = {
  limit: ['1', '25', '100', '0', '101', '500', 'abc', '2.5', ''],
  cursor: ['c'.repeat(4_097), ''],
  kind: ['unknown', 'at_capacity', 'redriven', 'nonsense', 'UNKNOWN'],
  state: ['pending', 'claimed', 'delivered', 'dropped', 'lost'],
  status: ['running', 'unknown', 'none', 'finished', 'done'],
  phase: ['accepted', 'finished', 'nope'],
  target: ['beta', 'Not A Target'],
  origin: ['planner', 'UPPER'],
};

async function statusOf(deps: ApiDeps, path: string, origin: string | undefined, query: Record<string, string>): Promise<number> {
  const request: ApiRequest = { method: 'GET', rawPath: path, query, headers: origin ? { 'x-ledger-origin': origin } : {}, body: undefined, iamUserId: undefined };
  try {
    return (await route(deps, request)).statusCode;
  } catch (error) {
    if (error instanceof ApiError) return error.statusCode;
    throw error;
  }
}

describe('the ledger reads a list query as the protocol’s schema does', () => {
  it('answers 400 to exactly the values the schema refuses, field by field, on every list', async () => {
    const deps = apiDeps();
    let tried = 0;
    for (const name of LISTS) {
      const at = PATHS[name];
      expect(at, `a path for ${name}`).toBeDefined();
      if (!at) continue;
      const schema = ROUTE_SCHEMAS[name] as RouteSchemas<unknown>;
      for (const field of queryNamesOf(name)) {
        for (const value of TRIED[field] ?? []) {
          const query = { [field]: value };
          const refused = !schema.query?.().safeParse(queryValues(query)).success;
          const status = await statusOf(deps, at.path, at.origin, query);
          expect(status, `${name} ${field}=${value.slice(0, 20)}`).toBe(refused ? 400 : 200);
          tried += 1;
        }
      }
    }
    expect(tried).toBeGreaterThan(60);
  });
});

describe('a list query refused in words', () => {
  it('says a limit that is no number is not a number (was: "expected number, got number", NaN being a number)', async () => {
    const answer = await route(apiDeps(), { method: 'GET', rawPath: '/rejections', query: { limit: 'abc' }, headers: {}, body: undefined, iamUserId: undefined }).catch((error: unknown) => error);
    expect(answer).toBeInstanceOf(ApiError);
    expect((answer as ApiError).message).toBe('limit: not a number');
  });
});

describe('the client refuses what the ledger would refuse, and sends what it takes', () => {
  let ledger: FakeLedger;
  beforeAll(async () => {
    ledger = await startFakeLedger(() => ({ status: 200, body: { items: [], cursor: null } }));
  });
  afterAll(async () => ledger.stop());

  it('never sends a list query the ledger answers 400', async () => {
    const { client } = ledger;
    const refused = [
      () => client.rejections.page({ limit: 500 }),
      () => client.operator.rejections.page({ limit: 0 }),
      () => client.operator.list.page({ limit: 101 }),
      () => client.inbox.list.page({ limit: 2.5 }),
      () => client.runs.page('d-1', { cursor: 'c'.repeat(4_097) }),
      () => client.operator.attention.page({ limit: 0 }),
      () => client.raw('attention', { as: 'operator', query: { kind: 'nonsense' } }),
      () => client.raw('inboxList', { params: { origin: 'planner' }, query: { state: 'lost' } }),
      () => client.raw('rejections', { as: 'operator', query: { limit: '500' } }),
    ];
    for (const call of refused) await expect(call()).rejects.toBeInstanceOf(LedgerValidationError);
    expect(ledger.seen).toEqual([]);
  });

  it('sends a limit given as text, as the ledger reads it (a CLI or the status page passes one on)', async () => {
    const { client } = ledger;
    const sent = ledger.seen.length;
    for (const name of ['history', 'originRejections', 'inboxList'] as const) expect((await client.raw(name, { params: { origin: 'planner' }, query: { limit: '5' } })).status).toBe(200);
    expect((await client.raw('attention', { as: 'operator', query: { kind: 'at_capacity', limit: '100' } })).status).toBe(200);
    // An empty cursor is the first page, as the lists have always read it (a shell loop's first pass sends one).
    expect((await client.raw('rejections', { as: 'operator', query: { cursor: '' } })).status).toBe(200);
    expect(ledger.seen.slice(sent)).toEqual([
      'GET /origins/planner/dispatches?limit=5',
      'GET /origins/planner/rejections?limit=5',
      'GET /origins/planner/inbox?limit=5',
      'GET /attention?kind=at_capacity&limit=100',
      'GET /rejections?cursor=',
    ]);
  });
});
