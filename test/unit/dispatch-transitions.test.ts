import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from '../../shared/dispatch/retry.js';
import { blockedReason, NO_EXECUTION, stateOnly, type NextState } from '../../shared/dispatch/state.js';
import { NOT_STORED, notStored } from '../../shared/ledger/port.js';
import { accepted, submitted, type NewDispatch } from '../../shared/dispatch/transitions/lifecycle.js';
import { blocked, finished } from '../../shared/dispatch/transitions/core.js';
import { newDispatchFactory, NOW, WRITTEN_AT } from '../support/factories.js';
import { MemoryStore } from '../support/memory-store.js';
import type { SubmitOutcome } from '../../shared/dispatch/target-answers.js';

const later = (seconds: number): Date => new Date(NOW.getTime() + seconds * 1000);
const TWO_RETRIES: RetryPolicy = { delaysSeconds: [1, 1], jitter: 0.2 };
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;


const acceptedStateFactory = (overrides: Partial<NewDispatch> = {}): NextState => accepted(newDispatchFactory(overrides), NOW);

const acceptedOutcome = (overrides: Partial<Extract<SubmitOutcome, { kind: 'accepted' }>> = {}): SubmitOutcome => ({
  kind: 'accepted',
  runId: 'r-1',
  status: 'queued',
  requestId: 'req-1',
  ...overrides,
});
const rejectedOutcome = (reason = 'unknown behaviour', httpStatus = 422): SubmitOutcome => ({ kind: 'rejected', httpStatus, reason });
const unavailableOutcome = (reason = 'HTTP 503: try later'): SubmitOutcome => ({ kind: 'unavailable', reason });

/** Feeds `count` unavailable answers, one second apart. */
function failSubmissions(state: NextState, count: number, policy: RetryPolicy, reason = 'HTTP 503: try later'): NextState {
  let current = state;
  for (let i = 0; i < count; i += 1) current = submitted(current, unavailableOutcome(reason), policy, later(i));
  return current;
}

describe('accepted', () => {
  it('starts attempt 1 with a dispatch_written receipt and nothing tried when a dispatch is written', () => {
    const state = acceptedStateFactory({ hop: 1, maxHops: 3, parentDispatchId: 'd-0', deliveryMode: 'detached' });
    expect(state).toEqual({
      dispatchId: 'd-2026-0001',
      origin: 'planner',
      target: 'demo-agent',
      createdAt: WRITTEN_AT,
      updatedAt: NOW.toISOString(),
      phase: 'accepted',
      blockedCode: null,
      blockedReason: null,
      attempt: 1,
      runId: null,
      lastSeq: null,
      supersededRuns: [],
      hop: 1,
      maxHops: 3,
      parentDispatchId: 'd-0',
      deliveryMode: 'detached',
      timeouts: { stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 },
      submission: { attempts: 0, nextRetryAt: null, lastError: null },
      execution: NO_EXECUTION,
      receipts: [{ event: 'dispatch_written', at: WRITTEN_AT, attempt: 1 }],
      evidence: { outcome: 'unverified', expectedCount: 0, deadline: null },
      dueAt: null,
      changes: ['accepted'],
      dueAtRead: null,
    });
  });
});

