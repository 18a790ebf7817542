import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { stateOnly, type DispatchState, type NextState } from '../../shared/dispatch/state.js';
import { applyRunEvent } from '../../shared/dispatch/transitions/run.js';
import { accepted, redispatched, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { resultClaimed, resultReleased, resultRenewed, resultWatch } from '../../shared/dispatch/transitions/inbox.js';
import { blocked, parseResultId, resultIdOf } from '../../shared/dispatch/transitions/core.js';
import { assertLegal } from '../../shared/dispatch/transitions/legal.js';
import { pollIntervalMs } from '../../shared/usecases/inbox.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

/** The result's part of the state machine (CONTRACT §10), pure. */

const at = (seconds: number): Date => new Date(NOW.getTime() + seconds * 1000);
const settings = { ttlSeconds: 3600, maxDeliveryAttempts: 3 };

/** A run as its first write stored it. */
function running(overrides: Parameters<typeof newDispatchFactory>[0] = {}): DispatchState {
  return stateOnly(submitted(accepted(newDispatchFactory(overrides), NOW), { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q-1' }, DEFAULT_RETRY_POLICY, NOW));
}

/** The completion's write, on the running state stored (`stored()`: as it is stored then). */
function completed(overrides: Parameters<typeof newDispatchFactory>[0] = {}): NextState {
  const outcome = applyRunEvent(running(overrides), { seq: 1, type: 'completed', result: { summary: 'ok' } }, at(10));
  if (outcome.kind !== 'apply') throw new Error('the completion applies');
  return outcome.next;
}
const stored = (overrides: Parameters<typeof newDispatchFactory>[0] = {}): DispatchState => stateOnly(completed(overrides));

describe('the result is made in the write that settles the attempt', () => {
  it('makes one pending result, with a due time, for a callback dispatch — none for a detached one', () => {
    const done = completed();
    expect(done.changes).toEqual(['completed', 'result_ready']);
    expect(done.result).toMatchObject({ id: resultIdOf('d-2026-0001', 1), attempt: 1, state: 'pending', deliveryAttempts: 0 });
    expect(done.dueAt).not.toBeNull();
    expect(completed({ deliveryMode: 'detached' }).result).toBeUndefined();
  });

  it('keeps a result made from a submission answer that is already final due (regression: its expiry was never watched)', () => {
    const answer = submitted(accepted(newDispatchFactory(), NOW), { kind: 'accepted', runId: 'r-1', status: 'completed', requestId: 'q-1' }, DEFAULT_RETRY_POLICY, NOW);
    expect(answer.result?.state).toBe('pending');
    expect(answer.dueAt).not.toBeNull();
    expect([...answer.changes].sort()).toEqual(['accepted', 'completed', 'result_ready', 'submitted']);
  });

  it('gives a blocked callback dispatch a result too, and a legal write for each of its inbox changes', () => {
    const stopped = stateOnly(blocked(accepted(newDispatchFactory(), NOW), 'unknown_target', 'no target', NOW));
    expect(stopped.result?.state).toBe('pending');
    const claimed = resultClaimed(stopped, { claimToken: 't', leaseSeconds: 60 }, at(1));
    expect(() => assertLegal(stopped, claimed)).not.toThrow();
    // Written: the watch is the next write, on the state it left.
    const held = stateOnly(claimed);
    const watched = resultWatch(held, settings, at(2));
    expect(() => assertLegal(held, watched)).not.toThrow();
  });

  it('names results so they parse back, and refuses ids the ledger never issues', () => {
    expect(parseResultId(resultIdOf('d-1.a:b', 3, 2))).toEqual({ dispatchId: 'd-1.a:b', attempt: 3, round: 2 });
    for (const forged of ['r0~d', 'r1~', 'x1~d', 'r1~d/e', 'r1.0~d']) expect(parseResultId(forged)).toBeUndefined();
  });

  it('gives the next result of an attempt a new id when a blocked dispatch is redispatched on the same attempt', () => {
    const stopped = stateOnly(blocked(accepted(newDispatchFactory(), NOW), 'retry_budget_spent', 'down', NOW));
    const again = redispatched(stopped, { reason: 'target is back', supersede: false, claimSeconds: 60 }, at(5));
    expect(again.attempt).toBe(1);
    expect(again.result).toBeUndefined();
    expect(again.changes).toEqual(['redispatched', 'result_dropped']);
    const next = submitted(stateOnly(again), { kind: 'accepted', runId: 'r-1', status: 'failed', requestId: 'q-2' }, DEFAULT_RETRY_POLICY, at(6));
    expect(next.result?.id).toBe(resultIdOf('d-2026-0001', 1, 1));
  });
});

describe('leases and expiry', () => {
  it('counts a lapsed lease as a release at the monitor, and drops it at the cap', () => {
    let state = stored();
    for (let round = 1; round <= 3; round += 1) {
      const held = stateOnly(resultClaimed(state, { claimToken: `t${round}`, leaseSeconds: 30 }, at(100 * round)));
      state = stateOnly(resultWatch(held, settings, at(100 * round + 31)));
      expect(state.result?.deliveryAttempts).toBe(round);
    }
    expect(state.result).toMatchObject({ state: 'dropped', droppedReason: 'attempts' });
    expect(state.dueAt).toBeNull();
  });

  it('looks at a claimed result again when its lease ends, and drops a pending one at its TTL', () => {
    const held = stateOnly(resultClaimed(stored(), { claimToken: 't', leaseSeconds: 60 }, at(20)));
    expect(resultWatch(held, settings, at(30)).dueAt).toBe(at(80).toISOString());
    const pending = stored();
    expect(resultWatch(pending, settings, at(11)).dueAt).toBe(at(10 + 3600).toISOString());
    expect(resultWatch(pending, settings, at(10 + 3600)).result).toMatchObject({ state: 'dropped', droppedReason: 'expired' });
  });

  it('looks at a claimed result past its TTL again when its lease ends, never at a time already past', () => {
    // Claimed a minute before its TTL for 15 minutes: the TTL passes while the lease lives.
    const held = stateOnly(resultClaimed(stored(), { claimToken: 't', leaseSeconds: 900 }, at(10 + 3540)));
    for (const seconds of [3600, 3610, 3700, 4000, 4400]) {
      const watched = resultWatch(held, settings, at(10 + seconds));
      expect(watched.result?.state).toBe('claimed');
      expect(watched.dueAt).toBe(at(10 + 3540 + 900).toISOString());
    }
    expect(resultWatch(held, settings, at(10 + 4440)).result).toMatchObject({ state: 'dropped', droppedReason: 'expired', deliveryAttempts: 1 });
  });

  it('refuses to renew a lapsed lease and to release what is not claimed', () => {
    const held = stateOnly(resultClaimed(stored(), { claimToken: 't', leaseSeconds: 30 }, at(20)));
    expect(() => resultRenewed(held, 60, at(51))).toThrow();
    expect(resultRenewed(held, 60, at(40)).result?.leaseUntil).toBe(at(100).toISOString());
    expect(() => resultReleased(stored(), 3, at(30))).toThrow();
  });
});

describe('the long poll', () => {
  it('spaces its passes so an empty 20 s poll reads at most 10 keys (5 read units) for up to 2 shards', () => {
    for (const [mode, shards] of [['after_turn', 1], ['inject', 1], ['after_turn', 2], ['inject', 2]] as const) {
      const interval = pollIntervalMs({ mode, waitSeconds: 20 }, shards);
      const passes = Math.floor(20_000 / interval) + 1 + (20_000 % interval === 0 ? 0 : 1);
      const keys = shards * (mode === 'inject' ? 1 : 2);
      expect(passes * keys, `${mode} × ${shards}`).toBeLessThanOrEqual(10);
    }
  });
});
