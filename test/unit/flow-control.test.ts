import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { allotSlotCaps, nextAdmission, slotShardCaps, slotTotals, type SlotShard, type WaitingEntry } from '../../shared/dispatch/slots.js';
import type { DispatchState } from '../../shared/dispatch/state.js';
import type { LookupOutcome } from '../../shared/dispatch/target-answers.js';
import { admitted, cancelledBeforeSubmission, cancelRequested, slotReleased, waiting } from '../../shared/dispatch/transitions/flow.js';
import { applyRunEvent, monitorStep } from '../../shared/dispatch/transitions/run.js';
import { accepted, redispatched, submissionClaimed, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import type { AcceptedMessage } from '../../shared/dispatch/records.js';
import type { SubmitRequest, TargetPort } from '../../shared/targets/port.js';
import { cancelDispatch } from '../../shared/usecases/flow.js';
import { monitorTick, type MonitorDeps } from '../../shared/usecases/monitor.js';
import { MemoryBlobs } from '../support/memory-blobs.js';
import { admitWaiting, startAttempt } from '../../shared/usecases/submit-attempt.js';
import { newDispatchFactory, NOW, overriding } from '../support/factories.js';
import { MemoryStore } from '../support/memory-store.js';
import { notStored, type StoredState } from '../../shared/ledger/port.js';

const later = (seconds: number): Date => new Date(NOW.getTime() + seconds * 1000);

describe('slot shards (CONTRACT §11)', () => {
  it('split any limit into caps that sum exactly to it, each at least 1, at most 32 shards — and a lower limit over existing shards sums to it too', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_000 }), fc.integer({ min: 0, max: 32 }), (limit, existing) => {
        const caps = slotShardCaps(limit, existing);
        expect(caps.reduce((sum, cap) => sum + cap, 0)).toBe(limit);
        expect(caps.length).toBeLessThanOrEqual(32);
        expect(caps.length).toBeGreaterThanOrEqual(existing);
        // Shards beyond the limit drain at cap 0; the others take at least one.
        expect(caps.filter((cap) => cap > 0)).toHaveLength(Math.min(caps.length, limit));
      }),
    );
    expect(slotShardCaps(1)).toEqual([1]);
    expect(slotShardCaps(8, 3)).toEqual([3, 3, 2]);
  });

  it('allot a changed limit from what each shard holds: whenever any shard can take, Σ max(held, cap) ≤ the limit and the caps sum to it', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_000 }), fc.array(fc.integer({ min: 0, max: 400 }), { maxLength: 32 }), (limit, held) => {
        const caps = allotSlotCaps(limit, held);
        const total = held.reduce((sum, count) => sum + count, 0);
        if (caps === undefined) {
          // Drains: more in flight than the limit, and no allotment could hold it.
          expect(total).toBeGreaterThan(limit);
          return;
        }
        expect(total).toBeLessThanOrEqual(limit);
        expect(caps.reduce((sum, cap) => sum + cap, 0)).toBe(limit);
        expect(caps.length).toBeGreaterThanOrEqual(held.length);
        caps.forEach((cap, shard) => expect(cap).toBeGreaterThanOrEqual(held[shard] ?? 0));
        expect(caps.reduce((sum, cap, shard) => sum + Math.max(cap, held[shard] ?? 0), 0)).toBeLessThanOrEqual(limit);
        // Where the holds allow, the even spread itself.
        const even = slotShardCaps(limit, held.length);
        if (even.every((cap, shard) => (held[shard] ?? 0) <= cap)) expect(caps).toEqual(even);
      }),
    );
    expect(allotSlotCaps(9, [8])).toEqual([8, 1]);
    expect(allotSlotCaps(33, [8, 8, 8, 8])).toEqual([8, 8, 8, 8, 1]);
    expect(allotSlotCaps(3, [5, 4])).toBeUndefined();
    expect(allotSlotCaps(1, [0, 0, 0])).toEqual([1, 0, 0]);
  });

  it('date a full target from the last of its shards to fill (its last take or allotment), and give no date while a slot is free', () => {
    const shard = (over: Partial<SlotShard> & Pick<SlotShard, 'shard' | 'cap' | 'held'>): SlotShard => ({ unknownHeld: 0, lastOrigin: null, ...over });
    const full = [
      shard({ shard: 0, cap: 2, held: 2, takenAt: '2026-12-01T10:00:05.000Z', allottedAt: '2026-12-01T09:00:00.000Z' }),
      shard({ shard: 1, cap: 1, held: 1, takenAt: '2026-12-01T10:00:02.000Z', allottedAt: '2026-12-01T09:00:00.000Z' }),
    ];
    expect(slotTotals(full).fullSince).toBe('2026-12-01T10:00:05.000Z');
    // A lowered limit filled it: the allotment is the moment.
    expect(slotTotals([{ ...full[0]!, cap: 1, allottedAt: '2026-12-01T11:00:00.000Z' }, full[1]!]).fullSince).toBe('2026-12-01T11:00:00.000Z');
    expect(slotTotals([full[0]!, { ...full[1]!, held: 0 }]).fullSince).toBeNull();
    // Shards written before the stamps were kept: no date rather than a wrong one.
    expect(slotTotals([full[0]!, shard({ shard: 1, cap: 1, held: 1 })]).fullSince).toBeNull();
  });

  it('pick the highest priority, then the next origin after the last admitted (wrapping), then its oldest', () => {
    const entry = (dispatchId: string, origin: string, priority: number, second: number): WaitingEntry => ({ dispatchId, origin, priority, createdAt: later(second).toISOString() });
    const waitingNow = [entry('a2', 'alpha', 5, 2), entry('a1', 'alpha', 5, 1), entry('b1', 'beta', 5, 3), entry('low', 'gamma', 1, 0)];
    expect(nextAdmission(waitingNow, null)?.dispatchId).toBe('a1');
    expect(nextAdmission(waitingNow, 'alpha')?.dispatchId).toBe('b1');
    expect(nextAdmission(waitingNow, 'beta')?.dispatchId).toBe('a1');
    expect(nextAdmission([...waitingNow, entry('high', 'zeta', 9, 9)], 'beta')?.dispatchId).toBe('high');
    expect(nextAdmission([entry('low', 'gamma', 1, 0)], 'zeta')?.dispatchId).toBe('low');
  });
});

