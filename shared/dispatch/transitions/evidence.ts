import type { ChangeKind, DispatchState, InlineCheck, NextState } from '../state.js';
import { advance } from './core.js';

/**
 * The post-condition (CONTRACT §5): the platform's own check of the expected evidence settles, or is asked again.
 */

export interface SettledEvidence {
  readonly outcome: 'handled' | 'orphan_no_delivery' | 'unverified';
  readonly expected: readonly string[];
  readonly missing: readonly string[];
  /** The check's record, when the state carries it (it fits the hot item); else it is an item of its own. */
  readonly check?: InlineCheck | undefined;
}

/** The platform's own check of the evidence reached a final outcome (CONTRACT §5). */
export function evidenceSettled(state: DispatchState, settled: SettledEvidence, now: Date): NextState {
  const at = now.toISOString();
  const kind: ChangeKind = settled.outcome === 'handled' ? 'handled' : settled.outcome === 'orphan_no_delivery' ? 'orphaned' : 'evidence_unverified';
  return advance(state, kind, now, {
    // The refs its event names travel with the state: Handled/Orphaned are published from this committed
    // change, so a completion whose write lost to a concurrent redispatch publishes nothing.
    // (The deadline is done with; the hot item stays within one write unit.)
    evidence: {
      outcome: settled.outcome,
      expectedCount: state.evidence.expectedCount,
      deadline: null,
      expected: settled.expected,
      ...(settled.outcome !== 'unverified' && settled.missing.length > 0 ? { missing: settled.missing } : {}),
      ...(settled.check ? { check: settled.check } : {}),
    },
    receipts:
      settled.outcome === 'handled'
        ? [...state.receipts, { event: 'dispatch_completed', at, attempt: state.attempt, runId: state.runId ?? '', evidenceCount: settled.expected.length }]
        : state.receipts,
    dueAt: null,
  });
}

/** An expected file arrived after a check found it missing: checked again from the next tick. */
export function evidenceRecheck(state: DispatchState, now: Date): NextState {
  return advance(state, 'evidence_recheck', now, { dueAt: now.toISOString() });
}
