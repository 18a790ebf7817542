import { createHash } from 'node:crypto';

/**
 * The submission retry budget (CONTRACT §1: default 10 attempts over ~1 h). `delaysSeconds[i]` is the
 * wait after failed attempt i+1; the budget is one attempt more than there are delays.
 */
export interface RetryPolicy {
  readonly delaysSeconds: readonly number[];
  /** ± fraction of each delay, spread deterministically per dispatch so retries of an outage don't align. */
  readonly jitter: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  // 30 s, 1, 2, 4, 8 min, then every 10 min: 10 attempts within ~55 min.
  delaysSeconds: [30, 60, 120, 240, 480, 600, 600, 600, 600],
  jitter: 0.2,
};

export const maxAttempts = (policy: RetryPolicy): number => policy.delaysSeconds.length + 1;

/** The longest the whole budget can take: every delay at its jitter's upper edge. */
export const retryBudgetSeconds = (policy: RetryPolicy): number => Math.ceil(policy.delaysSeconds.reduce((sum, delay) => sum + delay, 0) * (1 + policy.jitter));

/** When to try again after `failedAttempts` failures, or undefined when the budget is spent. */
export function nextRetryAt(policy: RetryPolicy, dispatchId: string, failedAttempts: number, now: Date): Date | undefined {
  const base = policy.delaysSeconds[failedAttempts - 1];
  if (base === undefined) return undefined;
  const digest = createHash('sha256').update(`${dispatchId}:${failedAttempts}`).digest();
  const unit = digest.readUInt32BE(0) / 0xffffffff; // 0..1, stable for this dispatch and attempt
  const factor = 1 + policy.jitter * (unit * 2 - 1);
  return new Date(now.getTime() + Math.round(base * factor * 1000));
}

/** Reads a policy from a comma-separated list of seconds (config), e.g. "1,1,1". */
export function parseRetryDelays(text: string): RetryPolicy {
  const delaysSeconds = text.split(',').map((part) => Number(part.trim()));
  if (delaysSeconds.length === 0 || delaysSeconds.some((value) => !Number.isFinite(value) || value <= 0)) {
    throw new RangeError(`retry delays must be positive seconds, comma-separated; got "${text}"`);
  }
  return { delaysSeconds, jitter: DEFAULT_RETRY_POLICY.jitter };
}
