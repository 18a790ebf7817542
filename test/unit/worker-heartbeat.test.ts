import { describe, expect, it } from 'vitest';
import { memoryStore } from '@dispatch-ledger/worker';
import { CallbackClient, type Transport } from '../../packages/worker/src/callbacks.js';
import { HeartbeatCoalescer, heartbeatIntervalMs } from '../../packages/worker/src/heartbeat.js';
import { RunEngine } from '../../packages/worker/src/runs.js';
import { eventually } from '../support/eventually.js';
import { manualClock } from '../support/manual-clock.js';

describe('the worker kit: heartbeat coalescing', () => {
  it('uses a fifth of the stall window', () => {
    expect(heartbeatIntervalMs(600)).toBe(120_000);
    expect(heartbeatIntervalMs(2)).toBe(400);
    expect(heartbeatIntervalMs(0.001)).toBe(1);
  });

  it('sends the first heartbeat of a window at once and folds the rest into one trailing heartbeat', () => {
    const clock = manualClock();
    let sent = 0;
    const coalescer = new HeartbeatCoalescer(1_000, () => void (sent += 1), clock);
    const decisions = Array.from({ length: 100 }, () => coalescer.request());
    expect(decisions[0]).toBe('sent');
    expect(decisions[1]).toBe('deferred');
    expect(decisions.slice(2).every((decision) => decision === 'coalesced')).toBe(true);
    expect(sent).toBe(1);
    clock.advance(999);
    expect(sent).toBe(1);
    clock.advance(1);
    expect(sent).toBe(2);
    expect(clock.pending()).toBe(0);
  });

  it('never sends more than one heartbeat per window, however often it is asked', () => {
    const clock = manualClock();
    const sentAt: number[] = [];
    const coalescer = new HeartbeatCoalescer(1_000, () => void sentAt.push(clock.now()), clock);
    // Asked every 10 ms for 10 windows: sent at 0, 1000, …, 9000, and the last window's trailing one at 10000.
    for (let step = 0; step < 1_000; step += 1) {
      coalescer.request();
      clock.advance(10);
    }
    expect(sentAt.length).toBe(11);
    for (let index = 1; index < sentAt.length; index += 1) {
      expect((sentAt[index] ?? 0) - (sentAt[index - 1] ?? 0)).toBeGreaterThanOrEqual(1_000);
    }
  });

  it('sends no heartbeat while the last one is still on its way, and one once it arrives: the ledger down, they no longer queue up (regression)', async () => {
    // Was: each window's heartbeat took a seq and a store write and waited behind the one before, each
    // retrying for its whole budget; a progress or final event waited behind them all.
    const clock = manualClock();
    let sends = 0;
    let deliver: () => void = () => undefined;
    const coalescer = new HeartbeatCoalescer(
      1_000,
      () => {
        sends += 1;
        return new Promise<void>((resolve) => (deliver = resolve));
      },
      clock,
    );
    expect(coalescer.request()).toBe('sent');
    for (let window = 0; window < 10; window += 1) {
      clock.advance(1_000);
      expect(coalescer.request()).toBe('coalesced');
    }
    expect(sends).toBe(1);
    expect(clock.pending()).toBe(0);
    // Arrived: what was asked meanwhile goes once, at once (its window is long over).
    deliver();
    await new Promise((resolve) => setImmediate(resolve));
    expect(sends).toBe(2);
    deliver();
    await new Promise((resolve) => setImmediate(resolve));
    expect(sends).toBe(2);
    expect(coalescer.request()).toBe('deferred');
  });

  it('sends no extra heartbeat from a trailing timer that outlived its window (a run busy with synchronous work)', () => {
    // Regression: a heartbeat sent at once after the window left the window's trailing timer pending; it
    // fired later and sent a second heartbeat for the same sign of life.
    const clock = manualClock();
    let sends = 0;
    const coalescer = new HeartbeatCoalescer(1_000, () => void (sends += 1), clock);
    expect(coalescer.request()).toBe('sent');
    clock.advance(500);
    expect(coalescer.request()).toBe('deferred');
    clock.jump(700); // the trailing timer's time passed, but it has not run
    expect(coalescer.request()).toBe('sent');
    expect(clock.pending()).toBe(0);
    clock.advance(500);
    expect(sends).toBe(2);
  });

  it('needs no trailing heartbeat after other activity, and leaves no timer once stopped', () => {
    const clock = manualClock();
    let sent = 0;
    const coalescer = new HeartbeatCoalescer(1_000, () => void (sent += 1), clock);
    coalescer.request();
    expect(coalescer.request()).toBe('deferred');
    coalescer.activity();
    clock.advance(5_000);
    expect(sent).toBe(1);

    // After activity, a heartbeat within the window is deferred again, not sent.
    coalescer.activity();
    expect(coalescer.request()).toBe('deferred');
    coalescer.stop();
    expect(clock.pending()).toBe(0);
    clock.advance(5_000);
    expect(sent).toBe(1);
    expect(coalescer.request()).toBe('stopped');
  });

  it('coalesces a run that calls ctx.heartbeat() in a loop into one heartbeat event per window of its stall clock', async () => {
    const clock = manualClock();
    const types: string[] = [];
    const transport: Transport = async (_url, init) => {
      if (typeof init.body === 'string') types.push(String((JSON.parse(init.body) as { type: string }).type));
      return { status: 202, text: '{"applied":true}' };
    };
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const engine = new RunEngine({
      store: memoryStore(),
      log: () => undefined,
      clock,
      callbacks: new CallbackClient({ log: () => undefined, stopSignal: new AbortController().signal, transport }),
      run: async (_task, ctx) => {
        for (let index = 0; index < 500; index += 1) ctx.heartbeat();
        await released;
        for (let index = 0; index < 500; index += 1) ctx.heartbeat();
        return { summary: 'done' };
      },
    });
    // stallAfterSeconds 10 → one heartbeat per 2 s at most.
    await engine.submit('d-hb:1', { dispatchId: 'd-hb', attempt: 1, origin: 'planner', task: {}, callbackUrl: 'http://127.0.0.1:9', timeouts: { stallAfterSeconds: 10 } });
    await eventually('the first heartbeat', () => (types.length >= 1 ? types : undefined));
    clock.advance(2_000); // the window closes: the one trailing heartbeat of the first loop
    await eventually('the trailing heartbeat', () => (types.length >= 2 ? types : undefined));
    clock.advance(2_000);
    release();
    await eventually('the run completed', () => engine.lookup('d-hb:1'), { until: (view) => view?.status === 'completed' });
    await eventually('the completed event', () => (types.includes('completed') ? types : undefined));
    // 500 + 500 calls: the start's heartbeat, one trailing, one at the second loop's start; the second
    // loop's trailing one was dropped when the run ended.
    expect(types).toEqual(['heartbeat', 'heartbeat', 'heartbeat', 'completed']);
    expect(clock.pending()).toBe(0);
    await engine.close();
  });
});
