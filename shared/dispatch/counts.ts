import { EXECUTION_STATUSES } from '@dispatch-ledger/protocol';
import type { DispatchState, EvidenceState, ExecutionStatus, Phase } from './state.js';
import { PHASES as MACHINE_PHASES } from './transitions/legal.js';

/**
 * What `GET /counts` answers (CONTRACT §2 v2): how many dispatches the ledger holds now, by phase, by
 * execution status (`none` before submission, when the status is null) and by evidence outcome.
 *
 * The counts are kept as deltas, never by reading the table: each committed change of a dispatch's
 * state moves it from the buckets of its old version to those of its new one (created: from none;
 * removed, e.g. by TTL: to none). Summing the deltas of every change from zero gives the counts of the
 * states that exist — this module is that arithmetic, pure; the publisher applies it to counter items.
 *
 * @example
 * countDelta(undefined, created)   // { total: 1, 'phase.accepted': 1, 'execution.none': 1, 'evidence.unverified': 1 }
 * countDelta(created, submitted)   // { 'phase.accepted': -1, 'phase.submitted': 1, 'execution.none': -1, 'execution.queued': 1 }
 */

/** The phases, as the one state machine names them. */
export const PHASES: readonly Phase[] = MACHINE_PHASES;
export const EXECUTION_BUCKETS: ReadonlyArray<ExecutionStatus | 'none'> = ['none', ...EXECUTION_STATUSES];
export const EVIDENCE_OUTCOMES: ReadonlyArray<EvidenceState['outcome']> = ['pending', 'handled', 'orphan_no_delivery', 'unverified'];

/** A change of counts: bucket name (`total`, `phase.accepted`, `execution.none`, …) → how much it moves. Zeros are left out. */
export type CountDelta = Readonly<Record<string, number>>;

export interface Counts {
  readonly total: number;
  readonly phase: Readonly<Record<string, number>>;
  readonly execution: Readonly<Record<string, number>>;
  readonly evidence: Readonly<Record<string, number>>;
}

const GROUPS = ['phase', 'execution', 'evidence'] as const;

/** The buckets one state is counted in: always four (the total, and one of each group). */
export function bucketsOf(state: DispatchState): readonly string[] {
  return ['total', `phase.${state.phase}`, `execution.${state.execution.status ?? 'none'}`, `evidence.${state.evidence.outcome}`];
}

/** Sums deltas, leaving out the buckets that end at zero. */
export function sumDeltas(deltas: Iterable<CountDelta>): CountDelta {
  const sum = new Map<string, number>();
  for (const delta of deltas) for (const [bucket, by] of Object.entries(delta)) sum.set(bucket, (sum.get(bucket) ?? 0) + by);
  return Object.fromEntries([...sum].filter(([, by]) => by !== 0));
}

/** How one change of a state (`before` → `after`; undefined: it did not exist) moves the counts. */
export function countDelta(before: DispatchState | undefined, after: DispatchState | undefined): CountDelta {
  const minus = before ? Object.fromEntries(bucketsOf(before).map((bucket) => [bucket, -1])) : {};
  const plus = after ? Object.fromEntries(bucketsOf(after).map((bucket) => [bucket, 1])) : {};
  return sumDeltas([minus, plus]);
}

/**
 * The answer's shape from summed bucket totals (the counter items'): every known bucket present (0 when
 * none), and any other a stored state carried kept too, rather than lost from the total's breakdown.
 */
export function countsOf(totals: Readonly<Record<string, number>>): Counts {
  const known: Record<(typeof GROUPS)[number], readonly string[]> = { phase: PHASES, execution: EXECUTION_BUCKETS, evidence: EVIDENCE_OUTCOMES };
  const group = (name: (typeof GROUPS)[number]): Record<string, number> => {
    const found = Object.entries(totals).filter(([bucket]) => bucket.startsWith(`${name}.`)).map(([bucket, count]) => [bucket.slice(name.length + 1), count] as const);
    return { ...Object.fromEntries(known[name].map((value) => [value, 0])), ...Object.fromEntries(found) };
  };
  return { total: totals.total ?? 0, phase: group('phase'), execution: group('execution'), evidence: group('evidence') };
}

/** Whether a name is one of the buckets `bucketsOf` makes (the shape, not the value: a stored state may carry another). */
export const isBucket = (name: string): boolean => name === 'total' || /^(phase|execution|evidence)\.[a-z_]{1,40}$/.test(name);
