import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_POLICY, maxAttempts, nextRetryAt, parseRetryDelays, type RetryPolicy } from '../../shared/dispatch/retry.js';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const sum = (values: readonly number[]): number => values.reduce((total, value) => total + value, 0);
const delayMs = (policy: RetryPolicy, dispatchId: string, failedAttempts: number): number | undefined => {
  const at = nextRetryAt(policy, dispatchId, failedAttempts, NOW);
  return at === undefined ? undefined : at.getTime() - NOW.getTime();
};

describe('DEFAULT_RETRY_POLICY', () => {
  it('allows 10 submission attempts when the default policy is used', () => {
    expect(maxAttempts(DEFAULT_RETRY_POLICY)).toBe(10);
  });

  it('spreads the attempts over about an hour when the nominal delays are added up', () => {
    const totalMinutes = sum(DEFAULT_RETRY_POLICY.delaysSeconds) / 60;
    expect(totalMinutes).toBeGreaterThanOrEqual(50);
    expect(totalMinutes).toBeLessThanOrEqual(65);
  });

  it('stays within an hour and a quarter when every delay is jittered to its maximum', () => {
    const worst = sum(DEFAULT_RETRY_POLICY.delaysSeconds) * (1 + DEFAULT_RETRY_POLICY.jitter);
    expect(worst / 60).toBeLessThanOrEqual(75);
  });

  it('uses ±20% jitter and only positive delays', () => {
    expect(DEFAULT_RETRY_POLICY.jitter).toBe(0.2);
    for (const delay of DEFAULT_RETRY_POLICY.delaysSeconds) expect(delay).toBeGreaterThan(0);
  });
});

describe('maxAttempts', () => {
  it('is one more than the number of delays', () => {
    expect(maxAttempts({ delaysSeconds: [1, 1], jitter: 0 })).toBe(3);
    expect(maxAttempts({ delaysSeconds: [], jitter: 0 })).toBe(1);
  });
});

describe('nextRetryAt', () => {
  it('schedules each retry within ±20% of its nominal delay when the default policy is used', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 128 }), fc.integer({ min: 1, max: 9 }), (dispatchId, failed) => {
        const nominal = (DEFAULT_RETRY_POLICY.delaysSeconds[failed - 1] ?? Number.NaN) * 1000;
        const delay = delayMs(DEFAULT_RETRY_POLICY, dispatchId, failed);
        expect(delay).toBeDefined();
        expect(delay).toBeGreaterThanOrEqual(Math.floor(nominal * 0.8));
        expect(delay).toBeLessThanOrEqual(Math.ceil(nominal * 1.2));
      }),
    );
  });

  it('returns the same time when asked twice for the same dispatchId and attempt', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 128 }), fc.integer({ min: 1, max: 9 }), (dispatchId, failed) => {
        expect(nextRetryAt(DEFAULT_RETRY_POLICY, dispatchId, failed, NOW)).toEqual(nextRetryAt(DEFAULT_RETRY_POLICY, dispatchId, failed, NOW));
      }),
    );
  });

  it('spreads retries of different dispatches when they fail at the same moment', () => {
    const delays = new Set(Array.from({ length: 50 }, (_, i) => delayMs(DEFAULT_RETRY_POLICY, `d-${i}`, 1)));
    expect(delays.size).toBeGreaterThan(40);
  });

  it('counts from now when now changes', () => {
    const later = new Date(NOW.getTime() + 3_600_000);
    const first = nextRetryAt(DEFAULT_RETRY_POLICY, 'd-1', 3, NOW);
    const second = nextRetryAt(DEFAULT_RETRY_POLICY, 'd-1', 3, later);
    expect(first).toBeDefined();
    expect(second?.getTime()).toBe((first?.getTime() ?? 0) + 3_600_000);
  });

  it('uses the exact delay when the policy has no jitter', () => {
    const policy: RetryPolicy = { delaysSeconds: [5, 7], jitter: 0 };
    expect(delayMs(policy, 'd-1', 1)).toBe(5_000);
    expect(delayMs(policy, 'd-1', 2)).toBe(7_000);
  });

  it('is undefined when the retry budget is spent', () => {
    expect(nextRetryAt(DEFAULT_RETRY_POLICY, 'd-1', 10, NOW)).toBeUndefined();
    expect(nextRetryAt(DEFAULT_RETRY_POLICY, 'd-1', 11, NOW)).toBeUndefined();
    expect(nextRetryAt({ delaysSeconds: [1, 1], jitter: 0.2 }, 'd-1', 3, NOW)).toBeUndefined();
  });

  it('offers exactly maxAttempts - 1 retries when attempts keep failing', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 3600 }), { maxLength: 12 }), fc.string(), (delaysSeconds, dispatchId) => {
        const policy: RetryPolicy = { delaysSeconds, jitter: 0.2 };
        let retries = 0;
        for (let failed = 1; nextRetryAt(policy, dispatchId, failed, NOW) !== undefined; failed += 1) retries += 1;
        expect(retries).toBe(maxAttempts(policy) - 1);
      }),
    );
  });
});

describe('parseRetryDelays', () => {
  it('reads comma-separated seconds with the default jitter', () => {
    expect(parseRetryDelays('1,2,3')).toEqual({ delaysSeconds: [1, 2, 3], jitter: DEFAULT_RETRY_POLICY.jitter });
  });

  it('ignores spaces around the values', () => {
    expect(parseRetryDelays(' 1, 2 ,3 ').delaysSeconds).toEqual([1, 2, 3]);
  });

  it('reads a single delay as a budget of two attempts', () => {
    expect(maxAttempts(parseRetryDelays('30'))).toBe(2);
  });

  it('throws a RangeError when a value is empty, zero, negative or not a number', () => {
    for (const text of ['', ' ', '0', 'a', '-1', '1,,2', '1,0', '1,a', 'Infinity', 'NaN', '1,']) {
      expect(() => parseRetryDelays(text), JSON.stringify(text)).toThrow(RangeError);
    }
  });
});
