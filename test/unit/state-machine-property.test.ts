import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ATTENTION_KINDS, attentionEntry, attentionKind, type AttentionKind } from '../../shared/dispatch/attention.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import type { DispatchState, NextState } from '../../shared/dispatch/state.js';
import { isTerminal, stateOnly } from '../../shared/dispatch/state.js';
import { cancelAnswered, cancelLookedUp, cancelRequested } from '../../shared/dispatch/transitions/flow.js';
import { evidenceSettled } from '../../shared/dispatch/transitions/evidence.js';
import { applyRunEvent, approvalDecided, monitorStep, reconcileLookup, runRedriven, type RunEventType } from '../../shared/dispatch/transitions/run.js';
import { accepted, redispatched, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { resultClaimed, resultDelivered, resultReleased, resultRenewed, resultWatch } from '../../shared/dispatch/transitions/inbox.js';
import { cancelPending, isClaimable, isLive, leaseLapsed } from '../../shared/dispatch/transitions/core.js';
import { writeCondition } from '../../shared/ledger/repository.js';
import { NOT_STORED, notStored, type StoredState } from '../../shared/ledger/port.js';
import type { CancelOutcome, LookupOutcome, TargetRunStatus } from '../../shared/dispatch/target-answers.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

/**
 * The state machine under random sequences of what the world does to a dispatch: run events, lookups
 * (by the monitor, suspecting a stall, and by a refresh), monitor ticks, approval decisions, evidence
 * checks and forced redispatches — each computed either from the state stored or from an older
 * version a slow writer still holds (a fenced run's writer among them). Each result is committed the
 * way the table commits it: writeCondition (which throws on an illegal move) against what is stored.
 */
type Op =
  | { readonly kind: 'event'; readonly type: RunEventType; readonly seq: number; readonly from: number }
  | { readonly kind: 'lookup'; readonly outcome: LookupOutcome; readonly suspected: boolean; readonly from: number }
  | { readonly kind: 'tick'; readonly from: number }
  | { readonly kind: 'decide'; readonly decision: 'approve' | 'cancel'; readonly from: number }
  | { readonly kind: 'settle'; readonly outcome: 'handled' | 'orphan_no_delivery' | 'unverified'; readonly from: number }
  | { readonly kind: 'redispatch'; readonly from: number }
  | { readonly kind: 'wait'; readonly seconds: number };

const STATUSES: readonly TargetRunStatus[] = ['queued', 'running', 'waiting_for_approval', 'completed', 'failed', 'cancelled'];
/** 0: the state stored; n: the version n writes back (a stale writer's copy). */
const from = fc.oneof(fc.constant(0), fc.constant(0), fc.nat(6));
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('event' as const), type: fc.constantFrom<RunEventType>('heartbeat', 'progress', 'approval_requested', 'completed', 'failed', 'cancelled'), seq: fc.nat(20), from }),
  fc.record({
    kind: fc.constant('lookup' as const),
    outcome: fc.oneof(
      fc.constant<LookupOutcome>({ kind: 'not_found' }),
      fc.constant<LookupOutcome>({ kind: 'unavailable', reason: 'HTTP 503' }),
      fc.constantFrom(...STATUSES).map<LookupOutcome>((status) => ({ kind: 'found', run: { runId: 'current', status, ...(status === 'waiting_for_approval' ? { pendingApproval: { approvalId: 'a-lookup' } } : {}) } })),
    ),
    suspected: fc.boolean(),
    from,
  }),
  fc.record({ kind: fc.constant('tick' as const), from }),
  fc.record({ kind: fc.constant('decide' as const), decision: fc.constantFrom<'approve' | 'cancel'>('approve', 'cancel'), from }),
  fc.record({ kind: fc.constant('settle' as const), outcome: fc.constantFrom<'handled' | 'orphan_no_delivery' | 'unverified'>('handled', 'orphan_no_delivery', 'unverified'), from }),
  fc.record({ kind: fc.constant('redispatch' as const), from }),
  fc.record({ kind: fc.constant('wait' as const), seconds: fc.integer({ min: 1, max: 900 }) }),
);

