import { describe, expect, it } from 'vitest';
import { DUE_SHARD_KEYS, dueShardOf } from '../../shared/adapters/ledger-keys.js';
import { dueShardClaimUpdate, dueShardReleaseUpdate } from '../../shared/adapters/ledger-commands.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import type { DispatchState } from '../../shared/dispatch/state.js';
import { cancelRequested } from '../../shared/dispatch/transitions/flow.js';
import { applyRunEvent } from '../../shared/dispatch/transitions/run.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { resultClaimed } from '../../shared/dispatch/transitions/inbox.js';
import { blocked } from '../../shared/dispatch/transitions/core.js';
import { EVIDENCE_CHECKS_AT_ONCE, FAILURE_SAMPLE, monitorTick, TICK_MARGIN_SECONDS, tickBudget, type MonitorDeps } from '../../shared/usecases/monitor.js';
import type { TargetPort } from '../../shared/targets/port.js';
import { sha256Of } from '../../shared/usecases/evidence-check.js';
import { newDispatchFactory, NOW } from '../support/factories.js';
import { MemoryBlobs } from '../support/memory-blobs.js';
import { MemoryStore } from '../support/memory-store.js';

/**
 * The monitor tick under load (CONTRACT §14): shards under claims, due work paged, a bounded report,
 * a time budget. Counted on an injected clock and in-memory ports, never timed.
 */
const at = (seconds: number): Date => new Date(NOW.getTime() + seconds * 1000);

