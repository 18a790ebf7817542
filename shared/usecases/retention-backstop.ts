import { MAX_TIMEOUT_SECONDS, NOT_BEFORE_MAX_DAYS } from '../dispatch/message.js';
import { DEFAULT_RETRY_POLICY, retryBudgetSeconds, type RetryPolicy } from '../dispatch/retry.js';
import { PARENT_WAIT_SECONDS } from '../dispatch/state.js';
import { MAX_LEASE_SECONDS, MAX_ORIGIN_SETTINGS } from '../dispatch/records.js';

/**
 * The age rule of the ledger's bucket: a backstop behind the retention function, never the way objects
 * normally go (CONTRACT §7: "set longer than the configured retention plus the longest a dispatch may
 * stay open"). The reasoning, with numbers, is in docs/reliability.md ("Retention").
 */

const DAY_SECONDS = 86_400;

/**
 * How long after an item's `expiresAt` DynamoDB's TTL may take to delete it ("typically within a few
 * days"), plus the day the retention stream mapping retries a record (`maxRecordAge`, object-retention.ts).
 */
export const TTL_DELETION_ALLOWANCE_DAYS = 7 + 1;

/** Each of the contract's bounded clocks at its bound, in seconds: what can keep one dispatch open. */
export function openClocks(retryPolicy: RetryPolicy = DEFAULT_RETRY_POLICY): Readonly<Record<string, number>> {
  return {
    // Before the first submission: `notBefore` ≤ 30 days ahead, a child held for its parent, the retry budget.
    notBefore: NOT_BEFORE_MAX_DAYS * DAY_SECONDS,
    parentHold: PARENT_WAIT_SECONDS,
    retryBudget: retryBudgetSeconds(retryPolicy),
    // The run: silence until a stall, an approval's wait, the evidence grace — each ≤ the 30-day timeout bound.
    stallAfter: MAX_TIMEOUT_SECONDS,
    approvalWait: MAX_TIMEOUT_SECONDS,
    deliveryGrace: MAX_TIMEOUT_SECONDS,
    // The result: pending until its TTL, then every delivery attempt's lease lapsing in turn.
    resultTtl: MAX_ORIGIN_SETTINGS.resultTtlHours * 3600,
    deliveryLeases: MAX_ORIGIN_SETTINGS.maxDeliveryAttempts * MAX_LEASE_SECONDS,
  };
}

/** The longest a dispatch may stay open on the contract's bounded clocks, end to end (seconds). */
export const longestOpenSeconds = (retryPolicy: RetryPolicy = DEFAULT_RETRY_POLICY): number => Object.values(openClocks(retryPolicy)).reduce((sum, seconds) => sum + seconds, 0);

/**
 * Days after which the bucket's rule expires an object: past the moment the last record naming it is
 * gone. A dispatch's objects are written at or after its acceptance; its state expires `retention`
 * after it closes (≤ `longestOpen` after acceptance), and its anchor 2 × `retention` after it was
 * written or last put back — which happens only while the state lives. So every record naming an
 * object is gone by `longestOpen + 3 × retention` after acceptance, plus TTL's own delay.
 *
 * @example
 * objectBackstopDays(90) // 430: 152 days open + 270 + 8
 */
export function objectBackstopDays(retentionDays: number, retryPolicy: RetryPolicy = DEFAULT_RETRY_POLICY): number {
  return Math.ceil(longestOpenSeconds(retryPolicy) / DAY_SECONDS) + 3 * retentionDays + TTL_DELETION_ALLOWANCE_DAYS;
}