describe('submitted', () => {
  it('moves to submitted with the run handle and proof when the target accepts', () => {
    const before = acceptedStateFactory({ timeouts: { stallAfterSeconds: 90, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 } });
    const after = submitted(before, acceptedOutcome({ runId: 'r-42', status: 'running', requestId: 'req-9' }), DEFAULT_RETRY_POLICY, NOW);
    expect(after.phase).toBe('submitted');
    expect(after.runId).toBe('r-42');
    expect(after.attempt).toBe(1);
    expect(after.submission).toEqual({ attempts: 1, nextRetryAt: null, lastError: null });
    expect(after.execution).toEqual({ ...NO_EXECUTION, status: 'running', nativeStatus: 'running', lastActivityAt: NOW.toISOString() });
    expect(after.receipts).toEqual([
      { event: 'dispatch_written', at: WRITTEN_AT, attempt: 1 },
      { event: 'dispatch_submitted', at: NOW.toISOString(), attempt: 1, runId: 'r-42', requestId: 'req-9' },
    ]);
    expect(after.dueAt).toBe(later(90).toISOString());
    expect(after.updatedAt).toBe(NOW.toISOString());
    expect(after.changes).toEqual([...before.changes, 'submitted']);
    expect(after.blockedReason).toBeNull();
  });

  it('leaves the state it was given untouched when it applies an outcome', () => {
    const before = acceptedStateFactory();
    const snapshot = structuredClone(before);
    submitted(before, acceptedOutcome(), DEFAULT_RETRY_POLICY, NOW);
    submitted(before, rejectedOutcome(), DEFAULT_RETRY_POLICY, NOW);
    submitted(before, unavailableOutcome(), DEFAULT_RETRY_POLICY, NOW);
    expect(before).toEqual(snapshot);
  });

  it('blocks with target_rejected, a dispatch_blocked receipt and nothing due when the target rejects', () => {
    const before = acceptedStateFactory({ deliveryMode: 'detached' });
    const after = submitted(before, rejectedOutcome('unknown behaviour "x"', 422), DEFAULT_RETRY_POLICY, NOW);
    expect(after.phase).toBe('blocked');
    expect(after.blockedReason).toBe('target_rejected: HTTP 422: unknown behaviour "x"');
    expect(after.runId).toBeNull();
    expect(after.submission).toEqual({ attempts: 1, nextRetryAt: null, lastError: 'HTTP 422: unknown behaviour "x"' });
    expect(after.receipts.at(-1)).toEqual({
      event: 'dispatch_blocked',
      at: NOW.toISOString(),
      attempt: 1,
      reason: 'target_rejected: HTTP 422: unknown behaviour "x"',
    });
    expect(after.receipts).toHaveLength(2);
    expect(after.dueAt).toBeNull();
    expect(after.changes).toEqual([...before.changes, 'blocked']);
  });

  it('stays accepted with a retry scheduled within the jitter when the target is unavailable', () => {
    const before = acceptedStateFactory();
    const after = submitted(before, unavailableOutcome('connect ECONNREFUSED'), DEFAULT_RETRY_POLICY, NOW);
    expect(after.phase).toBe('accepted');
    expect(after.runId).toBeNull();
    expect(after.blockedReason).toBeNull();
    expect(after.submission.attempts).toBe(1);
    expect(after.submission.lastError).toBe('connect ECONNREFUSED');
    const retryAt = Date.parse(after.submission.nextRetryAt ?? '');
    expect(retryAt).toBeGreaterThanOrEqual(later(30 * 0.8).getTime());
    expect(retryAt).toBeLessThanOrEqual(later(30 * 1.2).getTime());
    expect(after.dueAt).toBe(after.submission.nextRetryAt);
    expect(after.receipts).toEqual(before.receipts);
    expect(after.updatedAt).toBe(NOW.toISOString());
    expect(after.changes).toEqual([...before.changes, 'retry_scheduled']);
  });

  it('schedules the same retry when the same failure is applied twice', () => {
    const once = submitted(acceptedStateFactory(), unavailableOutcome(), DEFAULT_RETRY_POLICY, NOW);
    const again = submitted(acceptedStateFactory(), unavailableOutcome(), DEFAULT_RETRY_POLICY, NOW);
    expect(again.submission.nextRetryAt).toBe(once.submission.nextRetryAt);
  });

  it('keeps retrying while the budget lasts and bumps the version on every failure', () => {
    const before = acceptedStateFactory();
    const afterTwo = failSubmissions(before, 2, TWO_RETRIES);
    expect(afterTwo.phase).toBe('accepted');
    expect(afterTwo.submission.attempts).toBe(2);
    expect(afterTwo.submission.nextRetryAt).not.toBeNull();
    expect(afterTwo.changes).toEqual([...before.changes, 'retry_scheduled', 'retry_scheduled']);
  });

  it('blocks with retry_budget_spent when the last attempt of the budget fails', () => {
    const before = acceptedStateFactory({ deliveryMode: 'detached' });
    const after = failSubmissions(before, 3, TWO_RETRIES, 'HTTP 503: down');
    expect(after.phase).toBe('blocked');
    expect(after.blockedReason).toBe('retry_budget_spent: 3 submission attempts failed; last: HTTP 503: down');
    expect(after.submission).toEqual({ attempts: 3, nextRetryAt: null, lastError: 'HTTP 503: down' });
    expect(after.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written', 'dispatch_blocked']);
    expect(after.receipts.at(-1)).toMatchObject({ event: 'dispatch_blocked', attempt: 1, reason: after.blockedReason });
    expect(after.dueAt).toBeNull();
    expect(after.changes).toEqual([...before.changes, 'retry_scheduled', 'retry_scheduled', 'blocked']);
  });

  it('blocks after 10 failed attempts when the default policy is used', () => {
    const nine = failSubmissions(acceptedStateFactory(), 9, DEFAULT_RETRY_POLICY);
    expect(nine.phase).toBe('accepted');
    const ten = submitted(nine, unavailableOutcome(), DEFAULT_RETRY_POLICY, later(3600));
    expect(ten.phase).toBe('blocked');
    expect(ten.blockedReason).toMatch(/^retry_budget_spent: 10 submission attempts failed/);
  });

  it('clears the last error and counts every call when a retry is finally accepted', () => {
    const retried = failSubmissions(acceptedStateFactory(), 2, TWO_RETRIES);
    const after = submitted(retried, acceptedOutcome(), TWO_RETRIES, later(10));
    expect(after.phase).toBe('submitted');
    expect(after.submission).toEqual({ attempts: 3, nextRetryAt: null, lastError: null });
    expect(after.dueAt).toBe(later(10 + 600).toISOString());
  });

  it('bounds the last error and the blocked reason to 300 characters when the target says a lot', () => {
    const long = 'x'.repeat(5000);
    const rejected = submitted(acceptedStateFactory(), rejectedOutcome(long), DEFAULT_RETRY_POLICY, NOW);
    expect(rejected.blockedReason?.length).toBeLessThanOrEqual(300);
    expect(rejected.blockedReason?.endsWith('…')).toBe(true);
    expect(rejected.submission.lastError?.length).toBeLessThanOrEqual(300);
    const spent = failSubmissions(acceptedStateFactory(), 3, TWO_RETRIES, long);
    expect(spent.blockedReason?.length).toBeLessThanOrEqual(300);
    expect(spent.submission.lastError?.length).toBeLessThanOrEqual(300);
    expect(spent.receipts.at(-1)).toMatchObject({ reason: spent.blockedReason });
  });

  it('strips control characters from the blocked reason when the target answers with them', () => {
    const after = submitted(acceptedStateFactory(), rejectedOutcome('bad\r\ninput\u0000\u001b[31m here\u0085'), DEFAULT_RETRY_POLICY, NOW);
    expect(after.blockedReason).toBe('target_rejected: HTTP 422: bad input [31m here');
    expect(after.receipts.at(-1)).toMatchObject({ reason: after.blockedReason });
  });
});

describe('blocked', () => {
  it('records the code and detail in the reason and a dispatch_blocked receipt when blocked before contact', () => {
    const before = acceptedStateFactory({ deliveryMode: 'detached' });
    const after = blocked(before, 'unknown_target', 'no target named "ghost"', NOW);
    expect(after.phase).toBe('blocked');
    expect(after.blockedReason).toBe('unknown_target: no target named "ghost"');
    expect(after.receipts).toEqual([
      ...before.receipts,
      { event: 'dispatch_blocked', at: NOW.toISOString(), attempt: 1, reason: 'unknown_target: no target named "ghost"' },
    ]);
    expect(after.submission.nextRetryAt).toBeNull();
    expect(after.dueAt).toBeNull();
    expect(after.changes).toEqual([...before.changes, 'blocked']);
  });

  it('uses the bare code when the detail is empty or only control characters', () => {
    expect(blocked(acceptedStateFactory(), 'hop_budget_exceeded', '', NOW).blockedReason).toBe('hop_budget_exceeded');
    expect(blocked(acceptedStateFactory(), 'invalid_fields', '\u0000\n\t ', NOW).blockedReason).toBe('invalid_fields');
  });

  it('cancels a scheduled retry when a retrying dispatch is blocked', () => {
    const retrying = failSubmissions(acceptedStateFactory({ deliveryMode: 'detached' }), 1, DEFAULT_RETRY_POLICY);
    const after = blocked(retrying, 'target_rejected', 'gone', later(60));
    expect(after.submission.nextRetryAt).toBeNull();
    expect(after.dueAt).toBeNull();
  });
});

describe('blockedReason', () => {
  it('is at most 300 characters and free of control characters whatever the detail', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 1000 }), (detail) => {
        const reason = blockedReason('target_rejected', detail);
        expect(reason.length).toBeLessThanOrEqual(300);
        expect(reason).not.toMatch(CONTROL);
        expect(reason.startsWith('target_rejected')).toBe(true);
      }),
    );
  });

  it('keeps a short detail unchanged apart from trimming', () => {
    expect(blockedReason('unknown_parent', '  parent d-0 not found  ')).toBe('unknown_parent: parent d-0 not found');
  });

  it('never splits a surrogate pair when a long reason is truncated (regression: a cut emoji left a lone surrogate)', () => {
    // state.ts:96 (and transitions.ts:12 `bounded`) cut at UTF-16 index 299: an emoji straddling the
    // cut leaves a lone high surrogate, which is not well-formed Unicode (stored, published, shown).
    const detail = `${'a'.repeat(300 - 'target_rejected: '.length - 2)}${'😀'.repeat(10)}`;
    const reason = blockedReason('target_rejected', detail);
    expect(reason.length).toBeLessThanOrEqual(300);
    expect(reason).not.toMatch(LONE_SURROGATE);
  });
});

