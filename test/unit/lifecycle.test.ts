import { describe, expect, it } from 'vitest';
import { applyRunEvent, approvalWaitLookedUp, approvalWatchAt, MAX_LOOKUP_BACKOFF_SECONDS, monitorStep, reconcileLookup, runRedriven } from '../../shared/dispatch/transitions/run.js';
import { attentionKind } from '../../shared/dispatch/attention.js';
import { finished } from '../../shared/dispatch/transitions/core.js';
import { redispatched } from '../../shared/dispatch/transitions/lifecycle.js';
import { blocked } from '../../shared/dispatch/transitions/core.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { nativeStatusOf, stateOnly, type DispatchState } from '../../shared/dispatch/state.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { monitorTick, type MonitorDeps } from '../../shared/usecases/monitor.js';
import type { TargetPort } from '../../shared/targets/port.js';
import type { LookupOutcome } from '../../shared/dispatch/target-answers.js';
import { newDispatchFactory, NOW } from '../support/factories.js';
import { MemoryStore } from '../support/memory-store.js';
import { MemoryBlobs } from '../support/memory-blobs.js';

const at = (seconds: number): Date => new Date(NOW.getTime() + seconds * 1000);

/** A running run (stall window 10 s) submitted at NOW, as stored (its first heartbeat a write of its own). */
function running(): DispatchState {
  const start = accepted(newDispatchFactory({ timeouts: { stallAfterSeconds: 10, approvalWaitSeconds: 20, deliveryGraceSeconds: 5 } }), NOW);
  const sub = submitted(start, { kind: 'accepted', runId: 'r-1', status: 'queued', requestId: 'q-1' }, DEFAULT_RETRY_POLICY, NOW);
  const first = applyRunEvent(stateOnly(sub), { seq: 1, type: 'heartbeat' }, NOW);
  if (first.kind !== 'apply') throw new Error('the first heartbeat applies');
  return stateOnly(first.next);
}

describe('applyRunEvent', () => {
  it('coalesces heartbeats inside a fifth of the stall window, and writes the next one after it', () => {
    const state = running();
    expect(applyRunEvent(state, { seq: 2, type: 'heartbeat' }, at(1)).kind).toBe('coalesced');
    const later = applyRunEvent(state, { seq: 3, type: 'heartbeat' }, at(2.5));
    expect(later.kind).toBe('apply');
  });

  it('ignores older and repeated seqs and anything after a terminal status', () => {
    const state = running();
    expect(applyRunEvent(state, { seq: 1, type: 'completed' }, at(3)).kind).toBe('stale');
    const done = applyRunEvent(state, { seq: 5, type: 'completed', result: { summary: 'ok' } }, at(3));
    if (done.kind !== 'apply') throw new Error('completion applies');
    expect(applyRunEvent(done.next, { seq: 9, type: 'failed' }, at(4)).kind).toBe('stale');
    expect(done.next.execution).toMatchObject({ status: 'completed', nativeStatus: 'completed', result: { summary: 'ok' } });
    // A callback dispatch's result keeps the due time the index already holds (its expiry is watched from then).
    expect(done.next.changes).toEqual(['completed', 'result_ready']);
    expect(done.next.dueAt).toBe(state.dueAt);
  });

  it('clears a stall when activity comes back, and requires an approvalId for approval requests', () => {
    const stalled = reconcileLookup(running(), { kind: 'found', run: { runId: 'r-1', status: 'running' } }, at(11), true);
    if (!stalled) throw new Error('a stall is recorded');
    const back = applyRunEvent(stalled, { seq: 2, type: 'heartbeat' }, at(12));
    expect(back.kind === 'apply' && back.next.execution).toMatchObject({ status: 'running', monitorStatus: null });
    expect(applyRunEvent(running(), { seq: 2, type: 'approval_requested' }, at(1)).kind).toBe('invalid');
  });
});

