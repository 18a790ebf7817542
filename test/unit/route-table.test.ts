import { describe, expect, it } from 'vitest';
import { ROUTE_DOCS, ROUTES, routePath, routePattern, type RouteName } from '@dispatch-ledger/protocol';
import { SERVED } from '../../shared/api/routes.js';

/**
 * CONTRACT §15: the API's routes are the protocol's table — every entry served exactly once, and
 * nothing served that the table does not name (a path not in it is a 404).
 */
describe('the route table (@dispatch-ledger/protocol ROUTES)', () => {
  it('is what the API serves: each entry once, nothing else', () => {
    const served = SERVED.map(({ candidate }) => `${candidate.spec.method} ${candidate.spec.path}`).sort();
    const table = Object.values(ROUTES).map((spec) => `${spec.method} ${spec.path}`).sort();
    expect(served).toEqual(table);
    expect(new Set(table).size).toBe(table.length);
    // Served from the table's own entries, not copies of them.
    const entries = new Set<object>(Object.values(ROUTES));
    expect(SERVED.every(({ candidate }) => entries.has(candidate.spec))).toBe(true);
  });

  it('names every path parameter once and says who may call each route and what it answers', () => {
    for (const name of Object.keys(ROUTES) as RouteName[]) {
      const spec = ROUTES[name];
      const doc = ROUTE_DOCS[name];
      const params = routePattern(spec).filter((part) => part.startsWith(':') || part.startsWith('*'));
      expect(new Set(params).size, name).toBe(params.length);
      expect(spec.who.length, name).toBeGreaterThan(0);
      expect(doc.summary.length, name).toBeGreaterThan(0);
      expect(doc.ok.every((status) => status >= 200 && status < 300), name).toBe(true);
      expect(doc.errors.every((status) => status >= 400 && status < 600), name).toBe(true);
    }
  });

  it('fills a path template, percent-encoding each parameter and keeping a ref’s slashes as separators', () => {
    expect(routePath(ROUTES.getDispatch, { dispatchId: 'd 1/x' })).toBe('/dispatches/d%201%2Fx');
    expect(routePath(ROUTES.putEvidence, { dispatchId: 'd-1', ref: 'out/report #1.md' })).toBe('/dispatches/d-1/evidence/out/report%20%231.md');
    expect(routePath(ROUTES.inboxAck, { origin: 'planner', resultId: 'r:1' })).toBe('/origins/planner/inbox/r%3A1/ack');
    expect(() => routePath(ROUTES.inboxAck, { origin: 'planner' })).toThrow(/needs resultId/);
    expect(routePattern(ROUTES.putEvidence)).toEqual(['dispatches', ':dispatchId', 'evidence', '*ref']);
  });
});