const submitAt = (state: DispatchState, now: Date, runId: string) => submitted(state, { kind: 'accepted', runId, status: 'running', requestId: `q-${runId}` }, DEFAULT_RETRY_POLICY, now);

describe('the state machine (property: random sequences of events, lookups, ticks, decisions, checks and redispatches)', () => {
  it('never makes an illegal move, never regresses a final status, never commits a stale or fenced writer, and only the target sets nativeStatus', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 50 }), fc.constantFrom(0, 1), (ops, expectedCount) => {
        let clock = NOW.getTime();
        const now = () => new Date(clock);
        const start = accepted(newDispatchFactory({ expectedCount, timeouts: { stallAfterSeconds: 60, approvalWaitSeconds: 120, deliveryGraceSeconds: 30 } }), now());
        const first = submitAt(start, now(), 'r-1');
        writeCondition(notStored(start), first);
        /** What is stored: the state and the version the repository numbered it (the first write is version 1). */
        let stored: StoredState = { state: stateOnly(first), version: NOT_STORED + 1 };
        const history: StoredState[] = [stored];
        const finals = new Map<string, string>();
        let runs = 1;
        let staleRefused = 0;

        /** The table's commit: the machine's condition, checked against the version and phase stored. */
        const commit = (base: StoredState, next: NextState | undefined, targetSaid: boolean): boolean => {
          if (!next) return false;
          const condition = writeCondition(base, next); // throws on an illegal move: the property fails
          if (condition.create || condition.version !== stored.version || condition.phase !== stored.state.phase) {
            staleRefused += 1;
            expect(base.version).not.toBe(stored.version);
            return false;
          }
          if (next.runId === stored.state.runId && next.execution.nativeStatus !== stored.state.execution.nativeStatus) {
            expect(targetSaid).toBe(true); // nativeStatus is only ever the target's word
          }
          // The repository writes it as the next version of the one read.
          stored = { state: stateOnly(next), version: base.version + 1 };
          history.push(stored);
          return true;
        };

        for (const step of ops) {
          if (step.kind === 'wait') {
            clock += step.seconds * 1000;
            continue;
          }
          const base = history[Math.max(0, history.length - 1 - step.from)] as StoredState;
          const read = base.state;
          if (read.phase !== 'submitted') continue;
          switch (step.kind) {
            case 'event': {
              const outcome = applyRunEvent(read, { seq: step.seq, type: step.type, ...(step.type === 'approval_requested' ? { approvalId: 'a-1' } : {}) }, now());
              commit(base, outcome.kind === 'apply' ? outcome.next : undefined, true);
              break;
            }
            case 'lookup':
              if (isTerminal(read.execution.status)) break;
              commit(base, reconcileLookup(read, step.outcome, now(), step.suspected), step.outcome.kind === 'found');
              break;
            case 'tick': {
              const decided = monitorStep(read, now());
              if (decided.kind === 'write') commit(base, decided.next, false);
              break;
            }
            case 'decide':
              if (read.execution.pendingApproval) commit(base, approvalDecided(read, step.decision, now()), false);
              break;
            case 'settle':
              if (read.execution.status === 'completed' && read.evidence.outcome === 'pending') {
                commit(base, evidenceSettled(read, { outcome: step.outcome, expected: ['out/a.md'], missing: step.outcome === 'handled' ? [] : ['out/a.md'] }, now()), false);
              }
              break;
            case 'redispatch': {
              const fenced = redispatched(read, { reason: 'property', supersede: !isTerminal(read.execution.status), claimSeconds: 60 }, now());
              if (commit(base, fenced, false)) {
                runs += 1;
                // The submission is written on the version the redispatch left stored.
                const left = stored;
                commit(left, submitAt(left.state, now(), `r-${runs}`), true);
              }
              break;
            }
          }
          // Terminal is final: once a run's final status is recorded, it never changes for that run.
          const current = stored.state;
          if (current.runId && isTerminal(current.execution.nativeStatus)) {
            const known = finals.get(current.runId);
            if (known) expect(current.execution.nativeStatus).toBe(known);
            else finals.set(current.runId, current.execution.nativeStatus as string);
          }
          // Losing sight of a run is `unknown`, never a failure the target did not report.
          if (current.execution.status === 'failed') expect(current.execution.nativeStatus).toBe('failed');
          // A settled check is final for its attempt.
          if (current.evidence.outcome === 'handled') expect(current.execution.status).toBe('completed');
        }
        return staleRefused >= 0;
      }),
      { numRuns: 500 },
    );
  });
});