/** A running run submitted at NOW whose stall deadline (stallAfterSeconds 10 + coalescing 2) has passed by at(13). */
function stalledRun(dispatchId: string): DispatchState {
  const start = accepted(newDispatchFactory({ dispatchId, timeouts: { stallAfterSeconds: 10, approvalWaitSeconds: 20, deliveryGraceSeconds: 5 } }), NOW);
  return { ...submitted(start, { kind: 'accepted', runId: `r-${dispatchId}`, status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, NOW), dueAt: at(10).toISOString() };
}

/** `count` dispatch ids that land in `shard` of the due index. */
function idsInShard(shard: string, count: number, prefix: string): string[] {
  const ids: string[] = [];
  for (let n = 0; ids.length < count; n += 1) if (dueShardOf(`${prefix}-${n}`) === shard) ids.push(`${prefix}-${n}`);
  return ids;
}

/** A target whose runs are all still running; each lookup counted per run (and a hook to run inside it). */
function stillRunning(onLookup: (runId: string) => void | Promise<void> = () => undefined): TargetPort & { readonly lookups: Map<string, number> } {
  const lookups = new Map<string, number>();
  return {
    lookups,
    submit: async () => ({ kind: 'unavailable', reason: 'unused' }),
    lookup: async (runId) => {
      lookups.set(runId, (lookups.get(runId) ?? 0) + 1);
      await onLookup(runId);
      return { kind: 'found', run: { runId, status: 'running' } };
    },
    decideApproval: async () => ({ kind: 'not_found' }),
    cancel: async () => ({ kind: 'not_found' }),
  };
}

async function storeWith(states: readonly DispatchState[]): Promise<MemoryStore> {
  const store = new MemoryStore();
  for (const state of states) store.states.set(state.dispatchId, state);
  await store.putTarget({ name: 'demo-agent', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
  return store;
}

const depsOf = (store: MemoryStore, target: TargetPort, overrides: Partial<MonitorDeps> = {}): MonitorDeps => ({
  store,
  dueIndex: store,
  blobs: new MemoryBlobs(),
  targetFor: () => target,
  callbackUrl: 'http://127.0.0.1:9',
  retryPolicy: DEFAULT_RETRY_POLICY,
  now: () => at(13),
  claimSeconds: 60,
  pageSize: 10,
  ...overrides,
});

const stillDue = (store: MemoryStore, before: Date): number => [...store.states.values()].filter((state) => state.dueAt !== null && state.dueAt <= before.toISOString()).length;

describe('monitorTick under load', () => {
  it('skips a due shard another tick holds while that tick works on it, and acts once', async () => {
    const [shard] = DUE_SHARD_KEYS;
    if (!shard) throw new Error('the due index has shards');
    const ids = idsInShard(shard, 3, 'd-held');
    const store = await storeWith(ids.map(stalledRun));
    let second: Awaited<ReturnType<typeof monitorTick>> | undefined;
    const target = stillRunning(async () => {
      // Inside the first tick's first lookup, a second tick runs from start to end.
      if (!second) second = await monitorTick(depsOf(store, target));
    });
    const first = await monitorTick(depsOf(store, target));

    expect(second?.shards).toEqual({ worked: 0, idle: DUE_SHARD_KEYS.length - 1, held: 1, left: 0 });
    expect(second?.due).toBe(0);
    expect(first.shards.worked).toBe(1);
    expect(first.actions).toEqual({ observed: 3 });
    expect([...target.lookups.values()]).toEqual([1, 1, 1]);
    // Released at the end: the next tick may claim it.
    expect(store.dueClaims.size).toBe(0);
  });

  it('pages through more due dispatches than a page, and acts on each exactly once', async () => {
    const [shard] = DUE_SHARD_KEYS;
    if (!shard) throw new Error('the due index has shards');
    const ids = [...idsInShard(shard, 35, 'd-page'), ...Array.from({ length: 40 }, (_, n) => `d-spread-${n}`)];
    const store = await storeWith(ids.map(stalledRun));
    let pagesRead = 0;
    const duePages = store.duePages.bind(store);
    store.duePages = async function* (...args: Parameters<MemoryStore['duePages']>) {
      for await (const page of duePages(...args)) {
        pagesRead += 1;
        // Never more than a page in hand per shard.
        expect(page.length).toBeLessThanOrEqual(10);
        yield page;
      }
    };
    const target = stillRunning();
    const report = await monitorTick(depsOf(store, target));

    expect(report.due).toBe(75);
    expect(report.actions).toEqual({ observed: 75 });
    expect(target.lookups.size).toBe(75);
    expect([...target.lookups.values()].every((count) => count === 1)).toBe(true);
    expect(pagesRead).toBeGreaterThanOrEqual(4); // the 35 of one shard alone take 4 pages of 10
    expect(stillDue(store, at(13))).toBe(0);
  });

  it('counts every target under its own name, past the hundred a log line names (its metrics\' Target dimension; review fix)', async () => {
    const states = Array.from({ length: 150 }, (_, n) => ({ ...stalledRun(`d-target-${n}`), target: `agent-${n}` }));
    const store = await storeWith(states);
    for (let n = 0; n < 150; n += 1) await store.putTarget({ name: `agent-${n}`, kind: 'http', baseUrl: 'http://127.0.0.1:9' });

    const report = await monitorTick(depsOf(store, stillRunning()));

    expect(Object.keys(report.byTarget)).toHaveLength(150);
    expect(report.byTarget['agent-149']).toEqual({ observed: 1 });
    expect(Object.keys(report.byTarget).some((name) => !name.startsWith('agent-'))).toBe(false);
  });

  it('reads the evidence of at most EVIDENCE_CHECKS_AT_ONCE checks at once, however many are due side by side (review fix: 64 × 4 MB at once)', async () => {
    const ref = 'out/a.md';
    const bytes = Buffer.from('# a');
    const sha256 = sha256Of(bytes);
    const ids = Array.from({ length: 40 }, (_, n) => `d-check-${n}`);
    const store = await storeWith(
      ids.map((id) => {
        const run = stalledRun(id);
        return { ...run, execution: { ...run.execution, status: 'completed', nativeStatus: 'completed', completedAt: at(5).toISOString() }, evidence: { outcome: 'pending', expectedCount: 1, deadline: at(20).toISOString() } } satisfies DispatchState;
      }),
    );
    let reading = 0;
    let most = 0;
    const blobs = new MemoryBlobs();
    blobs.getBytes = async (key) => {
      reading += 1;
      most = Math.max(most, reading);
      // Yield, so the checks side by side all get to ask before this one answers.
      await new Promise<void>((resolve) => setImmediate(resolve));
      reading -= 1;
      return key.endsWith(ref) ? bytes : undefined;
    };
    for (const id of ids) {
      const start = store.states.get(id) as DispatchState;
      await store.putAcceptedMessage({
        dispatchId: id, origin: start.origin, contentHash: 'sha256:x', messageId: `m-${id}`, senderId: null, receivedAt: NOW.toISOString(), claimUntil: NOW.toISOString(),
        content: { valid: true, target: start.target, task: { goal: 'x' }, taskRef: null, taskPreview: null, taskBytes: 10, expectedEvidence: [ref], deliveryMode: 'callback', timeouts: start.timeouts, parentDispatchId: null, maxHops: 4 },
      });
      await store.putEvidenceUpload({ dispatchId: id, attempt: 1, ref, sha256, bytes: bytes.length, at: NOW.toISOString() });
    }

    const report = await monitorTick(depsOf(store, stillRunning(), { blobs }));

    expect(report.due).toBe(40);
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(EVIDENCE_CHECKS_AT_ONCE);
    expect(ids.every((id) => store.states.get(id)?.evidence.outcome === 'handled')).toBe(true);
  });

  it('reports counts, not dispatches: the report is the same size for 10 or 1,000 due, and names at most a sample of failures', async () => {
    const sizeOf = async (due: number, corrupt: number): Promise<{ length: number; report: Awaited<ReturnType<typeof monitorTick>> }> => {
      const store = await storeWith(Array.from({ length: due }, (_, n) => stalledRun(`d-mem-${n}`)));
      // A record that fails decoding (CorruptItemError-like: the read throws) for each of the first `corrupt`.
      const getState = store.getState.bind(store);
      store.getState = async (dispatchId) => {
        if (Number(dispatchId.split('-').pop()) < corrupt) throw new Error(`stored item D#${dispatchId} failed decoding`);
        return getState(dispatchId);
      };
      const report = await monitorTick(depsOf(store, stillRunning(), { pageSize: 50 }));
      return { length: JSON.stringify(report).length, report };
    };
    const small = await sizeOf(10, 0);
    const large = await sizeOf(1_000, 0);
    expect(large.report.actions).toEqual({ observed: 1_000 });
    // The counts have more digits; nothing else grows.
    expect(large.length - small.length).toBeLessThanOrEqual(12);

    const failing = await sizeOf(1_000, 200);
    expect(failing.report.actions).toEqual({ failed: 200, observed: 800 });
    expect(failing.report.failures).toHaveLength(FAILURE_SAMPLE);
    expect(failing.length).toBeLessThan(small.length + FAILURE_SAMPLE * 400);
  });

  it('stops taking pages when its budget is spent and leaves the rest due for the next tick (was: one tick read every due shard, however long it took)', async () => {
    const [shard] = DUE_SHARD_KEYS;
    if (!shard) throw new Error('the due index has shards');
    const ids = idsInShard(shard, 50, 'd-budget');
    const store = await storeWith(ids.map(stalledRun));
    // The injected clock: each lookup takes one second of it; nothing is timed.
    let clock = at(13);
    const target = stillRunning(() => {
      clock = new Date(clock.getTime() + 1000);
    });
    const start = clock;
    // 25 s of budget, pages of 10: the third page starts no dispatch once 25 lookups (25 s) are done,
    // but the four in flight finish; no page after it is taken.
    const report = await monitorTick(depsOf(store, target, { now: () => clock }), { stopTakingAt: at(13 + 25), claimUntil: at(13 + 120) });

    expect(report.due).toBeGreaterThanOrEqual(25);
    expect(report.due).toBeLessThan(30);
    expect(report.actions).toEqual({ observed: report.due });
    expect(report.outOfBudget).toBe(true);
    expect(stillDue(store, start)).toBe(50 - report.due);
    expect(store.dueClaims.size).toBe(0);

    // The next tick takes what was left, each once (on the first tick's start clock: what that one
    // rescheduled, a stall window after its lookup, is not due again yet).
    clock = start;
    const next = await monitorTick(depsOf(store, target, { now: () => clock }));
    expect(next.due).toBe(50 - report.due);
    expect(next.outOfBudget).toBe(false);
    expect(stillDue(store, start)).toBe(0);
    expect([...target.lookups.values()].every((count) => count === 1)).toBe(true);
  });

  it('starts the next tick with the shards a tick cut short by its budget left, so a due dispatch waits one tick, not a lap of the rotation', async () => {
    // Each tick has the budget to read 40 of the 64 due shards (the clock jumps past it at the 40th
    // read). It starts from the shard the clock's rotation names; the dispatch sits in the shard that
    // rotation puts last on the first tick.
    const period = 1;
    let clock = at(13);
    const rotation = Math.floor(clock.getTime() / (period * 1000)) % DUE_SHARD_KEYS.length;
    const last = DUE_SHARD_KEYS[(rotation + DUE_SHARD_KEYS.length - 1) % DUE_SHARD_KEYS.length];
    if (!last) throw new Error('the due index has shards');
    const [dispatchId] = idsInShard(last, 1, 'd-starved');
    if (!dispatchId) throw new Error('an id in the last shard');
    const store = await storeWith([stalledRun(dispatchId)]);
    const duePages = store.duePages.bind(store);
    let reads = 0;
    let stopAt = at(14);
    store.duePages = (...args: Parameters<MemoryStore['duePages']>) => {
      reads += 1;
      if (reads % 40 === 0) clock = stopAt;
      return duePages(...args);
    };
    const target = stillRunning();
    const cursor = {};
    const deps = (): MonitorDeps => depsOf(store, target, { now: () => clock, periodSeconds: period, shardCursor: cursor });

    const first = await monitorTick(deps(), { stopTakingAt: at(14), claimUntil: at(120) });
    expect(first.outOfBudget).toBe(true);
    expect(first.shards.left).toBeGreaterThan(0);
    expect(target.lookups.size).toBe(0);

    // The next tick, one period later, with the same budget.
    clock = at(14);
    stopAt = at(15);
    const second = await monitorTick(deps(), { stopTakingAt: at(15), claimUntil: at(121) });
    expect(second.outOfBudget).toBe(true);
    expect([...target.lookups.keys()]).toEqual([`r-${dispatchId}`]);
  });

  it('claims no shard once the budget is spent: every shard is left to the next tick', async () => {
    const store = await storeWith(Array.from({ length: 20 }, (_, n) => stalledRun(`d-late-${n}`)));
    const report = await monitorTick(depsOf(store, stillRunning()), { stopTakingAt: at(13), claimUntil: at(60) });
    expect(report.shards).toEqual({ worked: 0, idle: 0, held: 0, left: DUE_SHARD_KEYS.length });
    expect(report.due).toBe(0);
    expect(stillDue(store, at(13))).toBe(20);
  });
});

describe('tickBudget', () => {
  it('stops taking pages a margin before the next tick, and holds its claims until the invocation ends', () => {
    expect(tickBudget(at(0), 120_000, 60)).toEqual({ stopTakingAt: at(60 - TICK_MARGIN_SECONDS), claimUntil: at(120) });
  });
  it('keeps most of a short period to work in (was: a 1 s local tick, less a 10 s margin, took no page at all)', () => {
    expect(tickBudget(at(0), 120_000, 1)).toEqual({ stopTakingAt: new Date(at(0).getTime() + 750), claimUntil: at(120) });
  });
  it('stops a margin before the invocation ends when that comes first', () => {
    expect(tickBudget(at(0), 30_000, 60)).toEqual({ stopTakingAt: at(30 - TICK_MARGIN_SECONDS), claimUntil: at(30) });
    expect(tickBudget(at(0), 5_000, 60).stopTakingAt).toEqual(at(0));
  });
});

describe('every due item is moved into the future', () => {
  /** A target that never gets anywhere: lookups find the run still running (or, for `-down` runs, cannot ask), cancels and submissions cannot reach it. */
  const nowhere: TargetPort = {
    submit: async () => ({ kind: 'unavailable', reason: 'HTTP 503' }),
    lookup: async (runId) => (runId.endsWith('-down') ? { kind: 'unavailable', reason: 'HTTP 503' } : { kind: 'found', run: { runId, status: 'running' } }),
    decideApproval: async () => ({ kind: 'not_found' }),
    cancel: async () => ({ kind: 'unavailable', reason: 'HTTP 503' }),
  };

  it('writes each due dispatch at most once a tick and leaves it due after that tick, whatever it came due for (was: a claimed result past its TTL stayed due at its TTL, rewritten by every tick)', async () => {
    // Six ticks a minute apart, from an hour after the dispatches began (the origin's results live one hour).
    const first = at(3600);
    const before = new Date(first.getTime() - 1000).toISOString();
    const run = (dispatchId: string, runId = `r-${dispatchId}`) => submitted(accepted(newDispatchFactory({ dispatchId }), NOW), { kind: 'accepted', runId, status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, NOW);
    const due = (state: DispatchState): DispatchState => ({ ...state, dueAt: before });
    const waitingForApproval = (state: DispatchState, when: Date): DispatchState => {
      const outcome = applyRunEvent(state, { seq: 1, type: 'approval_requested', approvalId: 'ap-1' }, when);
      if (outcome.kind !== 'apply') throw new Error('the approval request applies');
      return outcome.next;
    };
    const quiet = run('d-quiet');
    const stopped = blocked(accepted(newDispatchFactory({ dispatchId: 'd-result-pending' }), at(3000)), 'unknown_target', 'gone', at(3000));
    const early = blocked(accepted(newDispatchFactory({ dispatchId: 'd-result-claimed' }), at(3000)), 'unknown_target', 'gone', at(3000));
    const old = blocked(accepted(newDispatchFactory({ dispatchId: 'd-result-claimed-past-ttl' }), NOW), 'unknown_target', 'gone', NOW);
    const kinds: Record<string, DispatchState> = {
      // The stall watch, with activity a moment ago: looked at again at its stall deadline.
      quiet: due({ ...quiet, execution: { ...quiet.execution, lastActivityAt: before } }),
      // Stalled: looked up (the target still runs it, or cannot be asked), then again after a backoff.
      stalled: due(run('d-stalled')),
      unobservable: due(run('d-unobservable', 'r-unobservable-down')),
      approval: due(waitingForApproval(run('d-approval'), new Date(before))),
      // A cancel its target cannot be reached for, on a run active a moment ago: asked again after a backoff.
      cancel: cancelRequested({ ...run('d-cancel'), execution: { ...quiet.execution, lastActivityAt: before }, dueAt: first.toISOString() }, { reason: 'not needed', by: 'planner' }, new Date(before)),
      resultPending: due(stopped),
      resultClaimed: due(resultClaimed(early, { claimToken: 't', leaseSeconds: 900 }, new Date(before))),
      // The defect: its TTL passed while its lease lives.
      resultClaimedPastTtl: due(resultClaimed(old, { claimToken: 't', leaseSeconds: 900 }, new Date(before))),
    };
    const store = await storeWith(Object.values(kinds));
    await store.putOriginSettings('planner', { resultTtlHours: 1 });
    const writes = new Map<string, number>();
    const commit = store.commit.bind(store);
    store.commit = async (from, next, ended) => {
      writes.set(next.dispatchId, (writes.get(next.dispatchId) ?? 0) + 1);
      return commit(from, next, ended);
    };
    for (let round = 0; round < 6; round += 1) {
      const now = new Date(first.getTime() + round * 60_000);
      writes.clear();
      await monitorTick(depsOf(store, nowhere, { now: () => now }));
      for (const [kind, { dispatchId }] of Object.entries(kinds)) {
        const state = store.states.get(dispatchId);
        expect(writes.get(dispatchId) ?? 0, `${kind}: writes in tick ${round}`).toBeLessThanOrEqual(1);
        if (state?.dueAt) expect(state.dueAt > now.toISOString(), `${kind}: due ${state.dueAt} after tick ${round} at ${now.toISOString()}`).toBe(true);
      }
    }
  });
});

describe('the due shard claim write', () => {
  it('takes a free shard, a lapsed lease on the clock of the write, or its own claim sent again, and releases only its own holder', () => {
    const claim = dueShardClaimUpdate('ledger', 'due#03', 'tick-a', at(13), at(133));
    expect(claim).toMatchObject({
      Key: { pk: 'DUECLAIM#due#03', sk: 'CLAIM' },
      UpdateExpression: 'SET holder = :holder, leaseUntil = :until',
      ConditionExpression: 'attribute_not_exists(holder) OR leaseUntil < :now OR holder = :holder',
      ExpressionAttributeValues: { ':holder': 'tick-a', ':until': at(133).toISOString(), ':now': at(13).toISOString() },
    });
    expect(dueShardReleaseUpdate('ledger', 'due#03', 'tick-a')).toMatchObject({ Key: claim.Key, UpdateExpression: 'REMOVE holder, leaseUntil', ConditionExpression: 'holder = :holder' });
  });
});
