import { describe, expect, it } from 'vitest';
import { billedMs, combined, LATENCY_MS, meanRoundTrips, modelledMs, NO_ROUND_TRIPS, scaled, waitedMs, type Work } from '../../bench/duration-model.js';
import { ROUND_TRIPS } from '../../bench/prices.js';
import { percentile } from '../../bench/types.js';

/** An intake message as the cost bench measures one: its CPU, two DynamoDB writes and the target's submission. */
const intakeMessage: Work = { cpuMs: 1.5, roundTrips: { ...NO_ROUND_TRIPS, dynamodb: 2, target: 1 } };

describe('the duration model (bench/duration-model.ts)', () => {
  it('takes its latencies from bench/prices.ts, fixed before any measurement', () => {
    expect(LATENCY_MS).toEqual({ dynamodb: ROUND_TRIPS.dynamodb.ms, s3: ROUND_TRIPS.s3.ms, eventBridge: ROUND_TRIPS.eventBridge.ms, sqs: ROUND_TRIPS.sqs.ms, target: ROUND_TRIPS.target.ms });
  });

  it('waits each round trip in turn at its latency', () => {
    const latencyMs = { dynamodb: 5, s3: 30, eventBridge: 20, sqs: 10, target: 50 };
    expect(waitedMs({ dynamodb: 4, s3: 1, eventBridge: 0, sqs: 0, target: 0 }, latencyMs)).toBe(50);
    expect(waitedMs({ dynamodb: 0, s3: 0, eventBridge: 2, sqs: 1, target: 1 }, latencyMs)).toBe(100);
    expect(waitedMs(NO_ROUND_TRIPS, latencyMs)).toBe(0);
  });

  it('bills a call its CPU plus its waits', () => {
    const latencyMs = { dynamodb: 5, s3: 30, eventBridge: 20, sqs: 10, target: 50 };
    expect(modelledMs(intakeMessage, { latencyMs })).toBe(61.5);
  });

  it("shares a batch's waits among its concurrent records but not their CPU", () => {
    const latencyMs = { dynamodb: 5, s3: 30, eventBridge: 20, sqs: 10, target: 50 };
    // 1.5 ms of CPU + (2 × 5 + 50) ÷ 10.
    expect(modelledMs(intakeMessage, { latencyMs, concurrent: 10 })).toBeCloseTo(7.5, 10);
    expect(() => modelledMs(intakeMessage, { concurrent: 0 })).toThrow(RangeError);
  });

  it('rounds an invocation up to the next millisecond, as Lambda bills it', () => {
    expect(billedMs(8.2)).toBe(9);
    expect(billedMs(9)).toBe(9);
    expect(billedMs(0.3)).toBe(1);
  });

  it("takes what a tick did beyond an empty one, never below zero, and spreads it over lifecycles", () => {
    const tick: Work = { cpuMs: 12, roundTrips: { ...NO_ROUND_TRIPS, dynamodb: 70 } };
    const empty: Work = { cpuMs: 2, roundTrips: { ...NO_ROUND_TRIPS, dynamodb: 64, s3: 1 } };
    const beyond = combined(tick, empty, -1);
    expect(beyond).toEqual({ cpuMs: 10, roundTrips: { ...NO_ROUND_TRIPS, dynamodb: 6 } });
    expect(scaled(beyond, 1 / 2)).toEqual({ cpuMs: 5, roundTrips: { ...NO_ROUND_TRIPS, dynamodb: 3 } });
  });

  it('averages round trips per call', () => {
    expect(meanRoundTrips([intakeMessage, { cpuMs: 3, roundTrips: { ...NO_ROUND_TRIPS, dynamodb: 3, target: 1 } }])).toEqual({ ...NO_ROUND_TRIPS, dynamodb: 2.5, target: 1 });
    expect(meanRoundTrips([])).toEqual(NO_ROUND_TRIPS);
  });
});

describe('percentile (bench/types.ts)', () => {
  const oneToHundred = Array.from({ length: 100 }, (_, index) => index + 1);

  it('takes the nearest rank: the smallest sample with p % of them at or below it', () => {
    expect(percentile(oneToHundred, 50)).toBe(50);
    expect(percentile(oneToHundred, 99)).toBe(99);
    expect(percentile(oneToHundred, 100)).toBe(100);
    expect(percentile([30, 10, 20], 50)).toBe(20);
  });

  it('gives the largest of fewer than 100 samples as p99', () => {
    expect(percentile([5, 1, 9, 3, 7, 2, 8, 4, 6, 10], 99)).toBe(10);
  });

  it('refuses no samples and a p outside (0, 100]', () => {
    expect(() => percentile([], 50)).toThrow(RangeError);
    expect(() => percentile([1], 0)).toThrow(RangeError);
    expect(() => percentile([1], 101)).toThrow(RangeError);
  });
});
