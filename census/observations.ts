import type { DispatchView } from '../shared/dispatch/view.js';
import type { DemoAgentStats } from '../local/demo-agent/server.js';
import type { FaultLogEntry } from './faults.js';
import type { PlannedSend, Workload } from './workload.js';

/**
 * What the census checker (`checker.ts`) is given — what was sent and what the system holds afterwards —
 * and the report it gives back, with the counts that must be zero for the census to pass.
 */

export interface SentMessage {
  readonly messageId: string;
  readonly send: PlannedSend;
}

export interface ObservedDispatch {
  /** The view as its origin reads it; null when the API answered 404. */
  readonly view: DispatchView | null;
  /** The SQS message id of the message the ledger took the dispatch from (the accepted record's). */
  readonly anchorMessageId: string | null;
}

export interface ObservedRejection {
  readonly messageId: string;
  readonly reason: string;
  readonly dispatchId: string | null;
}

export interface LoggedEvent {
  readonly detailType: string;
  readonly detail: Readonly<Record<string, unknown>>;
}

export interface MonitorTick {
  readonly start: number;
  readonly end: number;
}

/** A change of the limited target's maxConcurrentRuns: asked at `at`, written by `done` (epoch ms). */
export interface LimitChange {
  readonly at: number;
  readonly done: number;
  readonly limit: number;
}

/** The limited target (census fault `limit_change`): its limits over time and each run it opened. */
export interface LimitObservations {
  readonly target: string;
  /** In order; the first is the registration, before anything was sent. */
  readonly changes: readonly LimitChange[];
  /** Each run the target opened: when, and how many of its runs were open then, this one included (its own count). */
  readonly opened: ReadonlyArray<{ readonly at: number; readonly open: number; readonly dispatchId: string }>;
  /**
   * How long a slot may be held before its run opens (the submission call, bounded by the target
   * timeout): a run may open this long after a lowered limit was written under the limit it replaced.
   */
  readonly slackMs: number;
}

export interface CensusObservations {
  readonly workload: Workload;
  readonly sent: readonly SentMessage[];
  readonly dispatches: ReadonlyMap<string, ObservedDispatch>;
  /** Every dispatchId that has a state item in the table (a full read of the census's own table). */
  readonly tableDispatchIds: readonly string[];
  readonly rejections: readonly ObservedRejection[];
  readonly dlqMessageIds: readonly string[];
  readonly events: readonly LoggedEvent[];
  readonly stats: DemoAgentStats;
  readonly monitorTicks: readonly MonitorTick[];
  /**
   * How long a tick may take work before its budget stops it (`tickBudget`): a tick that ran longer may
   * have been cut short before it read the orphan's due shard, which is then the next tick's (CONTRACT §14).
   */
  readonly monitorTickBudgetMs: number;
  readonly faultLog: readonly FaultLogEntry[];
  readonly faultsFired: Readonly<Record<string, number>>;
  readonly deliveryGraceSeconds: number;
  /** Messages `ledger dlq redrive` moved back to the queue: the DLQ copy's id and the new message's. */
  readonly redriven?: ReadonlyArray<{ readonly from: string; readonly to: string }>;
  readonly limited?: LimitObservations;
}

export interface Finding {
  readonly check: string;
  readonly id: string;
  readonly detail: string;
}

export interface CensusReport {
  readonly seed: number;
  readonly sent: number;
  /** Messages that became a dispatch (not blocked). */
  readonly dispatches: number;
  readonly duplicates: number;
  readonly blocked: number;
  readonly rejections: number;
  /** In the DLQ with no record of the ledger's: the one outcome that needs an operator. */
  readonly dlqOnly: number;
  /** `sent = dispatches + duplicates + blocked + rejections + dlqOnly`. */
  readonly balanced: boolean;
  readonly lost: number;
  readonly unexpected: number;
  /** A message that came out as another outcome than the one its content calls for. */
  readonly misrouted: number;
  readonly doubleSubmittedAttempts: number;
  /** Same-key POSTs beyond the first (retries, crash-and-resend): counted, not failures. */
  readonly repeatedSubmissions: number;
  readonly statusRegressions: number;
  readonly eventsWithoutChange: number;
  /** Committed changes the event log never showed (the final run event, verdict, block, submission, rejection). */
  readonly missingEvents: number;
  readonly missedOrphans: number;
  readonly falseOrphans: number;
  readonly notFinal: number;
  /** Settled, but not where its behaviour says it must end. */
  readonly wrongFinal: number;
  /** Runs the limited target opened while it already had as many open as the limit then in force (CONTRACT §11). */
  readonly overLimit: number;
  /** The limited target: how often its limit changed, the runs it opened, the most open at once. */
  readonly limitChanges: { readonly changes: number; readonly runsOpened: number; readonly maxOpen: number };
  /**
   * Messages the census made dead-letter (the table unavailable for their dispatch): how many were
   * planned, redriven, and came back as their dispatch, ending where planned.
   */
  readonly dlqRoundTrips: { readonly planned: number; readonly redriven: number; readonly asExpected: number };
  readonly orphans: {
    readonly injected: number;
    readonly detected: number;
    /** The most monitor ticks any orphan waited after its grace window: the ticks that missed it, plus the one that found it. */
    readonly maxTicksAfterGrace: number;
    /**
     * The same, counting only the ticks that had the orphan's shard to read: no fault fired during
     * them, they ran within their budget and no other tick was at work when they started.
     */
    readonly maxUnfaultedTicksAfterGrace: number;
    /** How many orphans were found how many ticks after their grace window (all ticks), e.g. { "1": 198, "2": 2 }. */
    readonly ticksAfterGrace: Readonly<Record<string, number>>;
  };
  readonly events: number;
  /** Each poison class of CONTRACT §1 (rejection reasons, block codes): sent, and came out as that class. */
  readonly poison: Readonly<Record<string, { readonly sent: number; readonly asExpected: number }>>;
  readonly faultsFired: Readonly<Record<string, number>>;
  /** The first findings of each check, to start an investigation from. */
  readonly findings: readonly Finding[];
}

/** The counts that must be zero for the census to pass. */
export const MUST_BE_ZERO = [
  'lost',
  'unexpected',
  'misrouted',
  'doubleSubmittedAttempts',
  'statusRegressions',
  'eventsWithoutChange',
  'missingEvents',
  'missedOrphans',
  'falseOrphans',
  'notFinal',
  'wrongFinal',
  'overLimit',
] as const satisfies ReadonlyArray<keyof CensusReport>;