describe('advance (what each committed version changed)', () => {
  it('carries the changes of the unstored version 0 into the first stored one, and only its own after that', async () => {
    const store = new MemoryStore();
    const base = acceptedStateFactory({ deliveryMode: 'detached' });
    const first = submitted(base, acceptedOutcome(), DEFAULT_RETRY_POLICY, NOW);
    expect(await store.commit(notStored(stateOnly(base)), first)).toEqual({ kind: 'committed' });
    const stored = await store.getStored(first.dispatchId);
    if (!stored) throw new Error('the first version was not stored');
    // The next transition starts from the version read (the repository numbers the versions: this one's is 1).
    const second = blocked(stored.state, 'target_rejected', 'later', later(1));
    expect(first.changes).toEqual(['accepted', 'submitted']);
    expect(store.written.get(first.dispatchId)).toEqual({ version: NOT_STORED + 1, changes: ['accepted', 'submitted'] });
    expect(stored.version).toBe(NOT_STORED + 1);
    expect(second.changes).toEqual(['blocked']);
    // Committed (a move the state machine allows from submitted), it is the next version, with its own changes only.
    const failed = finished(stored.state, 'failed', undefined, later(1));
    expect(await store.commit(stored, failed)).toEqual({ kind: 'committed' });
    expect(store.written.get(first.dispatchId)).toEqual({ version: stored.version + 1, changes: ['failed'] });
  });
});
