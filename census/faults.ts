import { CRASH_POINTS, SDK_FAULTS, TABLE_UNAVAILABLE, type FaultInjector, type ProductFault } from '../shared/faults.js';
import type { DemoAgentFaults } from '../local/demo-agent/server.js';
import { Random } from './random.js';

/**
 * The census's fault schedule: every kind it can inject, how often, and how often each actually fired
 * (a fault that never fired proves nothing). Product faults go through the ledger's own switch
 * (shared/faults.ts); the rest are the platform's (stream checkpoints, overlapping monitor ticks), the
 * target's (the demo agent's schedule) and the workload's (counted by the census as it sends).
 */

/** Faults the census drives itself rather than deciding per call. */
export const DRIVEN_FAULTS = [
  'monitor_concurrent',
  'forced_redispatch',
  'duplicate_concurrent',
  'duplicate_late',
  'conflict',
  'poison',
  'orphan',
  'stall',
  'vanish',
  'lost_callback',
  'approval',
  'lookup_unavailable',
  // The limited target's maxConcurrentRuns raised or lowered while dispatches wait for it.
  'limit_change',
  // A message the intake cannot take in (the table unavailable for its dispatch), dead-lettered, then redriven.
  'dlq_round_trip',
] as const;

export const PLATFORM_FAULTS = ['stream_redelivery', 'target_unavailable', 'target_hang', 'lookup_outage'] as const;

export const FAULT_KINDS = [...CRASH_POINTS, ...SDK_FAULTS, ...PLATFORM_FAULTS, ...DRIVEN_FAULTS] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** Per-call probabilities of the faults decided per call. Bursts: the chance to start one, then to end it. */
export const DEFAULT_RATES = {
  'intake.after_claim': 0.005,
  'submit.after_target_accepted': 0.005,
  'submit.after_slot_taken': 0.01,
  'intake.before_ack': 0.005,
  'publisher.before_checkpoint': 0.1,
  'monitor.after_lookup': 0.03,
  dynamodb_throttle: 0.002,
  dynamodb_timeout: 0.001,
  stream_redelivery: 0.1,
  target_hang: 0.004,
  target_unavailable: { start: 0.01, end: 0.3 },
  lookup_outage: { start: 0.03, end: 0.3 },
} as const;

/** The chance at which each per-call fault fires for certain (see `#roll`). */
const GUARANTEED_AT = 5;

export interface FaultLogEntry {
  readonly at: number;
  readonly kind: FaultKind;
  readonly subject: string;
}

export class CensusFaults implements FaultInjector {
  readonly #enabled: ReadonlySet<FaultKind>;
  readonly #random: Random;
  readonly #streams = new Map<FaultKind, Random>();
  readonly #fired = new Map<FaultKind, number>();
  readonly #bursts = new Map<FaultKind, boolean>();
  readonly #calls = new Map<FaultKind, number>();
  /** When each fault fired: a monitor tick during which one fired is a faulted tick. */
  readonly log: FaultLogEntry[] = [];
  #active = true;
  #burstsOver = false;
  /** Partition keys the table is unavailable for (TABLE_UNAVAILABLE), until `makeAvailable`. */
  readonly #unavailable = new Set<string>();
  /** Dispatches spared the crash between taking a slot and submitting (the limited target's: see `spareSlotCrash`). */
  readonly #spared = new Set<string>();

  constructor(enabled: Iterable<FaultKind>, seed: number, readonly hangMs: number) {
    this.#enabled = new Set(enabled);
    this.#random = new Random(seed).fork('faults');
  }

  enabled(kind: FaultKind): boolean {
    return this.#active && this.#enabled.has(kind);
  }

  /** Stops every fault (the drain's end: what is left must settle on its own). */
  quiesce(): void {
    this.#active = false;
  }

  /**
   * Ends the target's bursts (5xx, lookup outages) for good: once the intake is done, the few calls
   * left belong to a few dispatches, and a burst would be all of one dispatch's retries or lookups.
   */
  endBursts(): void {
    this.#burstsOver = true;
  }

  /** Counts a fault the census itself performed. */
  count(kind: FaultKind, subject = ''): void {
    this.#fired.set(kind, (this.#fired.get(kind) ?? 0) + 1);
    this.log.push({ at: Date.now(), kind, subject });
  }