/**
 * CONTRACT §2 (V3): an attention entry's `since` is when its problem began. Random lives of one callback
 * dispatch — submissions that fail, are refused or run; run events, lookups, ticks, approvals, cancels,
 * evidence checks, result claims, renewals, releases, acks and expiries, redispatches — each written on
 * the state stored. Whenever a write keeps the dispatch on the same attention list, `since` stays where
 * it was; when it lands on a list, `since` is that write's time.
 */
type LifeOp =
  | { readonly kind: 'submit'; readonly answer: 'accepted' | 'unavailable' | 'rejected' }
  | { readonly kind: 'event'; readonly type: RunEventType; readonly seq: number }
  | { readonly kind: 'lookup'; readonly outcome: LookupOutcome; readonly suspected: boolean }
  /** The monitor's tick; `outcome` is what its lookup finds, when it makes one. */
  | { readonly kind: 'tick'; readonly outcome: LookupOutcome }
  | { readonly kind: 'decide'; readonly decision: 'approve' | 'cancel' }
  | { readonly kind: 'settle'; readonly outcome: 'handled' | 'orphan_no_delivery' | 'unverified' }
  | { readonly kind: 'cancel' }
  | { readonly kind: 'cancel_answer'; readonly outcome: CancelOutcome }
  | { readonly kind: 'result'; readonly action: 'claim' | 'renew' | 'release' | 'ack' | 'watch' }
  | { readonly kind: 'redispatch' }
  /** Its runtime runs an ended run again, outside the ledger (a state machine's redrive, CONTRACT §17). */
  | { readonly kind: 'redrive' }
  | { readonly kind: 'wait'; readonly seconds: number };

/** What a lookup may find. */
const lookupOutcome: fc.Arbitrary<LookupOutcome> = fc.oneof(
  fc.constant<LookupOutcome>({ kind: 'not_found' }),
  fc.constant<LookupOutcome>({ kind: 'unavailable', reason: 'HTTP 503' }),
  fc.constantFrom(...STATUSES).map<LookupOutcome>((status) => ({ kind: 'found', run: { runId: 'current', status, ...(status === 'waiting_for_approval' ? { pendingApproval: { approvalId: 'a-lookup' } } : {}) } })),
);

const lifeOp: fc.Arbitrary<LifeOp> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('submit' as const), answer: fc.constantFrom<'accepted' | 'unavailable' | 'rejected'>('accepted', 'accepted', 'accepted', 'unavailable', 'unavailable', 'rejected') }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('event' as const), type: fc.constantFrom<RunEventType>('heartbeat', 'progress', 'approval_requested', 'approval_requested', 'completed', 'completed', 'failed', 'cancelled'), seq: fc.nat(40) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('lookup' as const),
      outcome: lookupOutcome,
      suspected: fc.boolean(),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('tick' as const), outcome: lookupOutcome }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('decide' as const), decision: fc.constantFrom<'approve' | 'cancel'>('approve', 'cancel') }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('settle' as const), outcome: fc.constantFrom<'handled' | 'orphan_no_delivery' | 'unverified'>('handled', 'orphan_no_delivery', 'orphan_no_delivery', 'unverified') }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cancel' as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('cancel_answer' as const),
      outcome: fc.constantFrom<CancelOutcome>({ kind: 'unavailable', reason: 'HTTP 503' }, { kind: 'not_found' }, { kind: 'requested', how: 'control record' }, { kind: 'cancelled', status: 'running' }, { kind: 'cancelled', status: 'cancelled' }),
    }),
  },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('result' as const), action: fc.constantFrom<'claim' | 'renew' | 'release' | 'ack' | 'watch'>('claim', 'claim', 'renew', 'release', 'release', 'ack', 'watch') }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('redispatch' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('redrive' as const) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('wait' as const), seconds: fc.integer({ min: 1, max: 900 }) }) },
);