describe('a final status in the target\'s own words (CONTRACT V3 §2)', () => {
  it('keeps a final event\'s nativeStatus beside the status the state machine reads, and defaults to the event type', () => {
    const restarted = applyRunEvent(running(), { seq: 2, type: 'failed', nativeStatus: 'worker_restarted', result: { summary: 'worker_restarted' } }, at(1));
    if (restarted.kind !== 'apply') throw new Error('the final event applies');
    expect(restarted.next.execution).toMatchObject({ status: 'failed', nativeStatus: 'failed', nativeDetail: 'worker_restarted' });
    expect(nativeStatusOf(restarted.next.execution)).toBe('worker_restarted');

    const plain = applyRunEvent(running(), { seq: 2, type: 'failed' }, at(1));
    if (plain.kind !== 'apply') throw new Error('the final event applies');
    expect(plain.next.execution.nativeDetail).toBeUndefined();
    expect(nativeStatusOf(plain.next.execution)).toBe('failed');

    const looked = reconcileLookup(running(), { kind: 'found', run: { runId: 'r-1', status: 'failed', nativeStatus: 'worker_restarted' } }, at(11), true);
    expect(looked && nativeStatusOf(looked.execution)).toBe('worker_restarted');
  });
});

describe('reconcileLookup', () => {
  it('records a final result found by lookup as recovered, and never writes a stall over what the target said', () => {
    const state = running();
    const recovered = reconcileLookup(state, { kind: 'found', run: { runId: 'r-1', status: 'completed', result: { summary: 'done' } } }, at(11), true);
    expect(recovered?.changes).toEqual(['recovered', 'result_ready']);
    expect(recovered?.execution).toMatchObject({ status: 'completed', nativeStatus: 'completed', result: { summary: 'done' } });

    const cases: Array<[LookupOutcome, string]> = [
      [{ kind: 'found', run: { runId: 'r-1', status: 'running' } }, 'stalled'],
      [{ kind: 'not_found' }, 'target_not_found'],
      [{ kind: 'unavailable', reason: 'HTTP 503' }, 'lookup_unavailable'],
    ];
    for (const [lookup, monitorStatus] of cases) {
      const next = reconcileLookup(state, lookup, at(13), true);
      expect(next?.execution).toMatchObject({ status: 'unknown', monitorStatus, nativeStatus: 'running', completedAt: null, result: null });
    }
  });
});

describe('a runtime that sends no heartbeats: its newest history event is its activity (CONTRACT §17)', () => {
  it('a lookup at the end of the stall window that finds the run moved within it records that move, not a stall; an older one is a stall', () => {
    const state = running();
    const window = state.timeouts.stallAfterSeconds;
    const looked = at(window + 60);
    const moved = new Date(looked.getTime() - (window - 5) * 1000).toISOString();
    const alive = reconcileLookup(state, { kind: 'found', run: { runId: 'r-1', status: 'running', lastActivityAt: moved } }, looked, true);
    expect(alive?.changes).toEqual(['activity']);
    expect(alive?.execution).toMatchObject({ status: 'running', monitorStatus: null, lastActivityAt: moved });
    // Watched again from that move: a stall only once the window has passed after it.
    expect(Date.parse(alive?.dueAt ?? '')).toBeGreaterThan(Date.parse(moved) + window * 1000 - 1);

    const quiet = new Date(looked.getTime() - (window + 1) * 1000).toISOString();
    const stalled = reconcileLookup(state, { kind: 'found', run: { runId: 'r-1', status: 'running', lastActivityAt: quiet } }, looked, true);
    expect(stalled?.execution).toMatchObject({ status: 'unknown', monitorStatus: 'stalled', nativeStatus: 'running' });

    // Stalled before, moving again by its history: seen alive (observed), the stall cleared.
    const later = new Date(looked.getTime() + 5_000);
    const back = stalled && reconcileLookup(stateOnly(stalled), { kind: 'found', run: { runId: 'r-1', status: 'running', lastActivityAt: new Date(later.getTime() - 1_000).toISOString() } }, later, true);
    expect(back?.changes).toEqual(['observed']);
    expect(back?.execution).toMatchObject({ status: 'running', monitorStatus: null, unknownLookups: undefined });
  });
});