describe('a cancel racing a submission', () => {
  const TARGET = 'limited-agent';
  const message = (dispatchId: string): AcceptedMessage => ({
    dispatchId,
    origin: 'planner',
    contentHash: 'sha256:x',
    messageId: 'm-1',
    senderId: null,
    receivedAt: NOW.toISOString(),
    claimUntil: later(60).toISOString(),
    content: { valid: true, target: TARGET, task: { goal: 'x' }, taskRef: null, taskPreview: null, taskBytes: 10, expectedEvidence: [], deliveryMode: 'callback', timeouts: { stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 }, parentDispatchId: null, maxHops: 4 },
  });

  it('keeps the run a submission under way made: recorded submitted with the cancel pending (asked of the target next), its slot held until the target says', async () => {
    const store = new MemoryStore();
    await store.putTarget({ name: TARGET, kind: 'http', baseUrl: 'http://127.0.0.1:9', maxConcurrentRuns: 1 });
    const start = accepted(newDispatchFactory({ dispatchId: 'd-race', target: TARGET }), NOW);
    const cancels: string[] = [];
    let clock = NOW;
    const deps = {
      store,
      blobs: { put: async () => undefined, getText: async () => '', getBytes: async () => undefined },
      callbackUrl: 'http://127.0.0.1:9',
      retryPolicy: DEFAULT_RETRY_POLICY,
      now: () => clock,
      claimSeconds: 60,
      targetFor: (): TargetPort => ({
        // The origin cancels while the target is creating the run.
        submit: async (request: SubmitRequest) => {
          const held = await store.getStored(request.dispatchId);
          if (!held) throw new Error('the claim is stored before the call');
          clock = later(1);
          expect((await cancelDispatch(deps, held, { reason: 'changed my mind', by: 'local:planner' })).kind).toBe('requested');
          return { kind: 'accepted', runId: 'r-race', status: 'running', requestId: 'q' };
        },
        lookup: async () => ({ kind: 'not_found' }),
        decideApproval: async () => ({ kind: 'not_found' }),
        cancel: async (runId: string) => {
          cancels.push(runId);
          return { kind: 'cancelled', status: 'cancelled' };
        },
      }),
    };
    const outcome = await startAttempt(deps, notStored(start), message('d-race'));
    expect(outcome.kind).toBe('committed');
    const stored = (await store.getState('d-race')) as DispatchState;
    // The run is the ledger's to watch, its slot held, the cancel due to be asked now.
    expect(stored).toMatchObject({ phase: 'submitted', runId: 'r-race', slot: { shard: 0 }, cancel: { reason: 'changed my mind' } });
    expect(stored.dueAt).toBe(stored.cancel?.nextAskAt);
    expect((await store.slotShards(TARGET))[0]?.held).toBe(1);
    expect(cancels).toEqual([]);
  });

  it('ends a dispatch cancelled while its submission failed as never submitted, its slot given back', async () => {
    const store = new MemoryStore();
    await store.putTarget({ name: TARGET, kind: 'http', baseUrl: 'http://127.0.0.1:9', maxConcurrentRuns: 1 });
    const start = accepted(newDispatchFactory({ dispatchId: 'd-race-2', target: TARGET }), NOW);
    const deps = {
      store,
      blobs: { put: async () => undefined, getText: async () => '', getBytes: async () => undefined },
      callbackUrl: 'http://127.0.0.1:9',
      retryPolicy: DEFAULT_RETRY_POLICY,
      now: () => later(1),
      claimSeconds: 60,
      targetFor: (): TargetPort => ({
        submit: async (request: SubmitRequest) => {
          const held = await store.getStored(request.dispatchId);
          if (held) await cancelDispatch(deps, held, { reason: 'stop', by: 'local:planner' });
          return { kind: 'unavailable', reason: 'connection refused' };
        },
        lookup: async () => ({ kind: 'not_found' }),
        decideApproval: async () => ({ kind: 'not_found' }),
        cancel: async () => ({ kind: 'not_found' }),
      }),
    };
    await startAttempt(deps, notStored(start), message('d-race-2'));
    expect(await store.getState('d-race-2')).toMatchObject({ phase: 'cancelled' });
    expect((await store.getState('d-race-2'))?.slot).toBeUndefined();
    expect((await store.slotShards(TARGET))[0]?.held).toBe(0);
  });
});