/** The next state an operation writes on `state` at `now`, or undefined when it does not apply there. */
function lifeStep(state: DispatchState, step: Exclude<LifeOp, { kind: 'wait' }>, now: Date, runs: number): NextState | undefined {
  const result = { ttlSeconds: 1800, maxDeliveryAttempts: 3 };
  switch (step.kind) {
    case 'submit': {
      if (state.phase !== 'accepted') return undefined;
      const answer =
        step.answer === 'accepted'
          ? ({ kind: 'accepted', runId: `r-${runs}`, status: 'running', requestId: `q-${runs}` } as const)
          : step.answer === 'unavailable'
            ? ({ kind: 'unavailable', reason: 'HTTP 503' } as const)
            : ({ kind: 'rejected', httpStatus: 400, reason: 'no such task' } as const);
      return submitted(state, answer, DEFAULT_RETRY_POLICY, now);
    }
    case 'event': {
      if (state.phase !== 'submitted') return undefined;
      const outcome = applyRunEvent(state, { seq: step.seq, type: step.type, ...(step.type === 'approval_requested' ? { approvalId: 'a-1' } : {}) }, now);
      return outcome.kind === 'apply' ? outcome.next : undefined;
    }
    case 'lookup':
      return state.phase === 'submitted' && !isTerminal(state.execution.status) ? reconcileLookup(state, step.outcome, now, step.suspected) : undefined;
    case 'tick': {
      if (state.phase !== 'submitted') return undefined;
      const decided = monitorStep(state, now);
      if (decided.kind === 'cancel_lookup') {
        const next = cancelLookedUp(state, step.outcome, now);
        // A look for a cancelled run's end, inside its stall window, concludes nothing but that end (never
        // unknown, never stalled), and leaves it due again later, never in the past.
        if (!isTerminal(next.execution.status)) {
          expect(next.execution).toMatchObject({ status: state.execution.status, monitorStatus: null });
          expect(Date.parse(next.dueAt ?? '')).toBeGreaterThan(now.getTime());
        }
        return next;
      }
      return decided.kind === 'write' ? decided.next : decided.kind === 'result' ? resultWatch(state, result, now) : undefined;
    }
    case 'decide':
      return state.phase === 'submitted' && state.execution.pendingApproval ? approvalDecided(state, step.decision, now) : undefined;
    case 'settle':
      return state.phase === 'submitted' && state.execution.status === 'completed' && state.evidence.outcome === 'pending'
        ? evidenceSettled(state, { outcome: step.outcome, expected: ['out/a.md'], missing: step.outcome === 'handled' ? [] : ['out/a.md'] }, now)
        : undefined;
    case 'cancel':
      return state.phase === 'submitted' && !state.cancel && !isTerminal(state.execution.nativeStatus) ? cancelRequested(state, { reason: 'not needed', by: 'planner' }, now) : undefined;
    case 'cancel_answer':
      return cancelPending(state) ? cancelAnswered(state, step.outcome, DEFAULT_RETRY_POLICY, now) : undefined;
    case 'result': {
      const held = state.result;
      if (step.action === 'claim') return isClaimable(held, now) ? resultClaimed(state, { claimToken: `t-${now.getTime()}`, leaseSeconds: 60 }, now) : undefined;
      if (step.action === 'watch') return isLive(held) ? resultWatch(state, result, now) : undefined;
      if (held?.state !== 'claimed') return undefined;
      if (step.action === 'renew') return leaseLapsed(held, now) ? undefined : resultRenewed(state, 60, now);
      if (step.action === 'release') return resultReleased(state, result.maxDeliveryAttempts, now);
      return resultDelivered(state, 'planner', now);
    }
    case 'redispatch':
      return state.phase === 'accepted' ? undefined : redispatched(state, { reason: 'property', supersede: state.phase === 'submitted' && (!isTerminal(state.execution.status) || !!state.execution.redriven), claimSeconds: 60 }, now);
    case 'redrive':
      return state.phase === 'submitted' && isTerminal(state.execution.nativeStatus) ? runRedriven(state, (state.execution.redriven?.count ?? 0) + 1, now) : undefined;
  }
}

