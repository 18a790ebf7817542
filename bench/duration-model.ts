import { PRICES, ROUND_TRIPS, type CostBreakdown, type RoundTripKind } from './prices.js';
import type { LifecycleUsage } from './types.js';

/**
 * The duration model: Lambda priced from what a handler does rather than from how long it took on this
 * machine. A handler's billed time is its own CPU time (measured here, with `process.cpuUsage()` around
 * each step) plus the round trips it waits on, each at a fixed latency (`ROUND_TRIPS` in bench/prices.ts).
 * Local engines answer in well under a millisecond, so the wall time they give is neither AWS's nor stable
 * from one machine to the next; the count of round trips is both.
 */

/** Round trips a piece of work sent, by what it called. */
export type RoundTrips = Readonly<Record<RoundTripKind, number>>;

export const NO_ROUND_TRIPS: RoundTrips = { dynamodb: 0, s3: 0, eventBridge: 0, sqs: 0, target: 0 };

const KINDS = Object.keys(NO_ROUND_TRIPS) as readonly RoundTripKind[];

/** The latencies of bench/prices.ts, in milliseconds by kind. */
export const LATENCY_MS: Readonly<Record<RoundTripKind, number>> = Object.fromEntries(KINDS.map((kind) => [kind, ROUND_TRIPS[kind].ms])) as Record<RoundTripKind, number>;

/** One handler-sized piece of work as measured: the process's CPU time over it and the round trips it sent. */
export interface Work {
  readonly cpuMs: number;
  readonly roundTrips: RoundTrips;
}

/** The time `roundTrips` wait, one after the other, at `latencyMs`. */
export function waitedMs(roundTrips: RoundTrips, latencyMs: Readonly<Record<RoundTripKind, number>> = LATENCY_MS): number {
  return KINDS.reduce((total, kind) => total + roundTrips[kind] * latencyMs[kind], 0);
}

/**
 * The modelled duration of `work`, in milliseconds: its CPU plus its round trips waited one after the
 * other. `concurrent` records sharing one invocation (the intake's batch of 10, processed concurrently)
 * overlap their waits but not their CPU (one thread), so each record's share is its CPU plus its waits
 * ÷ `concurrent`.
 *
 * @example
 * modelledMs({ cpuMs: 1.5, roundTrips: { ...NO_ROUND_TRIPS, dynamodb: 2, target: 1 } }) // 1.5 + 2 × 5 + 50 = 61.5
 */
export function modelledMs(work: Work, options: { readonly concurrent?: number; readonly latencyMs?: Readonly<Record<RoundTripKind, number>> } = {}): number {
  const concurrent = options.concurrent ?? 1;
  if (!(concurrent >= 1)) throw new RangeError(`concurrent must be at least 1, not ${concurrent}`);
  return work.cpuMs + waitedMs(work.roundTrips, options.latencyMs) / concurrent;
}

/** Lambda bills each invocation's duration rounded up to the next millisecond. */
export const billedMs = (ms: number): number => Math.ceil(ms);

/** `a` plus `sign` × `b`, each part kept at zero or above (what a tick did beyond an empty one). */
export function combined(a: Work, b: Work, sign: 1 | -1 = 1): Work {
  return {
    cpuMs: Math.max(0, a.cpuMs + sign * b.cpuMs),
    roundTrips: Object.fromEntries(KINDS.map((kind) => [kind, Math.max(0, a.roundTrips[kind] + sign * b.roundTrips[kind])])) as RoundTrips,
  };
}

/** `work` × `factor`: a total spread over lifecycles. */
export function scaled(work: Work, factor: number): Work {
  return { cpuMs: work.cpuMs * factor, roundTrips: Object.fromEntries(KINDS.map((kind) => [kind, work.roundTrips[kind] * factor])) as RoundTrips };
}

/** The mean of each kind of round trip over `samples`. */
export function meanRoundTrips(samples: readonly Work[]): RoundTrips {
  if (samples.length === 0) return NO_ROUND_TRIPS;
  return scaled(samples.reduce((total, work) => combined(total, work), { cpuMs: 0, roundTrips: NO_ROUND_TRIPS }), 1 / samples.length).roundTrips;
}

/** One step of a lifecycle under the model, beside its wall time. */
export interface ModelStep {
  /** Wall time on this machine (the median call; the monitor's and publisher's share per lifecycle). */
  readonly wallMs: number;
  /** Own CPU time on this machine, the same way. */
  readonly cpuMs: number;
  /** Round trips per call (per lifecycle for the monitor and publisher). */
  readonly roundTrips: RoundTrips;
  /** What the model bills for it: CPU plus round trips (shared by the batch for the intake; rounded up per API invocation). */
  readonly modelledMs: number;
  /** `modelledMs` × the function's memory, per lifecycle. */
  readonly gbSeconds: number;
}

/** A lifecycle's Lambda time under the model. */
export interface DurationModel {
  /** GB-seconds per lifecycle: the sum of the steps'. */
  readonly gbSeconds: number;
  /** What delivering one evidence file through the API adds. */
  readonly evidenceUploadGbSeconds: number;
  readonly steps: Readonly<Record<string, ModelStep>>;
  readonly latencyMs: Readonly<Record<RoundTripKind, number>>;
}

