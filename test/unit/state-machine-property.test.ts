import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import type { DispatchState } from '../../shared/dispatch/state.js';
import {
  accepted,
  applyRunEvent,
  isTerminal,
  monitorStep,
  reconcileLookup,
  redispatched,
  submitted,
  writeCondition,
  type RunEventType,
} from '../../shared/dispatch/transitions.js';
import type { LookupOutcome, TargetRunStatus } from '../../shared/targets/port.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

/**
 * The state machine under random sequences of what the world does to a dispatch: run events (of the
 * current run or a stale one), lookups, monitor ticks, forced redispatches. Each step is committed the
 * way the table commits it (writeCondition against the version stored), from either the current
 * state or a stale copy a slow writer still holds.
 */
type Op =
  | { readonly kind: 'event'; readonly type: RunEventType; readonly seq: number; readonly stale: boolean }
  | { readonly kind: 'lookup'; readonly outcome: LookupOutcome; readonly stale: boolean }
  | { readonly kind: 'tick'; readonly stale: boolean }
  | { readonly kind: 'redispatch' }
  | { readonly kind: 'wait'; readonly seconds: number };

const STATUSES: readonly TargetRunStatus[] = ['queued', 'running', 'waiting_for_approval', 'completed', 'failed', 'cancelled'];
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('event' as const), type: fc.constantFrom<RunEventType>('heartbeat', 'progress', 'approval_requested', 'completed', 'failed', 'cancelled'), seq: fc.nat(20), stale: fc.boolean() }),
  fc.record({
    kind: fc.constant('lookup' as const),
    outcome: fc.oneof(
      fc.constant<LookupOutcome>({ kind: 'not_found' }),
      fc.constant<LookupOutcome>({ kind: 'unavailable', reason: 'HTTP 503' }),
      fc.constantFrom(...STATUSES).map<LookupOutcome>((status) => ({ kind: 'found', run: { runId: 'current', status, ...(status === 'waiting_for_approval' ? { pendingApproval: { approvalId: 'a-lookup' } } : {}) } })),
    ),
    stale: fc.boolean(),
  }),
  fc.record({ kind: fc.constant('tick' as const), stale: fc.boolean() }),
  fc.constant<Op>({ kind: 'redispatch' }),
  fc.record({ kind: fc.constant('wait' as const), seconds: fc.integer({ min: 1, max: 900 }) }),
);

const submitAt = (state: DispatchState, now: Date, runId: string) => submitted(state, { kind: 'accepted', runId, status: 'running', requestId: `q-${runId}` }, DEFAULT_RETRY_POLICY, now);

describe('the state machine (property: random sequences of events, lookups, ticks and redispatches)', () => {
  it('never regresses a final status, never commits from a fenced run or a stale copy, and only the target sets nativeStatus', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        let clock = NOW.getTime();
        const now = () => new Date(clock);
        const start = accepted(newDispatchFactory({ expectedCount: 0, timeouts: { stallAfterSeconds: 60, approvalWaitSeconds: 120, deliveryGraceSeconds: 30 } }), now());
        let stored = submitAt(start, now(), 'r-1');
        writeCondition(start, stored);
        let previous = stored;
        const finals = new Map<string, string>();
        let runs = 1;

        const commit = (from: DispatchState, next: DispatchState | undefined, targetSaid: boolean): void => {
          if (!next) return;
          const condition = writeCondition(from, next); // throws on an illegal move: the property fails
          if (condition.create || condition.version !== stored.version || condition.phase !== stored.phase) {
            // The table refuses it: a stale or fenced writer never commits.
            expect(from.version === stored.version && from.phase === stored.phase).toBe(false);
            return;
          }
          if (next.runId === stored.runId && next.execution.nativeStatus !== stored.execution.nativeStatus) {
            expect(targetSaid).toBe(true); // nativeStatus is only ever the target's word
          }
          stored = next;
        };

        for (const step of ops) {
          const from = 'stale' in step && step.stale ? previous : stored;
          previous = stored;
          switch (step.kind) {
            case 'wait':
              clock += step.seconds * 1000;
              break;
            case 'event': {
              if (from.runId === null || from.phase !== 'submitted') break;
              const outcome = applyRunEvent(from, { seq: step.seq, type: step.type, ...(step.type === 'approval_requested' ? { approvalId: 'a-1' } : {}) }, now());
              commit(from, outcome.kind === 'apply' ? outcome.next : undefined, true);
              break;
            }
            case 'lookup':
              if (from.phase !== 'submitted' || isTerminal(from.execution.status)) break;
              commit(from, reconcileLookup(from, step.outcome, now(), true), step.outcome.kind === 'found');
              break;
            case 'tick': {
              if (from.phase !== 'submitted') break;
              const decided = monitorStep(from, now());
              if (decided.kind === 'write') commit(from, decided.next, false);
              break;
            }
            case 'redispatch': {
              if (from.phase !== 'submitted') break;
              const fenced = redispatched(from, { reason: 'property', supersede: !isTerminal(from.execution.status), claimSeconds: 60 }, now());
              commit(from, fenced, false);
              if (stored === fenced) {
                runs += 1;
                const resubmitted = submitAt(fenced, now(), `r-${runs}`);
                commit(fenced, resubmitted, true);
              }
              break;
            }
          }
          // Terminal is final: once a run's final status is recorded, it never changes for that run.
          if (stored.runId && isTerminal(stored.execution.nativeStatus)) {
            const known = finals.get(stored.runId);
            if (known) expect(stored.execution.nativeStatus).toBe(known);
            else finals.set(stored.runId, stored.execution.nativeStatus as string);
          }
          // A lost sight of a run is `unknown`, never a failure the target did not report.
          if (stored.execution.status === 'failed') expect(stored.execution.nativeStatus).toBe('failed');
        }
      }),
      { numRuns: 300 },
    );
  });
});
