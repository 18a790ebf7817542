import { setTimeout as sleep } from 'node:timers/promises';
import { inspect } from 'node:util';
import { STEP_MS } from './bounds.js';

/** How long and how often `eventually` polls; `until` decides whether a value is the one awaited. */
export interface EventuallyOptions<T> {
  /** Give up after this long (default STEP_MS, a bound on liveness: see bounds.ts). The probe is always called at least once. */
  readonly timeoutMs?: number;
  /** Pause between probes (default 100 ms; 0 for probes that block themselves, like long polls). */
  readonly intervalMs?: number;
  /** Accept a value only when this holds (default: any value but undefined). */
  readonly until?: (value: T) => boolean;
}

/**
 * The one polling helper of the tests: calls `probe` until it returns a value that is not undefined
 * (and satisfies `until`), and returns it. A probe that throws counts as "not yet". After the timeout
 * it fails naming what was awaited and the last value or error seen, with that error as the cause.
 * A bare number is the timeout in milliseconds.
 */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  options: number | EventuallyOptions<T> = {},
): Promise<T> {
  const { timeoutMs = STEP_MS, intervalMs = 100, until } = typeof options === 'number' ? { timeoutMs: options } : options;
  const started = Date.now();
  let last: { value: unknown } | { error: unknown } | undefined;
  let tries = 0;
  for (;;) {
    tries += 1;
    try {
      const value = await probe();
      if (value !== undefined && (!until || until(value))) return value;
      last = { value };
    } catch (error) {
      last = { error };
    }
    const elapsed = Date.now() - started;
    if (elapsed >= timeoutMs) {
      const seen =
        last === undefined ? '' : 'error' in last ? `; last error: ${shown(last.error)}` : `; last value: ${shown(last.value)}`;
      throw new Error(`timed out after ${elapsed} ms (${tries} tries) waiting for ${what}${seen}`, {
        cause: last && 'error' in last ? last.error : undefined,
      });
    }
    if (intervalMs > 0) await sleep(Math.min(intervalMs, timeoutMs - elapsed));
  }
}

const shown = (value: unknown): string =>
  value instanceof Error ? `${value.name}: ${value.message}` : inspect(value, { depth: 4, breakLength: Infinity, maxStringLength: 500 });