  fired(): Record<FaultKind, number> {
    return Object.fromEntries(FAULT_KINDS.map((kind) => [kind, this.#fired.get(kind) ?? 0])) as Record<FaultKind, number>;
  }

  /** The table is unavailable for these partition keys (while dlq_round_trip is enabled) until `makeAvailable`. */
  makeUnavailable(partitionKeys: Iterable<string>): void {
    for (const pk of partitionKeys) this.#unavailable.add(pk);
  }

  makeAvailable(): void {
    this.#unavailable.clear();
  }

  /**
   * No crash between taking a slot and submitting for these dispatches: the limit check dates each run
   * the target opens by its submission, so a slot must not be held for long before its run opens.
   */
  spareSlotCrash(dispatchIds: Iterable<string>): void {
    for (const dispatchId of dispatchIds) this.#spared.add(dispatchId);
  }

  /** shared/faults.ts asks here at each crash point and each DynamoDB call attempt (and each key a call names). */
  fires(fault: ProductFault, subject: string): boolean {
    if (fault === TABLE_UNAVAILABLE) return this.enabled('dlq_round_trip') && this.#unavailable.has(subject);
    if (fault === 'submit.after_slot_taken' && this.#spared.has(subject)) return false;
    return this.#roll(fault, DEFAULT_RATES[fault], subject);
  }

  redeliverStreamBatch = (): boolean => this.#roll('stream_redelivery', DEFAULT_RATES.stream_redelivery, 'publisher');

  /** The demo agent's schedule: 5xx bursts and hangs on submission, outages of the status endpoint. */
  demoAgent(): DemoAgentFaults {
    return {
      hangMs: this.hangMs,
      submit: (dispatchId) => {
        if (this.#burst('target_unavailable', DEFAULT_RATES.target_unavailable, dispatchId)) return 'unavailable';
        return this.#roll('target_hang', DEFAULT_RATES.target_hang, dispatchId) ? 'hang' : 'none';
      },
      lookupDown: (runId) => this.#burst('lookup_outage', DEFAULT_RATES.lookup_outage, runId),
    };
  }

  #stream(kind: FaultKind): Random {
    let stream = this.#streams.get(kind);
    if (!stream) {
      stream = this.#random.fork(kind);
      this.#streams.set(kind, stream);
    }
    return stream;
  }

  #roll(kind: FaultKind, probability: number, subject: string): boolean {
    if (!this.enabled(kind)) return false;
    const calls = (this.#calls.get(kind) ?? 0) + 1;
    this.#calls.set(kind, calls);
    // Every kind fires at its GUARANTEED_AT-th chance whatever the dice say, so a small census that
    // enables it proves something about it; after that, the stated rate.
    if (calls !== GUARANTEED_AT && !this.#stream(kind).chance(probability)) return false;
    this.count(kind, subject);
    return true;
  }

  /** A burst: once started, every call fails until it ends; each failed call counts as one firing. */
  #burst(kind: FaultKind, rates: { readonly start: number; readonly end: number }, subject: string): boolean {
    if (!this.enabled(kind) || this.#burstsOver) {
      this.#bursts.set(kind, false);
      return false;
    }
    const stream = this.#stream(kind);
    const calls = (this.#calls.get(kind) ?? 0) + 1;
    this.#calls.set(kind, calls);
    const inBurst = this.#bursts.get(kind) ? !stream.chance(rates.end) : calls === GUARANTEED_AT || stream.chance(rates.start);
    this.#bursts.set(kind, inBurst);
    if (inBurst) this.count(kind, subject);
    return inBurst;
  }
}

/** `--faults a,b` → the kinds; `all` (the default) → every kind. */
export function parseFaultList(text: string | undefined): FaultKind[] {
  if (text === undefined || text === '' || text === 'all') return [...FAULT_KINDS];
  if (text === 'none') return [];
  const kinds = text.split(',').map((part) => part.trim());
  const unknown = kinds.filter((kind) => !(FAULT_KINDS as readonly string[]).includes(kind));
  if (unknown.length > 0) throw new RangeError(`unknown fault kind(s) ${unknown.join(', ')}; known: ${FAULT_KINDS.join(', ')}`);
  return kinds as FaultKind[];
}
