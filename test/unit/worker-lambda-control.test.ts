import { describe, expect, it } from 'vitest';
import type { RunFunction, Transport } from '@dispatch-ledger/worker';
import { createLambdaWorker, memoryLambdaStore, type LambdaContextLike } from '@dispatch-ledger/worker/lambda';
import { RunCancelledError } from '../../packages/worker/src/run-api.js';
import { eventually } from '../support/eventually.js';
import { manualClock } from '../support/manual-clock.js';

/**
 * How a cancel reaches a Lambda run (docs/protocol.md §12): its control record, which the kit polls at the
 * start and once a heartbeat interval (a fifth of the stall window) while the run goes on.
 */
const context: LambdaContextLike = { awsRequestId: 'req-1', getRemainingTimeInMillis: () => 3_600_000 };

describe('a Lambda run asked to cancel', () => {
  // Regression (a review): the control record was polled only with a heartbeat actually sent; each progress
  // event put the next heartbeat off, so a run reporting progress more often than the heartbeat interval
  // never learned of its cancel, and ran to its end.
  it('learns it within a heartbeat interval though it reports progress more often than that, and never calls heartbeat', async () => {
    const clock = manualClock();
    let cancelAsked = false;
    const polls: number[] = [];
    const transport: Transport = async (url) => {
      if (url.includes('/control')) {
        polls.push(clock.now());
        return { status: 200, text: JSON.stringify({ superseded: false, cancelRequested: cancelAsked, decision: null }) };
      }
      return { status: 202, text: '{}' };
    };
    let steps = 0;
    let aborted: unknown;
    const run: RunFunction = async (_task, ctx) => {
      while (!ctx.signal.aborted) {
        steps += 1;
        await ctx.progress(`step ${steps}`);
        // A step of 30 s on the test's clock (the stall window 600 s: a heartbeat interval of 120 s).
        await new Promise<void>((resolve) => clock.setTimer(30_000, resolve));
      }
      aborted = ctx.signal.reason;
      throw ctx.signal.reason;
    };
    const lambda = createLambdaWorker({ name: 'busy-lambda', run, store: memoryLambdaStore(), transport, clock, log: () => undefined });
    const invoked = lambda({ dispatchId: 'd-busy', attempt: 1, origin: 'planner', task: {}, callbackUrl: 'http://127.0.0.1:9', runId: 'd-busy:1', timeouts: { stallAfterSeconds: 600 } }, context);
    const started = clock.now();
    await eventually('the first step', () => (steps >= 1 ? true : undefined));
    cancelAsked = true;
    // Five minutes of 30-second steps: the run never stops sending progress.
    for (let second = 0; second < 300 && aborted === undefined; second += 30) {
      const before = steps;
      clock.advance(30_000);
      await eventually('the next step or the abort', () => (steps > before || aborted !== undefined ? true : undefined));
    }
    expect(aborted).toBeInstanceOf(RunCancelledError);
    await invoked;
    // Polled at the start, then once a heartbeat interval: the abort came within one interval of the ask.
    expect(polls[0]).toBe(started);
    expect(polls.slice(1).every((at, index) => at - (polls[index] ?? 0) === 120_000)).toBe(true);
    expect(steps).toBeLessThanOrEqual(6);
  });

  // A review: the next poll was set without waiting for the one under way (a poll may take 10 s; the interval
  // is a fifth of the stall window, 200 ms for a window of 1 s): a slow ledger had polls pile up.
  it('never has two polls under way: the next is timed from the end of the last', async () => {
    const clock = manualClock();
    let polls = 0;
    let answer: () => void = () => undefined;
    const transport: Transport = async (url) => {
      if (url.includes('/control')) {
        polls += 1;
        // The ledger answers this poll only when the test says.
        await new Promise<void>((resolve) => (answer = resolve));
        return { status: 200, text: JSON.stringify({ superseded: false, cancelRequested: true, decision: null }) };
      }
      return { status: 202, text: '{}' };
    };
    let release: () => void = () => undefined;
    const run: RunFunction = async (_task, ctx) => {
      await new Promise<void>((resolve) => {
        release = resolve;
        ctx.signal.addEventListener('abort', () => resolve(), { once: true });
      });
      return { summary: 'done' };
    };
    const lambda = createLambdaWorker({ name: 'slow-ledger-lambda', run, store: memoryLambdaStore(), transport, clock, log: () => undefined });
    const invoked = lambda({ dispatchId: 'd-slow', attempt: 1, origin: 'planner', task: {}, callbackUrl: 'http://127.0.0.1:9', runId: 'd-slow:1', timeouts: { stallAfterSeconds: 1 } }, context);
    await eventually('the first poll', () => (polls === 1 ? true : undefined));
    // Ten intervals pass while the first poll waits for its answer.
    for (let n = 0; n < 10; n += 1) clock.advance(200);
    expect(polls).toBe(1);
    answer();
    await invoked;
    release();
  });
});
