import { describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.js';

describe('eventually (the tests\' one polling helper)', () => {
  it('returns the first value the probe yields, treating undefined and throws as "not yet"', async () => {
    let calls = 0;
    const value = await eventually('the third call', () => {
      calls += 1;
      if (calls === 1) throw new Error('not up yet');
      return calls === 3 ? 'ready' : undefined;
    }, { intervalMs: 1 });
    expect(value).toBe('ready');
    expect(calls).toBe(3);
  });

  it('accepts a value only once `until` holds', async () => {
    let n = 0;
    expect(await eventually('n to reach 3', () => (n += 1), { intervalMs: 1, until: (v) => v >= 3 })).toBe(3);
  });

  it('fails naming what it awaited and the last value seen', async () => {
    await expect(eventually('the answer', () => 41, { timeoutMs: 30, intervalMs: 5, until: (v) => v === 42 })).rejects.toThrow(
      /timed out after \d+ ms \(\d+ tries\) waiting for the answer; last value: 41$/,
    );
  });

  it('fails naming the last error, kept as the cause, and probes at least once', async () => {
    const boom = new Error('connection refused');
    const failure = await eventually('the server', () => Promise.reject(boom), 0).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toMatch(/waiting for the server; last error: Error: connection refused$/);
    expect((failure as Error).cause).toBe(boom);
  });
});
