import { describe, expect, it } from 'vitest';
import { ApiError, type ApiRequest } from '../../shared/api/http.js';
import { route, type ApiDeps } from '../../shared/api/routes.js';
import { applyRunEvent, approvalDecided } from '../../shared/dispatch/transitions/run.js';
import { accepted, redispatched, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { newDispatchFactory, NOW, noTargetWork } from '../support/factories.js';
import { MemoryStore } from '../support/memory-store.js';
import { MemoryBlobs } from '../support/memory-blobs.js';

function request(overrides: Partial<ApiRequest>): ApiRequest {
  return { method: 'GET', rawPath: '/', query: {}, headers: {}, body: undefined, iamUserId: undefined, ...overrides };
}

function storeWith(dispatchId: string, origin: string): MemoryStore {
  const store = new MemoryStore();
  const state = accepted(newDispatchFactory({ dispatchId, origin, deliveryMode: 'detached' }), NOW);
  store.states.set(dispatchId, state);
  return store;
}

/** Route deps around an in-memory store; no target is ever reached in these tests. */
function apiDeps(store: MemoryStore, principals: MemoryStore, principalMode: 'open' | 'enforce'): ApiDeps {
  return {
    feeds: store,
    inbox: store,
    store,
    principals,
    principalMode,
    ...noTargetWork(() => NOW, 'no target in route tests', new MemoryBlobs()),
  };
}

async function answer(deps: ApiDeps, req: ApiRequest): Promise<{ status: number; body: unknown }> {
  try {
    const response = await route(deps, req);
    return { status: response.statusCode, body: JSON.parse(response.body) as unknown };
  } catch (error) {
    if (error instanceof ApiError) return { status: error.statusCode, body: { code: error.code } };
    throw error;
  }
}

describe('API routes', () => {
  it('serves the dispatch view to its origin (local mode: X-Ledger-Origin)', async () => {
    const deps = apiDeps(storeWith('d-1', 'planner'), new MemoryStore(), 'open');
    const { status, body } = await answer(deps, request({ rawPath: '/dispatches/d-1', headers: { 'x-ledger-origin': 'planner' } }));
    expect(status).toBe(200);
    expect(body).toMatchObject({ dispatchId: 'd-1', phase: 'accepted', ownerDelivery: { state: 'not_required' }, evidence: { outcome: 'unverified' } });
  });

  it('answers 404 to another origin and for an unknown id alike', async () => {
    const deps = apiDeps(storeWith('d-1', 'planner'), new MemoryStore(), 'open');
    const other = await answer(deps, request({ rawPath: '/dispatches/d-1', headers: { 'x-ledger-origin': 'billing' } }));
    const unknown = await answer(deps, request({ rawPath: '/dispatches/d-2', headers: { 'x-ledger-origin': 'planner' } }));
    expect([other.status, unknown.status]).toEqual([404, 404]);
  });

  it('lets the local operator (no X-Ledger-Origin: operator routes are open locally) read any dispatch, never act on one', async () => {
    const deps = apiDeps(storeWith('d-1', 'planner'), new MemoryStore(), 'open');
    const read = await answer(deps, request({ rawPath: '/dispatches/d-1' }));
    const act = await answer(deps, request({ method: 'POST', rawPath: '/dispatches/d-1/redispatch', body: Buffer.from(JSON.stringify({ reason: 'x' })) }));
    expect([read.status, act.status]).toEqual([200, 404]);
    expect((read.body as { origin: string }).origin).toBe('planner');
  });

  it('maps an IAM caller to its origin through the principal registry (enforce mode), role sessions included', async () => {
    const principals = new MemoryStore();
    principals.principals.set('AROAPLANNER', { role: 'origin', origin: 'planner' });
    principals.principals.set('AROAOPS', { role: 'operator' });
    const deps = apiDeps(storeWith('d-1', 'planner'), principals, 'enforce');

    const owner = await answer(deps, request({ rawPath: '/dispatches/d-1', iamUserId: 'AROAPLANNER:alice' }));
    // The header means nothing in AWS: only the IAM identity counts.
    const spoofed = await answer(deps, request({ rawPath: '/dispatches/d-1', iamUserId: 'AIDASTRANGER', headers: { 'x-ledger-origin': 'planner' } }));
    const operatorRejections = await answer(deps, request({ rawPath: '/rejections', iamUserId: 'AROAOPS:bob' }));
    const originRejections = await answer(deps, request({ rawPath: '/rejections', iamUserId: 'AROAPLANNER:alice' }));

    expect(owner.status).toBe(200);
    expect(spoofed.status).toBe(404);
    expect(operatorRejections.status).toBe(200);
    expect(originRejections.status).toBe(403);
  });

  it('lets the operator read any dispatch (CONTRACT §2 v2) but not act on it as its origin', async () => {
    const principals = new MemoryStore();
    principals.principals.set('AROAOPS', { role: 'operator' });
    const deps = apiDeps(storeWith('d-1', 'planner'), principals, 'enforce');
    expect((await answer(deps, request({ rawPath: '/dispatches/d-1', iamUserId: 'AROAOPS:bob' }))).status).toBe(200);
    expect((await answer(deps, request({ rawPath: '/dispatches/d-1/receipts', iamUserId: 'AROAOPS:bob' }))).status).toBe(200);
    expect((await answer(deps, request({ rawPath: '/dispatches/d-unknown', iamUserId: 'AROAOPS:bob' }))).status).toBe(404);
    const redispatch = await answer(deps, request({ method: 'POST', rawPath: '/dispatches/d-1/redispatch', iamUserId: 'AROAOPS:bob', body: Buffer.from(JSON.stringify({ reason: 'x' })) }));
    expect(redispatch.status).toBe(404);
  });

  it('answers GET /origins/{origin}/rejections to that origin alone: the X-Ledger-Origin caller locally, the mapped IAM principal in AWS (CONTRACT §15 v3)', async () => {
    const store = storeWith('d-1', 'planner');
    const refused = { messageId: 'm-1', at: NOW.toISOString(), reason: 'conflict' as const, dispatchId: 'd-1', origin: 'planner', senderId: 'AROAPLANNER:alice', bodyPreview: '{}', bodyRef: null, bodyBytes: 2 };
    await store.putRejection(refused, { origin: true, dispatch: true });
    const principals = new MemoryStore();
    principals.principals.set('AROAPLANNER', { role: 'origin', origin: 'planner' });
    principals.principals.set('AROABILLING', { role: 'origin', origin: 'billing' });
    principals.principals.set('AROAOPS', { role: 'operator' });
    const local = apiDeps(store, new MemoryStore(), 'open');
    const aws = apiDeps(store, principals, 'enforce');
    const path = '/origins/planner/rejections';

    const own = [await answer(local, request({ rawPath: path, headers: { 'x-ledger-origin': 'planner' } })), await answer(aws, request({ rawPath: path, iamUserId: 'AROAPLANNER:alice' }))];
    for (const answered of own) expect(answered).toMatchObject({ status: 200, body: { items: [{ messageId: 'm-1', reason: 'conflict', dispatchId: 'd-1' }], cursor: null } });
    const others = [
      await answer(local, request({ rawPath: path, headers: { 'x-ledger-origin': 'billing' } })),
      // Locally, the open operator (no X-Ledger-Origin) has GET /rejections, not an origin's own list.
      await answer(local, request({ rawPath: path })),
      await answer(aws, request({ rawPath: path, iamUserId: 'AROABILLING:carol' })),
      await answer(aws, request({ rawPath: path, iamUserId: 'AROAOPS:bob' })),
      await answer(aws, request({ rawPath: path, iamUserId: 'AIDASTRANGER', headers: { 'x-ledger-origin': 'planner' } })),
    ];
    expect(others.map((answered) => answered.status)).toEqual([404, 404, 404, 404, 404]);
    const view = await answer(aws, request({ rawPath: '/dispatches/d-1', iamUserId: 'AROAPLANNER:alice' }));
    expect((view.body as { conflicts: unknown }).conflicts).toEqual([{ messageId: 'm-1', at: NOW.toISOString(), reason: 'conflict' }]);
  });

  it('refuses a malformed limit, a bad percent-encoding and a method a route does not have', async () => {
    const deps = apiDeps(storeWith('d-1', 'planner'), new MemoryStore(), 'open');
    expect((await answer(deps, request({ rawPath: '/rejections', query: { limit: '0' } }))).status).toBe(400);
    expect((await answer(deps, request({ rawPath: '/rejections', query: { limit: '101' } }))).status).toBe(400);
    expect((await answer(deps, request({ rawPath: '/dispatches/%E0%A4%A' }))).status).toBe(400);
    expect((await answer(deps, request({ method: 'DELETE', rawPath: '/dispatches/d-1' }))).status).toBe(405);
    expect((await answer(deps, request({ rawPath: '/nothing/here' }))).status).toBe(404);
  });
});

describe('a completion whose evidence is already delivered (regression: it used to wait for the next monitor tick)', () => {
  async function submittedWith(dispatchId: string, delivered: readonly string[], mode: 'callback' | 'detached' = 'callback', expectedEvidence: readonly string[] = ['out/report.md', 'out/data.csv']) {
    const { takeDispatchMessage } = await import('../../shared/usecases/intake.js');
    const store = new MemoryStore();
    const blobs = new MemoryBlobs();
    await store.putTarget({ name: 'demo-agent', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
    const target = {
      submit: async () => ({ kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q-1' }) as const,
      lookup: async () => ({ kind: 'not_found' }) as const,
      decideApproval: async () => ({ kind: 'unavailable', reason: 'unused' }) as const,
      cancel: async () => ({ kind: 'unavailable', reason: 'unused' }) as const,
    };
    const deps: ApiDeps = { ...apiDeps(store, store, 'open'), blobs, targetFor: () => target };
    const body = JSON.stringify({ dispatchId, origin: 'planner', target: 'demo-agent', task: { goal: 'g' }, expectedEvidence, delivery: { mode } });
    await takeDispatchMessage({ ...deps, store, principals: store, principalMode: 'open' }, { messageId: 'm-1', body, senderId: undefined });
    for (const ref of delivered) expect((await answer(deps, request({ method: 'PUT', rawPath: `/dispatches/${dispatchId}/evidence/${ref}`, query: { runId: 'r-1' }, body: Buffer.from('content') }))).status).toBe(201);
    const version = store.written.get(dispatchId)?.version ?? -1;
    const complete = () => answer(deps, request({ method: 'POST', rawPath: '/runs/r-1/events', body: Buffer.from(JSON.stringify({ dispatchId, seq: 1, type: 'completed' })) }));
    return { store, version, complete };
  }

  it('settles it handled in the same state version, both changes recorded for the publisher', async () => {
    const { store, version, complete } = await submittedWith('d-all', ['out/report.md', 'out/data.csv']);
    expect((await complete()).status).toBe(202);
    const state = store.states.get('d-all');
    // …and the result is made in that same write (callback delivery), its expiry watched from the stall watch's due time.
    expect(store.written.get('d-all')).toEqual({ version: version + 1, changes: ['completed', 'handled', 'result_ready'] });
    expect(state).toMatchObject({ evidence: { outcome: 'handled' }, result: { state: 'pending', attempt: 1 } });
    expect(state?.receipts.at(-1)).toMatchObject({ event: 'dispatch_completed', attempt: 1, runId: 'r-1', evidenceCount: 2 });
    // With its result out the state has no room for the check's record: that is an item of its own.
    const { evidenceCheckOf } = await import('../../shared/usecases/evidence-check.js');
    expect((state && (await evidenceCheckOf(store, state)))?.files.map((file) => file.ref)).toEqual(['out/report.md', 'out/data.csv']);
    expect([...store.checks.values()]).toMatchObject([{ dispatchId: 'd-all', outcome: 'handled', found: ['out/report.md', 'out/data.csv'], missing: [] }]);
  });

  it('carries the check\'s record in the settling state write when it fits one write unit: no check item (issue 18)', async () => {
    const { store, version, complete } = await submittedWith('d-detached', ['out/report.md'], 'detached', ['out/report.md']);
    expect((await complete()).status).toBe(202);
    const state = store.states.get('d-detached');
    expect(store.written.get('d-detached')).toEqual({ version: version + 1, changes: ['completed', 'handled'] });
    expect(state).toMatchObject({ evidence: { outcome: 'handled' } });
    expect(state?.evidence.check?.files.map((file) => file.ref)).toEqual(['out/report.md']);
    expect(store.checks.size).toBe(0);
    const { evidenceCheckOf } = await import('../../shared/usecases/evidence-check.js');
    expect(state && (await evidenceCheckOf(store, state))).toMatchObject({ files: [{ ref: 'out/report.md' }], missing: [], invalid: [] });
  });

  it('leaves a completion with a file still missing to the monitor, pending, and records no check', async () => {
    const { store, version, complete } = await submittedWith('d-part', ['out/report.md']);
    expect((await complete()).status).toBe(202);
    const state = store.states.get('d-part');
    expect(store.written.get('d-part')).toEqual({ version: version + 1, changes: ['completed'] });
    expect(state).toMatchObject({ evidence: { outcome: 'pending' } });
    expect(state?.dueAt).not.toBeNull();
    expect(store.checks.size).toBe(0);
  });
});

describe('GET /runs/{runId}/control (CONTRACT §12: what a worker that cannot be called polls)', () => {
  const running = () => {
    const start = accepted(newDispatchFactory({ dispatchId: 'd-ctl', deliveryMode: 'detached' }), NOW);
    return submitted(start, { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q-1' }, DEFAULT_RETRY_POLICY, NOW);
  };

  it('answers the last approval decision of the current run, and nothing decided before', async () => {
    const store = new MemoryStore();
    const run = running();
    const asked = applyRunEvent(run, { seq: 1, type: 'approval_requested', approvalId: 'ap-1' }, NOW);
    if (asked.kind !== 'apply') throw new Error('the approval request applies');
    store.states.set('d-ctl', asked.next);
    const deps = apiDeps(store, new MemoryStore(), 'open');
    const before = await answer(deps, request({ rawPath: '/runs/r-1/control', query: { dispatchId: 'd-ctl' } }));
    expect(before).toEqual({ status: 200, body: { runId: 'r-1', dispatchId: 'd-ctl', superseded: false, cancelRequested: false, approval: null, status: 'waiting_for_approval' } });
    store.states.set('d-ctl', approvalDecided(asked.next, 'approve', NOW));
    const after = await answer(deps, request({ rawPath: '/runs/r-1/control', query: { dispatchId: 'd-ctl' } }));
    expect(after.body).toMatchObject({ superseded: false, approval: { approvalId: 'ap-1', decision: 'approve', decidedAt: NOW.toISOString() } });
  });

  it('tells a superseded run to stop, and answers 404 for a run that is none of the dispatch’s and 400 without a dispatchId', async () => {
    const store = new MemoryStore();
    store.states.set('d-ctl', redispatched(running(), { reason: 'stuck', supersede: true, claimSeconds: 60 }, NOW));
    const deps = apiDeps(store, new MemoryStore(), 'open');
    expect((await answer(deps, request({ rawPath: '/runs/r-1/control', query: { dispatchId: 'd-ctl' } }))).body).toMatchObject({ superseded: true, cancelRequested: true });
    store.states.set('d-other', submitted(accepted(newDispatchFactory({ dispatchId: 'd-other', deliveryMode: 'detached' }), NOW), { kind: 'accepted', runId: 'r-9', status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, NOW));
    expect((await answer(deps, request({ rawPath: '/runs/r-1/control', query: { dispatchId: 'd-other' } }))).status).toBe(404);
    expect((await answer(deps, request({ rawPath: '/runs/r-1/control' }))).status).toBe(400);
  });
});