const SHORT_NAMES: Readonly<Record<RoundTripKind, string>> = { dynamodb: 'DynamoDB', s3: 'S3', eventBridge: 'PutEvents', sqs: 'SQS', target: 'target' };
const LONG_NAMES: Readonly<Record<RoundTripKind, string>> = { dynamodb: 'a DynamoDB call', s3: 'an S3 request', eventBridge: 'a PutEvents call', sqs: 'an SQS call (none here)', target: "a target's POST /runs or lookup" };
const usd = (value: number): string => `$${value.toFixed(2)}`;
const perMillionUsd = (dollarsPerLifecycle: number): string => usd(dollarsPerLifecycle * 1e6);
/** A unit price per million, to the tenth of a cent where it has one ($0.625, $0.20, $1.00). */
const unitUsd = (dollarsPerUnit: number): string => {
  const text = (dollarsPerUnit * 1e6).toFixed(3);
  return `$${text.endsWith('0') ? text.slice(0, -1) : text}`;
};
const round = (value: number, digits: number): number => Math.round(value * 10 ** digits) / 10 ** digits;

/** The cost block's table of the model's steps, and the latencies it used. */
export function durationModelText(model: DurationModel, wallGbSeconds: number, table: (header: readonly string[], rows: ReadonlyArray<readonly (string | number)[]>) => string): string[] {
  const trips = (t: RoundTrips): string => KINDS.filter((kind) => t[kind] > 0).map((kind) => `${round(t[kind], 2)} ${SHORT_NAMES[kind]}`).join(', ') || '–';
  return [
    `Lambda by the duration model: each step's own CPU time on this machine (\`process.cpuUsage()\` around it: the handler's code and its SDK clients, and the in-process bench target's share of the submission) plus its round trips at fixed latencies (bench/prices.ts): ${KINDS.map((kind) => `${LONG_NAMES[kind]} ${model.latencyMs[kind]} ms`).join(', ')}. The intake's batch of 10 overlaps its records' round trips (each record's share is its CPU plus a tenth of its waits); an API call is billed rounded up to the millisecond. ${round(model.gbSeconds, 4)} GB-s per lifecycle by the model, ${round(wallGbSeconds, 4)} GB-s by wall time here.`,
    '',
    table(
      ['step', 'wall ms (here)', 'own CPU ms (here)', 'round trips', 'modelled ms', 'GB-s per lifecycle'],
      Object.entries(model.steps).map(([label, step]) => [label, round(step.wallMs, 2), round(step.cpuMs, 2), trips(step.roundTrips), round(step.modelledMs, 2), round(step.gbSeconds, 5)]),
    ),
  ];
}

/**
 * Where a lifecycle's money goes under the model, and what each lever is worth: the lines under the
 * cost tables. `allEvents` and `attention` are the same lifecycle priced with each events profile.
 */
export function moneyText(input: {
  readonly allEvents: CostBreakdown;
  readonly attention: CostBreakdown;
  readonly usage: LifecycleUsage;
  readonly attentionEvents: number;
  readonly model: DurationModel;
  readonly targets: { readonly allEvents: number; readonly attention: number };
}): string[] {
  const { allEvents, attention, usage, model } = input;
  const invocationsUsd = usage.lambda.invocations * PRICES.lambda.perRequest;
  const heartbeats = Object.entries(model.steps).filter(([label]) => label.startsWith('heartbeat'));
  const heartbeatsUsd = heartbeats.reduce((total, [, step]) => total + PRICES.lambda.perRequest + step.gbSeconds * PRICES.lambda.perGbSecond, 0);
  const gap = (total: number, target: number): string => (total * 1e6 <= target ? `met (${usd(target - total * 1e6)} to spare)` : `${usd(total * 1e6 - target)} away`);
  return [
    `Where the money goes, by the model, per million lifecycles: \`events: all\` ${perMillionUsd(allEvents.total)} = DynamoDB ${perMillionUsd(allEvents.dynamodb)} (${round(usage.dynamodb.writeUnits, 2)} WRU at ${unitUsd(PRICES.dynamodb.perWriteUnit)}, ${round(usage.dynamodb.readUnits, 2)} RRU at ${unitUsd(PRICES.dynamodb.perReadUnit)}) + EventBridge ${perMillionUsd(allEvents.eventBridge)} (${round(usage.eventBridgeEvents, 2)} events at ${unitUsd(PRICES.eventBridge.perEvent)}) + Lambda ${perMillionUsd(allEvents.lambda)} (${perMillionUsd(invocationsUsd)} for ${round(usage.lambda.invocations, 2)} invocations, ${perMillionUsd(allEvents.lambda - invocationsUsd)} of duration) + SQS ${perMillionUsd(allEvents.sqs)} + S3 ${perMillionUsd(allEvents.s3)}. \`events: attention\` ${perMillionUsd(attention.total)}: the same with ${round(input.attentionEvents, 2)} event(s).`,
    `What each lever is worth per million lifecycles: one event fewer ${unitUsd(PRICES.eventBridge.perEvent)}; one write unit fewer ${unitUsd(PRICES.dynamodb.perWriteUnit)}; one API invocation fewer ${unitUsd(PRICES.lambda.perRequest)} plus its duration; the ${heartbeats.length} heartbeats, which write nothing inside the coalescing window but are an API invocation each, ${perMillionUsd(heartbeatsUsd)} together. Target ≤ ${usd(input.targets.allEvents)} with \`events: all\`: ${gap(allEvents.total, input.targets.allEvents)}; ≤ ${usd(input.targets.attention)} with \`events: attention\`: ${gap(attention.total, input.targets.attention)}. Everything but Lambda comes to ${perMillionUsd(allEvents.total - allEvents.lambda)} and ${perMillionUsd(attention.total - attention.lambda)}.`,
  ];
}