describe('attention since (property: random lives of a dispatch)', () => {
  it('keeps since where the problem began through every later write that keeps the dispatch on the same attention list', () => {
    const kindsSeen = new Set<AttentionKind>();
    const keptThrough = new Set<AttentionKind>();
    fc.assert(
      fc.property(fc.array(lifeOp, { minLength: 20, maxLength: 80, size: 'max' }), fc.constantFrom(0, 1), (ops, expectedCount) => {
        let clock = NOW.getTime();
        // Version 0: not stored yet (its first write creates it).
        let stored: StoredState = notStored(accepted(newDispatchFactory({ expectedCount, timeouts: { stallAfterSeconds: 60, approvalWaitSeconds: 120, deliveryGraceSeconds: 30 } }), new Date(clock)));
        let runs = 0;
        for (const step of ops) {
          if (step.kind === 'wait') {
            clock += step.seconds * 1000;
            continue;
          }
          if (step.kind === 'submit' && step.answer === 'accepted') runs += 1;
          const now = new Date(clock);
          const next = lifeStep(stored.state, step, now, runs);
          if (!next) continue;
          writeCondition(stored, next); // a legal move, or the property fails
          const before = attentionKind(stored.state);
          const after = attentionKind(next);
          if (after) {
            kindsSeen.add(after);
            const since = attentionEntry(next, after).since;
            if (after === before && stored.version > NOT_STORED) {
              expect(since).toBe(attentionEntry(stored.state, before).since);
              if (next.updatedAt !== since) keptThrough.add(after);
            } else {
              expect(since).toBe(now.toISOString());
            }
          }
          // Written as the next version: the next step starts from the state alone.
          stored = { state: stateOnly(next), version: stored.version + 1 };
          clock += 1000;
        }
      }),
      {
        numRuns: 1500,
        // Lives that random ones reach only now and then (a run that fails here failed once in a full run):
        // an approval wait that expires, then a lookup during the expired wait that finds the run still
        // waiting — a write that keeps the dispatch on the approval_wait_expired list.
        examples: [
          [
            [
              { kind: 'submit', answer: 'accepted' },
              { kind: 'event', type: 'approval_requested', seq: 1 },
              { kind: 'wait', seconds: 200 },
              { kind: 'tick', outcome: { kind: 'unavailable', reason: 'HTTP 503' } },
              { kind: 'wait', seconds: 90 },
              { kind: 'lookup', outcome: { kind: 'found', run: { runId: 'current', status: 'waiting_for_approval', pendingApproval: { approvalId: 'a-1' } } }, suspected: false },
              { kind: 'wait', seconds: 90 },
              { kind: 'event', type: 'heartbeat', seq: 2 },
            ],
            0,
          ],
        ],
      },
    );
    // Every list a dispatch can be on was reached, and held through a later write.
    expect([...kindsSeen].sort()).toEqual([...ATTENTION_KINDS].sort());
    expect([...keptThrough].sort()).toEqual([...ATTENTION_KINDS].sort());
  });
});