describe('a cancel asked of a submitted run', () => {
  it('is asked of the target once: the monitor holds off while the API asks (was: due at once, the monitor asked beside the API, twice for one request)', () => {
    const run = submitted(admitted(accepted(newDispatchFactory({ dispatchId: 'd-ask' }), NOW), 0, NOW, 60), { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, NOW);
    const asked = cancelRequested(run, { reason: 'stop', by: 'local:planner' }, later(1), 60);
    expect(asked.cancel?.nextAskAt).toBe(later(61).toISOString());
    expect(monitorStep(asked, later(2)).kind).not.toBe('cancel');
    // The API died before recording the target's answer: the monitor asks once the hold is over.
    expect(monitorStep(asked, later(61)).kind).toBe('cancel');
    // A cancel no one asks right away (its submission still under way) is due at once.
    expect(cancelRequested(run, { reason: 'stop', by: 'local:planner' }, later(1)).cancel?.nextAskAt).toBe(later(1).toISOString());
  });
});

describe('a cancel the target accepted but has not ended', () => {
  /** A run submitted at NOW (stall window 600 s), cancelled at later(10); its target accepts the stop, and each lookup answers `look(second)`. */
  async function cancelledRun(dispatchId: string, look: (second: number, runId: string) => LookupOutcome) {
    const store = new MemoryStore();
    await store.putTarget({ name: 'demo-sfn', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
    const run = submitted(accepted(newDispatchFactory({ dispatchId, target: 'demo-sfn' }), NOW), { kind: 'accepted', runId: `r-${dispatchId}`, status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, NOW);
    store.states.set(dispatchId, run);
    // What each write said it changed (the events the publisher derives follow from it).
    const changes: string[] = [];
    const commit = store.commit.bind(store);
    store.commit = async (from, next, ended) => {
      changes.push(...next.changes);
      return commit(from, next, ended);
    };
    let clock = later(10);
    const lookups: number[] = [];
    const target: TargetPort = {
      submit: async () => ({ kind: 'unavailable', reason: 'unused' }),
      lookup: async (runId) => {
        const second = (clock.getTime() - NOW.getTime()) / 1000;
        lookups.push(second);
        return look(second, runId);
      },
      decideApproval: async () => ({ kind: 'not_found' }),
      cancel: async () => ({ kind: 'requested', how: 'StopExecution was accepted; the execution has not ended yet' }),
    };
    const deps: MonitorDeps = { store, dueIndex: store, blobs: new MemoryBlobs(), targetFor: () => target, callbackUrl: 'http://127.0.0.1:9', retryPolicy: DEFAULT_RETRY_POLICY, now: () => clock, claimSeconds: 60, pageSize: 10 };
    const stored = await store.getStored(dispatchId);
    if (!stored) throw new Error('stored');
    expect(await cancelDispatch(deps, stored, { reason: 'not needed', by: 'local:planner' })).toMatchObject({ kind: 'requested', asked: true });
    /** The monitor ticking once a second from later(from) to later(to); every state it left, in order. */
    const seen: DispatchState[] = [];
    const tick = async (from: number, to: number) => {
      for (let second = from; second <= to; second += 1) {
        clock = later(second);
        await monitorTick(deps);
        const state = await store.getState(dispatchId);
        if (state) seen.push(state);
      }
    };
    return { store, lookups, tick, seen, changes };
  }
  const running = (runId: string): LookupOutcome => ({ kind: 'found', run: { runId, status: 'running' } });
  const endedAt = (end: number) => (second: number, runId: string): LookupOutcome => (second >= end ? { kind: 'found', run: { runId, status: 'cancelled' } } : running(runId));

  it('is looked up again within seconds, its end recorded as the answer to the cancel (was: only at the stall window, ten minutes later, with no status-change event locally)', async () => {
    const { store, lookups, tick, changes } = await cancelledRun('d-stopping', endedAt(13));
    await tick(11, 30);
    expect(await store.getState('d-stopping')).toMatchObject({ execution: { status: 'cancelled' }, cancel: { answer: 'the target says cancelled' } });
    // Recorded as the target's word on the cancel (Run Cancelled), not as an end found by chance (Run Recovered).
    expect(changes).toContain('cancelled');
    expect(changes).not.toContain('recovered');
    expect(lookups.every((second) => second <= 20)).toBe(true);
  });

  it('is looked up ever less often while it runs on, a handful of times within one stall window of the cancel, never called stalled or unknown in it', async () => {
    const { store, lookups, tick, seen } = await cancelledRun('d-slow-stop', (_second, runId) => running(runId));
    await tick(11, 590);
    expect(lookups.length).toBeGreaterThanOrEqual(3);
    expect(lookups.length).toBeLessThanOrEqual(10);
    // Each look waits at least as long as the cancel has been pending (it was asked at second 10).
    lookups.slice(1).forEach((second, n) => expect(second - (lookups[n] ?? 0)).toBeGreaterThanOrEqual((lookups[n] ?? 0) - 10));
    expect(lookups.every((second) => second <= 610)).toBe(true);
    expect(seen.every((state) => state.execution.status === 'running' && state.execution.monitorStatus === null)).toBe(true);
    const last = await store.getState('d-slow-stop');
    expect(last).toMatchObject({ execution: { status: 'running', monitorStatus: null } });
    // Past that window a run that shows activity (heartbeats) is watched as any other, not looked up once a window for ever (review).
    if (!last) throw new Error('stored');
    expect(monitorStep({ ...last, execution: { ...last.execution, lastActivityAt: later(900).toISOString() } }, later(1000)).kind).toBe('write');
  });

  it('concludes nothing from a look that could not be made or found no run: looked at again, its end then recorded (review: a 503 made it unknown, and the looks stopped)', async () => {
    const { store, lookups, tick, seen } = await cancelledRun('d-flaky', (second, runId) => (second < 15 ? { kind: 'unavailable', reason: 'HTTP 503' } : second < 20 ? { kind: 'not_found' } : endedAt(20)(second, runId)));
    await tick(11, 60);
    expect(lookups.filter((second) => second < 20).length).toBeGreaterThanOrEqual(2);
    expect(seen.filter((state) => state.execution.status !== 'cancelled').every((state) => state.execution.status === 'running' && state.execution.monitorStatus === null)).toBe(true);
    expect(await store.getState('d-flaky')).toMatchObject({ execution: { status: 'cancelled' } });
  });
});

describe('a redispatch starts its attempt afresh', () => {
  it('leaves the ended attempt\'s cancel, slot release and wait behind (the new run is not cancelled by the old request)', () => {
    const start = accepted(newDispatchFactory({ dispatchId: 'd-again' }), NOW);
    const held = admitted(start, 0, NOW, 60);
    const run = submitted(held, { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, NOW);
    const asked = cancelRequested(run, { reason: 'stop', by: 'local:planner' }, later(1));
    const again = redispatched(asked, { reason: 'try again', supersede: true, claimSeconds: 60 }, later(2));
    expect(again).toMatchObject({ attempt: 2 });
    expect([again.cancel, again.slot, again.waitingFor]).toEqual([undefined, undefined, undefined]);
    const queued = redispatched(waiting(accepted(newDispatchFactory({ dispatchId: 'd-wait' }), NOW), 'capacity', NOW), { reason: 'nudge', supersede: false, claimSeconds: 60 }, later(1));
    expect(queued.waitingFor).toBeUndefined();
  });
});

describe("a person's reason (cancel, slot release, redispatch)", () => {
  it('is kept whole up to the 500 characters the API takes (was: cut to 300 or 120 without a word)', () => {
    const reason = `${'why '.repeat(124)}end.`; // 500 characters
    expect(reason).toHaveLength(500);
    const fresh = accepted(newDispatchFactory({ dispatchId: 'd-why' }), NOW);
    const run = submitted(admitted(fresh, 0, NOW, 60), { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, NOW);
    const asked = { reason, by: 'local:planner' };

    expect(cancelledBeforeSubmission(fresh, asked, later(1)).cancel?.reason).toBe(reason);
    expect(cancelRequested(run, asked, later(1)).cancel?.reason).toBe(reason);
    expect(slotReleased(run, asked, later(1)).slotRelease?.reason).toBe(reason);
    expect(redispatched(run, { reason, supersede: true, claimSeconds: 60 }, later(1)).redispatch?.reason).toBe(reason);
    // Still made printable, and never longer than the bound, whatever reaches the transition.
    expect(cancelRequested(run, { ...asked, reason: `a\u202eb${'x'.repeat(600)}` }, later(1)).cancel?.reason).toMatch(/^a bx+…$/);
    expect(cancelRequested(run, { ...asked, reason: 'y'.repeat(600) }, later(1)).cancel?.reason).toHaveLength(500);
  });
});

describe('the registry alone sets a limit', () => {
  const message = (dispatchId: string, target: string): AcceptedMessage => ({
    dispatchId,
    origin: 'planner',
    contentHash: 'sha256:x',
    messageId: `m-${dispatchId}`,
    senderId: null,
    receivedAt: NOW.toISOString(),
    claimUntil: later(60).toISOString(),
    content: { valid: true, target, task: { goal: 'x' }, taskRef: null, taskPreview: null, taskBytes: 10, expectedEvidence: [], deliveryMode: 'callback', timeouts: { stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 }, parentDispatchId: null, maxHops: 4 },
  });
  const depsOf = (store: MemoryStore) => ({
    store,
    blobs: { put: async () => undefined, getText: async () => '', getBytes: async () => undefined },
    callbackUrl: 'http://127.0.0.1:9',
    retryPolicy: DEFAULT_RETRY_POLICY,
    now: () => NOW,
    claimSeconds: 60,
    targetFor: (): TargetPort => ({
      submit: async (request: SubmitRequest) => ({ kind: 'accepted', runId: `r-${request.dispatchId}`, status: 'running', requestId: 'q' }),
      lookup: async () => ({ kind: 'not_found' }),
      decideApproval: async () => ({ kind: 'not_found' }),
      cancel: async () => ({ kind: 'not_found' }),
    }),
  });

  it('never lets a stale cached registration raise the caps a lower limit set', async () => {
    const memory = new MemoryStore();
    await memory.putTarget({ name: 'lowered', kind: 'http', baseUrl: 'http://127.0.0.1:9', maxConcurrentRuns: 1 });
    // A container still caching the old registration (limit 10).
    const store = overriding(memory, { getTarget: async () => ({ name: 'lowered', kind: 'http' as const, baseUrl: 'http://127.0.0.1:9', maxConcurrentRuns: 10 }) });
    const deps = { ...depsOf(memory), store };
    for (const id of ['d-low-1', 'd-low-2']) await startAttempt(deps, notStored(accepted(newDispatchFactory({ dispatchId: id, target: 'lowered' }), NOW)), message(id, 'lowered'));
    expect((await memory.slotShards('lowered')).map((shard) => shard.cap)).toEqual([1]);
    expect((await memory.getState('d-low-1'))?.phase).toBe('submitted');
    expect((await memory.getState('d-low-2'))?.waitingFor).toBe('capacity');
  });

  it('admits nothing once a tick\'s budget is spent, and admits the waiting when there is budget (review fix: admissions ran past it)', async () => {
    const memory = new MemoryStore();
    await memory.putTarget({ name: 'limited', kind: 'http', baseUrl: 'http://127.0.0.1:9', maxConcurrentRuns: 1 });
    const deps = depsOf(memory);
    for (const id of ['d-budget-1', 'd-budget-2']) {
      await memory.putAcceptedMessage(message(id, 'limited'));
      await startAttempt(deps, notStored(accepted(newDispatchFactory({ dispatchId: id, target: 'limited' }), NOW)), message(id, 'limited'));
    }
    expect((await memory.getState('d-budget-2'))?.waitingFor).toBe('capacity');
    // The slot comes free: the first run ends.
    const first = (await memory.getStored('d-budget-1')) as StoredState;
    const ended = applyRunEvent(first.state, { seq: 1, type: 'failed' }, NOW);
    if (ended.kind !== 'apply') throw new Error(`the failure was not applied: ${ended.kind}`);
    expect((await memory.commit(first, ended.next)).kind).toBe('committed');

    expect(await admitWaiting(deps, 'limited', 10, NOW)).toBe(0);
    expect((await memory.getState('d-budget-2'))?.waitingFor).toBe('capacity');
    expect(await admitWaiting(deps, 'limited', 10, later(1))).toBe(1);
    expect((await memory.getState('d-budget-2'))?.phase).toBe('submitted');
  });

  it('blocks the waiting of a target no longer registered rather than leaving them waiting for nothing', async () => {
    const store = new MemoryStore();
    const start = accepted(newDispatchFactory({ dispatchId: 'd-orphaned-wait', target: 'gone' }), NOW);
    await store.commit(notStored(start), waiting(start, 'capacity', NOW));
    expect(await admitWaiting(depsOf(store), 'gone')).toBe(0);
    expect(await store.getState('d-orphaned-wait')).toMatchObject({ phase: 'blocked', blockedCode: 'unknown_target' });
  });

  it('takes a dispatch out of the wait once it is claimed (a claim that then fails is a retry, not a waiter)', () => {
    const start = accepted(newDispatchFactory({ dispatchId: 'd-due', notBefore: NOW.toISOString() }), NOW);
    const claimed = submissionClaimed(waiting(start, 'not_before', NOW), later(1), 60);
    expect(claimed.waitingFor).toBeUndefined();
    const retry = submitted(claimed, { kind: 'unavailable', reason: 'down' }, DEFAULT_RETRY_POLICY, later(2));
    expect(retry.waitingFor).toBeUndefined();
    expect(retry.submission.nextRetryAt).not.toBeNull();
  });
});