describe('what the target knows and the ledger missed', () => {
  it('adopts a pending approval seen only by lookup (was: declared stalled, so approve/cancel could not work)', () => {
    const state = running();
    const next = reconcileLookup(state, { kind: 'found', run: { runId: 'r-1', status: 'waiting_for_approval', pendingApproval: { approvalId: 'a-unknown', requestedAt: at(9).toISOString() } } }, at(13), true);
    expect(next?.changes).toEqual(['approval_requested']);
    expect(next?.execution).toMatchObject({ status: 'waiting_for_approval', nativeStatus: 'waiting_for_approval', monitorStatus: null, pendingApproval: { approvalId: 'a-unknown', requestedAt: at(9).toISOString() } });
    // The approval clock runs from when the target asked (expiry at 29 s); the run is looked at a stall window on, before it.
    expect(next?.dueAt).toBe(at(23).toISOString());
    if (!next) throw new Error('adopted');
    expect(monitorStep(stateOnly(next), at(23)).kind).toBe('approval_lookup');
    const expired = monitorStep(stateOnly(next), new Date(at(9).getTime() + state.timeouts.approvalWaitSeconds * 1000));
    expect(expired.kind === 'write' && expired.next.changes).toEqual(['approval_wait_expired']);
  });

  it('coalesces heartbeats during an approval wait (was: every heartbeat while waiting cost a write)', () => {
    const asked = applyRunEvent(running(), { seq: 2, type: 'approval_requested', approvalId: 'a-1' }, at(1));
    if (asked.kind !== 'apply') throw new Error('approval request applies');
    expect(applyRunEvent(asked.next, { seq: 3, type: 'heartbeat' }, at(2)).kind).toBe('coalesced');
    const later = applyRunEvent(asked.next, { seq: 4, type: 'heartbeat' }, at(4));
    expect(later.kind === 'apply' && later.next.execution).toMatchObject({ status: 'waiting_for_approval', pendingApproval: { approvalId: 'a-1' } });
  });
});

describe('verdict timing', () => {
  it('declares a stall only after stallAfterSeconds of true silence, counting heartbeats coalescing may have absorbed (was: at 80 %)', () => {
    const state = running(); // activity recorded at 0, stall window 10 s, coalescing window 2 s
    // A heartbeat at 1.9 s is absorbed: nothing records it.
    expect(applyRunEvent(state, { seq: 2, type: 'heartbeat' }, new Date(at(0).getTime() + 1900)).kind).toBe('coalesced');
    // 10 s after the recorded activity is only 8.1 s after the absorbed one: not a stall yet.
    const early = monitorStep(state, at(10));
    expect(early.kind).toBe('write');
    expect(early.kind === 'write' && early.next.dueAt).toBe(at(12).toISOString());
    expect(monitorStep(state, at(12)).kind).toBe('lookup');
  });
});

describe('monitorStep', () => {
  it('reschedules a run with recent activity, expires an approval without denying it, and looks up a silent run', () => {
    const state = running();
    const early = monitorStep(state, at(5));
    expect(early.kind === 'write' && early.next.dueAt).toBe(at(12).toISOString());
    expect(monitorStep(state, at(12)).kind).toBe('lookup');

    const asked = applyRunEvent(state, { seq: 2, type: 'approval_requested', approvalId: 'a-1' }, at(1));
    if (asked.kind !== 'apply') throw new Error('approval request applies');
    const expired = monitorStep(asked.next, at(22));
    expect(expired.kind === 'write' && expired.next.execution).toMatchObject({ monitorStatus: 'approval_wait_expired', status: 'waiting_for_approval', pendingApproval: { approvalId: 'a-1' } });
  });
});

describe('monitorTick', () => {
  it('acts once when a tick takes over a lapsed shard claim while the first is still at work on its run (one version, one stall)', async () => {
    const store = new MemoryStore();
    const state = running();
    store.states.set(state.dispatchId, { ...state, dueAt: at(10).toISOString() });
    const before = store.versionOf(state.dispatchId);
    await store.putTarget({ name: 'demo-agent', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
    let lookups = 0;
    let resumeFirst: () => void = () => undefined;
    const firstHeld = new Promise<void>((resolve) => (resumeFirst = resolve));
    let firstInLookup: () => void = () => undefined;
    const firstLooking = new Promise<void>((resolve) => (firstInLookup = resolve));
    const target: TargetPort = {
      submit: async () => ({ kind: 'unavailable', reason: 'unused' }),
      lookup: async () => {
        lookups += 1;
        if (lookups === 1) {
          firstInLookup();
          await firstHeld;
        }
        return { kind: 'found', run: { runId: 'r-1', status: 'running' } };
      },
      decideApproval: async () => ({ kind: 'not_found' }),
      cancel: async () => ({ kind: 'not_found' }),
    };
    const deps: MonitorDeps = { store, dueIndex: store, blobs: new MemoryBlobs(), targetFor: () => target, callbackUrl: 'http://127.0.0.1:9', retryPolicy: DEFAULT_RETRY_POLICY, now: () => at(13), claimSeconds: 60, pageSize: 50 };

    // The first tick hangs in its lookup past its shard claim's lease (two periods: 120 s); a later tick takes the shard over.
    const first = monitorTick(deps);
    await firstLooking;
    const second = await monitorTick({ ...deps, now: () => at(200) });
    resumeFirst();
    const reports = [await first, second];

    const after = store.written.get(state.dispatchId);
    expect(lookups).toBe(2);
    expect(second.shards.worked).toBe(1);
    expect(after?.version).toBe(before + 1);
    expect(after?.changes).toEqual(['stalled']);
    // The first one's write lost to the second's (the version it read had moved on).
    expect(reports.map((report) => report.actions)).toEqual([{ skipped: 1 }, { observed: 1 }]);
  });
});

describe('review findings — the state machine', () => {
  it('records a repeated approval request for the approval already held as activity: no second Approval Requested, the clock unchanged', () => {
    const adopted = reconcileLookup(running(), { kind: 'found', run: { runId: 'r-1', status: 'waiting_for_approval', pendingApproval: { approvalId: 'a-1', requestedAt: at(2).toISOString() } } }, at(3), false);
    if (!adopted) throw new Error('adopted');
    // Adopted in a write of its own: the retried request is the next one's.
    const retried = applyRunEvent(stateOnly(adopted), { seq: 2, type: 'approval_requested', approvalId: 'a-1' }, at(50));
    expect(retried.kind === 'apply' && retried.next.changes).toEqual(['activity']);
    expect(retried.kind === 'apply' && retried.next.execution.pendingApproval).toEqual({ approvalId: 'a-1', requestedAt: at(2).toISOString() });
    expect(retried.kind === 'apply' && retried.next.dueAt).toBe(adopted.dueAt);
  });

  it('keeps the hot state bounded through blocked → redispatch → blocked cycles, and drops the old attempt’s refs', () => {
    let state = blocked(running(), 'retry_budget_spent', '10 attempts failed', at(1));
    for (let cycle = 0; cycle < 50; cycle += 1) {
      const again = redispatched(state, { reason: `cycle ${cycle}`, supersede: false, claimSeconds: 60 }, at(2 + cycle));
      state = blocked(again, 'retry_budget_spent', 'still down', at(2 + cycle));
    }
    expect(state.receipts.length).toBeLessThanOrEqual(2);
    const settled = { ...running(), evidence: { outcome: 'orphan_no_delivery' as const, expectedCount: 1, deadline: null, expected: ['out/a.md'], missing: ['out/a.md'] } };
    const next = redispatched(settled, { reason: 'again', supersede: false, claimSeconds: 60 }, at(9));
    expect(next.evidence).toEqual({ outcome: 'pending', expectedCount: 1, deadline: null });
  });
});

describe('a run that ends while it waits for an approval', () => {
  /** Asked at 1 s: the wait (20 s) expires at 21 s; the stall window is 10 s. */
  function waiting(): DispatchState {
    const asked = applyRunEvent(running(), { seq: 2, type: 'approval_requested', approvalId: 'a-1' }, at(1));
    if (asked.kind !== 'apply') throw new Error('approval request applies');
    return stateOnly(asked.next);
  }
  const ended: LookupOutcome = { kind: 'found', run: { runId: 'r-1', status: 'failed', nativeStatus: 'TIMED_OUT', result: { summary: 'States.Timeout' } } };

  it('is looked up every stall window for its end alone, the approval clock untouched (was: never looked up until a person acted, so an execution that ended while its status-change event was lost waited forever)', () => {
    const state = waiting();
    expect(state.dueAt).toBe(at(11).toISOString());
    expect(monitorStep(state, at(11)).kind).toBe('approval_lookup');
    // Still waiting, not found, or unreachable: nothing about the run changes, only when to look again (the expiry comes first).
    for (const lookup of [
      { kind: 'found', run: { runId: 'r-1', status: 'waiting_for_approval' } },
      { kind: 'not_found' },
      { kind: 'unavailable', reason: 'throttled' },
    ] as LookupOutcome[]) {
      const next = approvalWaitLookedUp(state, lookup, at(11));
      expect(next.changes).toEqual(['rescheduled']);
      expect(next.execution).toEqual(state.execution);
      expect(next.dueAt).toBe(at(21).toISOString());
    }
    // Its end is recorded as the ledger's own lookup found it, with the runtime's word.
    const found = approvalWaitLookedUp(state, ended, at(11));
    expect(found.changes[0]).toBe('recovered');
    expect(found.execution).toMatchObject({ status: 'failed', nativeStatus: 'failed', nativeDetail: 'TIMED_OUT', pendingApproval: null, result: { summary: 'States.Timeout' } });
  });

  it('after the expiry is recorded, is still looked at, ever more sparsely (the wait’s age, up to the lookup backoff cap)', () => {
    const expiry = monitorStep(waiting(), at(21));
    if (expiry.kind !== 'write') throw new Error('the expiry is written');
    expect(expiry.next.dueAt).toBe(at(41).toISOString());
    const expired = stateOnly(expiry.next);
    expect(monitorStep(expired, at(41)).kind).toBe('approval_lookup');
    expect(approvalWaitLookedUp(expired, { kind: 'not_found' }, at(41)).dueAt).toBe(at(81).toISOString());
    const aWeek = 7 * 24 * 3600;
    expect(approvalWaitLookedUp(expired, { kind: 'not_found' }, at(aWeek)).dueAt).toBe(at(aWeek + MAX_LOOKUP_BACKOFF_SECONDS).toISOString());
    expect(approvalWaitLookedUp(expired, ended, at(aWeek)).execution.status).toBe('failed');
  });

  it('through the monitor: one lookup, the end recorded, no stall and no second expiry', async () => {
    const store = new MemoryStore();
    const state = waiting();
    store.states.set(state.dispatchId, state);
    await store.putTarget({ name: 'demo-agent', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
    let lookups = 0;
    const target: TargetPort = {
      submit: async () => ({ kind: 'unavailable', reason: 'unused' }),
      lookup: async () => {
        lookups += 1;
        return ended;
      },
      decideApproval: async () => ({ kind: 'not_found' }),
      cancel: async () => ({ kind: 'not_found' }),
    };
    const deps: MonitorDeps = { store, dueIndex: store, blobs: new MemoryBlobs(), targetFor: () => target, callbackUrl: 'http://127.0.0.1:9', retryPolicy: DEFAULT_RETRY_POLICY, now: () => at(11), claimSeconds: 60, pageSize: 50 };
    await monitorTick(deps);
    expect(lookups).toBe(1);
    const after = store.written.get(state.dispatchId);
    expect(after?.changes[0]).toBe('recovered');
    expect(after?.changes).not.toContain('stalled');
    expect(after?.changes).not.toContain('approval_wait_expired');
    expect(store.states.get(state.dispatchId)?.execution).toMatchObject({ status: 'failed', nativeDetail: 'TIMED_OUT' });
  });
});

describe('an approval found past its expiry', () => {
  it('is due at once for its expiry, not a stall window later (was: an approval adopted late had its expiry recorded up to one stall window after it)', () => {
    const asked = applyRunEvent(running(), { seq: 2, type: 'approval_requested', approvalId: 'a-1' }, at(1));
    if (asked.kind !== 'apply') throw new Error('approval request applies');
    // Asked at 1 s, a 20 s wait: at 30 s it is past its expiry and not recorded expired.
    expect(approvalWatchAt(stateOnly(asked.next), at(30)).toISOString()).toBe(at(21).toISOString());
  });
});

describe('a run redriven after its recorded end', () => {
  const ended = (): DispatchState => stateOnly(finished(running(), 'failed', 'States.TaskFailed', at(5), 'failed', undefined, 'FAILED'));

  it('keeps the end, records the redrive once per count, and puts the dispatch first on the attention list', () => {
    const state = ended();
    expect(() => runRedriven(running(), 1, at(6))).toThrow(RangeError);
    const redriven = runRedriven(state, 1, at(6));
    if (!redriven) throw new Error('recorded');
    expect(redriven.changes).toEqual(['redriven']);
    expect(redriven.execution).toMatchObject({ status: 'failed', nativeDetail: 'FAILED', redriven: { at: at(6).toISOString(), count: 1 } });
    expect(attentionKind(redriven)).toBe('redriven');
    // The same redrive again, or an older count: nothing to write; a later redrive: recorded.
    expect(runRedriven(stateOnly(redriven), 1, at(7))).toBeUndefined();
    expect(runRedriven(stateOnly(redriven), 2, at(8))?.execution.redriven).toEqual({ at: at(8).toISOString(), count: 2 });
    // A second writer may be at work: that outranks a dropped result (was: listed only as result_dropped).
    const dropped = { ...stateOnly(redriven), result: { id: 'r', attempt: 1, state: 'dropped' as const, readyAt: at(5).toISOString(), deliveryAttempts: 5, claimToken: null, leaseUntil: null, deliveredAt: null, deliveredBy: null, droppedReason: 'attempts' as const, droppedAt: at(6).toISOString() } };
    expect(attentionKind(dropped)).toBe('redriven');
  });
});
