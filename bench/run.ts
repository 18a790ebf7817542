import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../infra/bundling.js';
import { coldStart, type ColdStart } from './cold-start.js';
import { startEngines } from '../local/engines/index.js';
import { runDetection, type DetectionResult } from './detection.js';
import { runIntakeThroughput, type IntakeThroughputResult } from './intake-throughput.js';
import { measureReferenceLifecycle, type ReferenceLifecycleUsage } from './reference-lifecycle.js';
import { runTableDefinitionCost, type TableDefinitionResult, type TableVariant } from './table-definition.js';
import { runLifecycleCost, type LifecycleCostResult } from './lifecycle-cost.js';
import { latencyTargets, latencyText, runLatency, type LatencyResult } from './latency.js';
import { runMonitorHistory, type MonitorHistoryResult } from './monitor-history.js';
import { runMonitorLoad, type MonitorLoadResult } from './monitor-load.js';
import { costOf, peerModels, perMillion, PRICES, type CostBreakdown } from './prices.js';
import { KEY_WRITE_LIMIT_PER_SECOND, runScale, type ScaleResult } from './scale.js';
import { monitorLoadTable, scaleTable } from './part-tables.js';
import { durationModelText, moneyText, type DurationModel } from './duration-model.js';
import type { BenchContext, LifecycleUsage, Spread } from './types.js';
import { publishedDetailTypes, type EventsProfile } from '../shared/events/profile.js';
import { replaceDocBlocks } from '../scripts/doc-blocks.js';


/**
 * `npm run bench`: every figure of docs/performance.md, measured in one run on the same local engines,
 * written to bench/results.json and into the tables of docs/performance.md (between the
 * `<!-- bench:NAME -->` markers). Never part of `npm test`: it takes minutes and measures speed.
 *
 *   --quick             small sizes, to check the bench itself runs (figures are not comparable)
 *   --only PART         one part alone (`--only=PART` too; PART: coldstart, monitor, throughput,
 *                       detection, scale, monitorload, cost, delivery, latency), on fresh engines: its result is printed as JSON on stdout, and
 *                       bench/results.json and docs/performance.md are left as they are
 *   --scale             only the scale part (CONTRACT §14): its fields of bench/results.json and its table
 *                       are replaced, everything else is left as the last full run wrote it
 *   --monitorload       only the monitor under load, written the same way
 *
 * SCALE_OUTAGE_DISPATCHES=N (environment) sizes the scale part's outage workload (default 100,000, 2,000
 * with --quick), to see its trend at sizes between; figures written with it are not the contract's.
 */

const RESULTS_FILE = path.join(PROJECT_ROOT, 'bench', 'results.json');
const DOC_FILE = path.join(PROJECT_ROOT, 'docs', 'performance.md');
const round = (value: number, digits = 2): number => Math.round(value * 10 ** digits) / 10 ** digits;
const usd = (value: number): string => `$${value.toFixed(2)}`;

interface Results {
  readonly measuredAt: string;
  readonly quick: boolean;
  readonly machine: string;
  readonly wruPerLifecycle: number;
  /** A callback lifecycle whose origin takes its result back: the result, one claim, one ack (CONTRACT §10). */
  readonly wruPerLifecycleWithDelivery: number;
  /** One claim with a 20 s long poll on an empty inbox. */
  readonly emptyLongPollReadUnits: number;
  /** A lifecycle to a target with `maxConcurrentRuns`, and what its slot (taken and given back) adds to one without. */
  readonly wruPerLifecycleWithLimit: number;
  readonly wruPerAdmission: number;
  /** With `events: "all"` (the default profile, CONTRACT §3 v2). Lambda by the duration model (bench/duration-model.ts), as every usdPerMillion figure of ours. */
  readonly usdPerMillionLifecycles: number;
  readonly usdPerMillionLifecyclesAllEvents: number;
  /** With `events: "attention"`: only the detail-types that need someone are published. */
  readonly usdPerMillionLifecyclesAttention: number;
  readonly usdPerMillionLifecyclesWithDelivery: number;
  readonly usdPerMillionLifecyclesWithDeliveryAttention: number;
  /** The same four with Lambda priced from the handlers' wall time on this machine (how the bench priced it before the model). */
  readonly usdPerMillionLifecyclesByWallTime: { readonly allEvents: number; readonly attention: number; readonly withDelivery: number; readonly withDeliveryAttention: number };
  /** Lambda by wall time: the reference has no duration model. */
  readonly powertoolsUsdPerMillionLifecycles: number;
  readonly intakeThroughputRatioVsPowertools: number;
  /** Ours ÷ the no-logic pipeline writing our own items (the target); ÷ the bare floor is kept, informative. */
  readonly intakeThroughputRatioVsOwnItems: number;
  readonly intakeThroughputRatioVsFloor: number;
  /** CONTRACT §18: SendMessage → the target receiving POST /runs, ours and the bare forwarder's, and the ratio of the p99s. */
  readonly dispatchLatencyP50Ms: number;
  readonly dispatchLatencyP99Ms: number;
  readonly forwarderLatencyP50Ms: number;
  readonly forwarderLatencyP99Ms: number;
  readonly dispatchLatencyP99RatioVsForwarder: number;
  /** CONTRACT §18: a final event → a waiting inject claim returning it, beside the inbox's poll spacing. */
  readonly resultLatencyP50Ms: number;
  readonly resultLatencyP99Ms: number;
  readonly resultPollIntervalMs: number;
  readonly monitorReadUnitsRatio100kVs1k: number;
  /** Seconds per due item in one tick of 20,000 due ÷ of 1,000 (CONTRACT §14: flat). */
  readonly monitorSecondsPerDueItemRatio20kVs1k: number;
  /** Due items one tick handled within its production budget, with 20,000 due. */
  readonly monitorDueItemsPerTick: number;
  readonly maxRequireTimeRatioVsSdkOnly: number;
  readonly stallDetectionTicks: number;
  readonly orphanDetectionTicks: number;
  /** CONTRACT §14: the hottest partition key of the table or of any index, in WCU/s at 5,000 dispatches/s (both scale workloads). */
  readonly hottestKeyWcuAt5kPerSecond: number;
  readonly targets: Record<string, { readonly target: string; readonly measured: number; readonly met: boolean }>;
  readonly cost: {
    readonly prices: typeof PRICES;
    readonly ours: { readonly usage: LifecycleUsage; readonly usdPerMillion: Record<keyof CostBreakdown, number>; readonly usdPerMillionByWallTime: Record<keyof CostBreakdown, number>; readonly writeUnitsByStep: Readonly<Record<string, number>>; readonly eventsPerLifecycle: Readonly<Record<string, number>> };
    /** Ours (detached) under the duration model: each step's CPU, round trips and modelled time. */
    readonly durationModel: DurationModel;
    readonly withDelivery: { readonly usage: LifecycleUsage; readonly usdPerMillion: Record<keyof CostBreakdown, number>; readonly writeUnitsByStep: Readonly<Record<string, number>>; readonly eventsPerLifecycle: Readonly<Record<string, number>> };
    readonly withLimit: { readonly usage: LifecycleUsage; readonly usdPerMillion: Record<keyof CostBreakdown, number>; readonly writeUnitsByStep: Readonly<Record<string, number>>; readonly eventsPerLifecycle: Readonly<Record<string, number>> };
    readonly evidenceUpload: { readonly usage: LifecycleUsage; readonly usdPerMillion: number };
    readonly powertools: { readonly usage: ReferenceLifecycleUsage; readonly usdPerMillion: Record<keyof CostBreakdown, number> };
    readonly stepFunctionsStandard: ReturnType<typeof peerModels>['stepFunctionsStandard'];
    readonly temporalCloud: ReturnType<typeof peerModels>['temporalCloud'];
    readonly monitorFixedUsdPerMonth: number;
    readonly notes: readonly string[];
  };
  readonly intakeThroughput: IntakeThroughputResult;
  readonly latency: LatencyResult;
  /** The floor's put on tables keyed as the ledger's: bare, stream only, indexes only, both (bench/table-definition.ts). */
  readonly tableDefinition?: TableDefinitionResult;
  readonly monitorHistory: MonitorHistoryResult;
  readonly monitorLoad: MonitorLoadResult;
  readonly coldStart: ColdStart;
  readonly detection: DetectionResult;
  readonly scale: ScaleResult;
}

/** A measured lifecycle's usage had the deployment chosen `profile`: the events it would have put on the bus, of those the publisher derived. */
function underProfile(measured: { readonly usage: LifecycleUsage; readonly eventsPerLifecycle: Readonly<Record<string, number>> }, profile: EventsProfile): LifecycleUsage {
  const published = publishedDetailTypes(profile) as ReadonlySet<string>;
  const events = Object.entries(measured.eventsPerLifecycle).reduce((total, [detailType, n]) => total + (published.has(detailType) ? n : 0), 0);
  return { ...measured.usage, eventBridgeEvents: events };
}

const perMillionBreakdown = (cost: CostBreakdown): Record<keyof CostBreakdown, number> =>
  Object.fromEntries(Object.entries(cost).map(([service, dollars]) => [service, perMillion(dollars)])) as Record<keyof CostBreakdown, number>;

/** The scale target (CONTRACT §14): no partition key above 1,000 WCU/s at 5,000 dispatches/s. */
const scaleTarget = (scale: ScaleResult): Results['targets'][string] => ({
  target: `≤ ${KEY_WRITE_LIMIT_PER_SECOND.toLocaleString('en-US')} WCU/s`,
  measured: round(scale.hottestKeyWcuAt5kPerSecond, 1),
  met: scale.hottestKeyWcuAt5kPerSecond <= KEY_WRITE_LIMIT_PER_SECOND,
});

/** The cost targets, $ per million lifecycles, on the duration model. */
const COST_TARGETS = { allEvents: 10, attention: 7.5 } as const;

/** A measured lifecycle with Lambda's GB-seconds from the duration model instead of the wall time. */
const byModel = (measured: LifecycleCostResult): LifecycleCostResult => ({ ...measured, usage: { ...measured.usage, lambda: { ...measured.usage.lambda, gbSeconds: measured.durationModel.gbSeconds } } });

function assemble(ctx: BenchContext, parts: { lifecycle: LifecycleCostResult; delivered: LifecycleCostResult; limited: LifecycleCostResult; reference: ReferenceLifecycleUsage; throughput: IntakeThroughputResult; tableDefinition: TableDefinitionResult; latency: LatencyResult; history: MonitorHistoryResult; load: MonitorLoadResult; cold: ColdStart; detection: DetectionResult; scale: ScaleResult }): Results {
  const { lifecycle, delivered, limited, reference, throughput, tableDefinition, latency, history, load, cold, detection, scale } = parts;
  // CONTRACT §11: what a concurrency limit adds to a lifecycle — one slot taken with the submission's claim, given back with the final write.
  const wruPerAdmission = limited.usage.dynamodb.writeUnits - lifecycle.usage.dynamodb.writeUnits;
  const ours = costOf(byModel(lifecycle).usage);
  const withDelivery = costOf(byModel(delivered).usage);
  // The same lifecycles under the `attention` profile: the events the publisher derived, of the detail-types it would publish.
  const attention = costOf(underProfile(byModel(lifecycle), 'attention'));
  const withDeliveryAttention = costOf(underProfile(byModel(delivered), 'attention'));
  const theirs = costOf(reference);
  const peers = peerModels({ invocations: 3, gbSeconds: lifecycle.durationModel.gbSeconds });
  // The schedule: one tick a minute whatever the load (43,200 a month), each an invocation of the empty-tick time.
  const ticksPerMonth = 43_200;
  const monitorFixed = ticksPerMonth * (PRICES.lambda.perRequest + (lifecycle.emptyTick.ms / 1000) * 0.5 * PRICES.lambda.perGbSecond + lifecycle.emptyTick.readUnits * PRICES.dynamodb.perReadUnit);
  const targets = {
    wruPerLifecycle: { target: '≤ 8', measured: round(lifecycle.usage.dynamodb.writeUnits), met: lifecycle.usage.dynamodb.writeUnits <= 8 },
    wruPerLifecycleWithDelivery: { target: '≤ 13', measured: round(delivered.usage.dynamodb.writeUnits), met: delivered.usage.dynamodb.writeUnits <= 13 },
    emptyLongPollReadUnits: { target: '≤ 5', measured: round(delivered.emptyLongPoll.readUnits), met: delivered.emptyLongPoll.readUnits > 0 && delivered.emptyLongPoll.readUnits <= 5 },
    usdPerMillionLifecyclesAttention: { target: `≤ ${usd(COST_TARGETS.attention)}`, measured: perMillion(attention.total), met: perMillion(attention.total) <= COST_TARGETS.attention },
    usdPerMillionLifecyclesAllEvents: { target: `≤ ${usd(COST_TARGETS.allEvents)}`, measured: perMillion(ours.total), met: perMillion(ours.total) <= COST_TARGETS.allEvents },
    intakeThroughputRatioVsPowertools: { target: '≥ 1.3×', measured: round(throughput.ratioVsPowertools.median, 3), met: throughput.ratioVsPowertools.median >= 1.3 },
    intakeThroughputRatioVsOwnItems: { target: '≥ 0.9×', measured: round(throughput.ratioVsFloorLedgerItems.median, 3), met: throughput.ratioVsFloorLedgerItems.median >= 0.9 },
    ...latencyTargets(latency),
    monitorReadUnitsRatio100kVs1k: { target: '≤ 1.1×', measured: round(history.readUnitsRatio100kVs1k, 3), met: history.readUnitsRatio100kVs1k <= 1.1 },
    ...monitorLoadTargets(load),
    maxRequireTimeRatioVsSdkOnly: { target: '≤ 1.2×', measured: round(cold.maxRequireTimeRatio, 3), met: cold.maxRequireTimeRatio <= 1.2 },
    stallDetectionTicks: { target: '≤ 1 tick', measured: detection.stallDetectionTicks, met: detection.stallDetectionTicks <= 1 },
    orphanDetectionTicks: { target: '≤ 1 tick', measured: detection.orphanDetectionTicks, met: detection.orphanDetectionTicks <= 1 },
    hottestKeyWcuAt5kPerSecond: scaleTarget(scale),
  };
  return {
    measuredAt: new Date().toISOString(),
    quick: ctx.quick,
    machine: `${process.platform} ${process.arch}, node ${process.version}, DynamoDB Local + fauxqs + moto on 127.0.0.1`,
    wruPerLifecycle: round(lifecycle.usage.dynamodb.writeUnits),
    wruPerLifecycleWithDelivery: round(delivered.usage.dynamodb.writeUnits),
    emptyLongPollReadUnits: round(delivered.emptyLongPoll.readUnits),
    wruPerLifecycleWithLimit: round(limited.usage.dynamodb.writeUnits),
    wruPerAdmission: round(wruPerAdmission),
    usdPerMillionLifecycles: perMillion(ours.total),
    usdPerMillionLifecyclesAllEvents: perMillion(ours.total),
    usdPerMillionLifecyclesAttention: perMillion(attention.total),
    usdPerMillionLifecyclesWithDelivery: perMillion(withDelivery.total),
    usdPerMillionLifecyclesWithDeliveryAttention: perMillion(withDeliveryAttention.total),
    usdPerMillionLifecyclesByWallTime: {
      allEvents: perMillion(costOf(lifecycle.usage).total),
      attention: perMillion(costOf(underProfile(lifecycle, 'attention')).total),
      withDelivery: perMillion(costOf(delivered.usage).total),
      withDeliveryAttention: perMillion(costOf(underProfile(delivered, 'attention')).total),
    },
    powertoolsUsdPerMillionLifecycles: perMillion(theirs.total),
    intakeThroughputRatioVsPowertools: round(throughput.ratioVsPowertools.median, 3),
    intakeThroughputRatioVsOwnItems: round(throughput.ratioVsFloorLedgerItems.median, 3),
    intakeThroughputRatioVsFloor: round(throughput.ratioVsFloor.median, 3),
    dispatchLatencyP50Ms: latency.ours.p50Ms,
    dispatchLatencyP99Ms: latency.ours.p99Ms,
    forwarderLatencyP50Ms: latency.forwarder.p50Ms,
    forwarderLatencyP99Ms: latency.forwarder.p99Ms,
    dispatchLatencyP99RatioVsForwarder: latency.p99RatioVsForwarder,
    resultLatencyP50Ms: latency.result.p50Ms,
    resultLatencyP99Ms: latency.result.p99Ms,
    resultPollIntervalMs: latency.result.pollIntervalMs,
    monitorReadUnitsRatio100kVs1k: round(history.readUnitsRatio100kVs1k, 3),
    monitorSecondsPerDueItemRatio20kVs1k: load.monitorSecondsPerDueItemRatio20kVs1k,
    monitorDueItemsPerTick: load.monitorDueItemsPerTick,
    maxRequireTimeRatioVsSdkOnly: round(cold.maxRequireTimeRatio, 3),
    stallDetectionTicks: detection.stallDetectionTicks,
    orphanDetectionTicks: detection.orphanDetectionTicks,
    hottestKeyWcuAt5kPerSecond: round(scale.hottestKeyWcuAt5kPerSecond, 1),
    targets,
    cost: {
      prices: PRICES,
      ours: { usage: lifecycle.usage, usdPerMillion: perMillionBreakdown(ours), usdPerMillionByWallTime: perMillionBreakdown(costOf(lifecycle.usage)), writeUnitsByStep: lifecycle.writeUnitsByStep, eventsPerLifecycle: lifecycle.eventsPerLifecycle },
      durationModel: lifecycle.durationModel,
      withDelivery: { usage: delivered.usage, usdPerMillion: perMillionBreakdown(withDelivery), writeUnitsByStep: delivered.writeUnitsByStep, eventsPerLifecycle: delivered.eventsPerLifecycle },
      withLimit: { usage: limited.usage, usdPerMillion: perMillionBreakdown(costOf(byModel(limited).usage)), writeUnitsByStep: limited.writeUnitsByStep, eventsPerLifecycle: limited.eventsPerLifecycle },
      evidenceUpload: { usage: lifecycle.evidenceUpload, usdPerMillion: perMillion(costOf({ ...lifecycle.evidenceUpload, lambda: { ...lifecycle.evidenceUpload.lambda, gbSeconds: lifecycle.durationModel.evidenceUploadGbSeconds } }).total) },
      powertools: { usage: reference, usdPerMillion: perMillionBreakdown(theirs) },
      stepFunctionsStandard: peers.stepFunctionsStandard,
      temporalCloud: peers.temporalCloud,
      monitorFixedUsdPerMonth: round(monitorFixed, 2),
      notes: lifecycle.notes,
    },
    intakeThroughput: throughput,
    latency,
    tableDefinition,
    monitorHistory: history,
    monitorLoad: load,
    coldStart: cold,
    detection,
    scale,
  };
}

/** The monitor-load targets (CONTRACT §14): cost per due item flat from 1k to 20k, and ≥ 10,000 due items in one tick. */
const monitorLoadTargets = (load: MonitorLoadResult) => ({
  monitorSecondsPerDueItemRatio20kVs1k: { target: '≤ 1.2×', measured: load.monitorSecondsPerDueItemRatio20kVs1k, met: load.monitorSecondsPerDueItemRatio20kVs1k <= 1.2 },
  monitorDueItemsPerTick: { target: '≥ 10,000', measured: load.monitorDueItemsPerTick, met: load.monitorDueItemsPerTick >= 10_000 },
});

/** A row of min / median / max, rounded to `digits`. */
const spreadRow = (label: string, spread: Spread, digits: number): (string | number)[] => [label, round(spread.min, digits), round(spread.median, digits), round(spread.max, digits)];

/** The throughput block's table of what the ledger table's definition costs a put (absent from results written before it was measured). */
function tableDefinitionText(measured: TableDefinitionResult, table: (header: readonly string[], rows: ReadonlyArray<readonly (string | number)[]>) => string): string[] {
  const rows: ReadonlyArray<readonly [string, TableVariant]> = [
    ['bare (no stream, no index)', 'bare'],
    ['the stream only', 'streamOnly'],
    ['the six indexes only', 'indexesOnly'],
    ["both: the ledger's definition", 'streamAndIndexes'],
    ["the ledger's definition, first written after the others' warm-up", 'writtenLate'],
  ];
  return [
    `What the ledger table's definition costs a write on DynamoDB Local (bench/table-definition.ts): the floor's conditional put of an item that enters no index, ${measured.putsPerRound.toLocaleString('en-US')} per round, ${measured.concurrency} at a time, ${measured.rounds} rotated rounds after a warm-up, on tables keyed as the ledger's. Each table takes its first write as soon as it is made, except the last: DynamoDB Local makes every write to a stream table pay for the other tables' stream records between its creation and its own first record.`,
    '',
    table(
      ['table', 'puts/s min', 'median', 'max', 'median ÷ bare'],
      // Results written before a variant was measured lack it.
      rows.filter(([, variant]) => measured.putsPerSecond[variant] !== undefined).map(([name, variant]) => [name, measured.putsPerSecond[variant].min, measured.putsPerSecond[variant].median, measured.putsPerSecond[variant].max, measured.ratioVsBare[variant]]),
    ),
  ];
}

/** The summary block: the targets, from any results file (the parts written alone rewrite it from the last full run's). */
function summaryBlock(results: Pick<Results, 'measuredAt' | 'quick' | 'machine' | 'targets'>): string {
  const rows = Object.entries(results.targets).map(([name, t]) => [name, t.target, t.measured, t.met ? 'met' : '**missed**']);
  return [
    `Measured ${results.measuredAt}${results.quick ? ' with --quick (small sizes: not comparable)' : ''} on ${results.machine}.`,
    '',
    ['| figure | target | measured |  |', '| --- | --- | --- | --- |', ...rows.map((cells) => `| ${cells.join(' | ')} |`)].join('\n'),
  ].join('\n');
}

/** The tables of docs/performance.md, each between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`. */
function tables(results: Results): Record<string, string> {
  const row = (cells: readonly (string | number)[]): string => `| ${cells.join(' | ')} |`;
  const table = (header: readonly string[], rows: ReadonlyArray<readonly (string | number)[]>): string =>
    [row(header), row(header.map(() => '---')), ...rows.map(row)].join('\n');
  const { cost } = results;
  const services: Array<[keyof CostBreakdown, string]> = [
    ['dynamodb', 'DynamoDB'],
    ['lambda', 'Lambda (arm64)'],
    ['eventBridge', 'EventBridge'],
    ['sqs', 'SQS'],
    ['s3', 'S3'],
    ['secretsManager', 'Secrets Manager'],
    ['functionUrl', 'Function URLs'],
    ['total', '**total**'],
  ];
  const usageText = (usage: LifecycleUsage): Record<string, string> => ({
    dynamodb: `${round(usage.dynamodb.writeUnits)} WRU, ${round(usage.dynamodb.readUnits)} RRU, ${round(usage.dynamodb.requests, 1)} requests`,
    lambda: `${round(usage.lambda.invocations, 2)} invocations, ${round(usage.lambda.gbSeconds, 4)} GB-s`,
    eventBridge: `${round(usage.eventBridgeEvents, 2)} events`,
    sqs: `${round(usage.sqsRequests, 2)} requests`,
    s3: `${round(usage.s3.putRequests, 2)} PUT, ${round(usage.s3.getRequests, 2)} GET/HEAD`,
    secretsManager: `${usage.secretsManagerCalls} calls`,
    functionUrl: `${usage.functionUrlRequests} requests`,
    total: '',
  });
  const oursUsage: Record<string, string> = { ...usageText(cost.ours.usage), lambda: `${round(cost.ours.usage.lambda.invocations, 2)} invocations, ${round(cost.durationModel.gbSeconds, 4)} GB-s modelled (${round(cost.ours.usage.lambda.gbSeconds, 4)} GB-s wall time here)` };
  const theirUsage = usageText(cost.powertools.usage);
  const wall = results.usdPerMillionLifecyclesByWallTime;
  const attentionUsage = underProfile({ usage: cost.ours.usage, eventsPerLifecycle: cost.ours.eventsPerLifecycle }, 'attention');
  const modelled = (usage: LifecycleUsage): LifecycleUsage => ({ ...usage, lambda: { ...usage.lambda, gbSeconds: cost.durationModel.gbSeconds } });
  const history = results.monitorHistory.perTick.map((tick) => [tick.finished.toLocaleString('en-US'), tick.due, tick.readUnits, tick.writeUnits, tick.requests]);
  const throughput = results.intakeThroughput;
  const cold = Object.entries(results.coldStart.functions).map(([name, f]) => [
    name,
    `${(f.bytes / 1024).toFixed(1)} KB`,
    `${(f.sdkOnlyBytes / 1024).toFixed(1)} KB`,
    f.sizeRatio.toFixed(3),
    `${f.requireMs.min.toFixed(1)} ms (${f.requireMs.median.toFixed(1)})`,
    `${f.sdkOnlyRequireMs.min.toFixed(1)} ms (${f.sdkOnlyRequireMs.median.toFixed(1)})`,
    f.requireRatio.toFixed(3),
  ]);
  const detection = results.detection.runs.map((run) => [
    `${run.periodSeconds} s`,
    `${run.phaseSeconds} s`,
    `${run.stall.ticksAfterDeadline ?? 'not detected'} (${run.stall.secondsAfterDeadline ?? '–'} s)`,
    `${run.orphan.ticksAfterDeadline ?? 'not detected'} (${run.orphan.secondsAfterDeadline ?? '–'} s)`,
  ]);
  return {
    summary: summaryBlock(results),
    cost: [
      table(
        ['service', 'Dispatch Ledger: usage per lifecycle', '$ per million (duration model)', '$ per million (wall time here)', 'Powertools reference: usage', '$ per million (wall time here)'],
        services.map(([key, label]) => [label, oursUsage[key] ?? '', usd(cost.ours.usdPerMillion[key]), usd(cost.ours.usdPerMillionByWallTime[key]), theirUsage[key] ?? '', usd(cost.powertools.usdPerMillion[key])]),
      ),
      '',
      table(
        ['design', '$ per million lifecycles', 'how it is counted'],
        [
          ['Dispatch Ledger, detached, `events: all` (measured)', usd(results.usdPerMillionLifecyclesAllEvents), `${results.wruPerLifecycle} WRU; ${round(cost.ours.usage.eventBridgeEvents, 2)} events; Lambda by the duration model (by wall time here: ${usd(wall.allEvents)})`],
          ['Dispatch Ledger, detached, `events: attention` (measured)', usd(results.usdPerMillionLifecyclesAttention), `the same lifecycles; ${round(attentionUsage.eventBridgeEvents, 2)} event(s) of the detail-types that need someone (by wall time: ${usd(wall.attention)})`],
          ['Dispatch Ledger, result claimed and acked by the origin, `events: all` (measured)', usd(results.usdPerMillionLifecyclesWithDelivery), `${results.wruPerLifecycleWithDelivery} WRU; ${round(cost.withDelivery.usage.eventBridgeEvents, 2)} events; 2 more API calls (claim, ack) (by wall time: ${usd(wall.withDelivery)})`],
          ['Dispatch Ledger, result claimed and acked by the origin, `events: attention` (measured)', usd(results.usdPerMillionLifecyclesWithDeliveryAttention), `the same; ${round(underProfile({ usage: cost.withDelivery.usage, eventsPerLifecycle: cost.withDelivery.eventsPerLifecycle }, 'attention').eventBridgeEvents, 2)} event(s) (by wall time: ${usd(wall.withDeliveryAttention)})`],
          ['Dispatch Ledger, detached, to a target with maxConcurrentRuns (measured)', usd(cost.withLimit.usdPerMillion.total), `${results.wruPerLifecycleWithLimit} WRU: ${results.wruPerAdmission} more per admission (the slot taken in the claim's transaction, given back in the final write's)`],
          ['Powertools idempotency + BatchProcessor (measured)', usd(results.powertoolsUsdPerMillionLifecycles), `${round(cost.powertools.usage.dynamodb.writeUnits, 2)} WRU: an idempotency record and one state update per step; publishes no events; Lambda by wall time here`],
          ['Step Functions Standard (model)', usd(cost.stepFunctionsStandard.usdPerMillion), cost.stepFunctionsStandard.counting],
          ['Temporal Cloud (model)', `${usd(cost.temporalCloud.usdPerMillionLow)}–${usd(cost.temporalCloud.usdPerMillionHigh)}`, cost.temporalCloud.counting],
        ],
      ),
      '',
      `Write units by step (Dispatch Ledger, detached): ${Object.entries(cost.ours.writeUnitsByStep).map(([step, units]) => `${step} ${round(units, 2)}`).join(' · ')}.`,
      `Write units by step (with the result back to the origin): ${Object.entries(cost.withDelivery.writeUnitsByStep).map(([step, units]) => `${step} ${round(units, 2)}`).join(' · ')}. An empty 20 s long poll on the inbox read ${results.emptyLongPollReadUnits} units.`,
      `Events per lifecycle: ${Object.entries(cost.ours.eventsPerLifecycle).map(([type, n]) => `${type} ${round(n, 2)}`).join(' · ')}.`,
      `Delivering one evidence file through the API adds ${usd(cost.evidenceUpload.usdPerMillion)} per million (an S3 PUT is $5 per million on its own). The monitor's schedule is a fixed ${usd(cost.monitorFixedUsdPerMonth)} a month whatever the load.`,
      '',
      ...durationModelText(cost.durationModel, cost.ours.usage.lambda.gbSeconds, table),
      '',
      ...moneyText({ allEvents: costOf(modelled(cost.ours.usage)), attention: costOf(modelled(attentionUsage)), usage: cost.ours.usage, attentionEvents: attentionUsage.eventBridgeEvents, model: cost.durationModel, targets: COST_TARGETS }),
    ].join('\n'),
    latency: latencyText(results.latency, table),
    throughput: [
      table(
        ['', 'min', 'median', 'max'],
        [
          spreadRow('Dispatch Ledger intake (messages/s)', throughput.oursMessagesPerSecond, 1),
          spreadRow('Powertools reference (messages/s)', throughput.referenceMessagesPerSecond, 1),
          spreadRow('bare floor: the same 3 round trips, no logic (messages/s)', throughput.floorMessagesPerSecond, 1),
          spreadRow("the floor on a table made as the ledger's (messages/s)", throughput.floorLedgerTableMessagesPerSecond, 1),
          spreadRow("the floor writing the ledger's own items there, no logic (messages/s)", throughput.floorLedgerItemsMessagesPerSecond, 1),
          spreadRow('ratio vs Powertools (per interleaved round)', throughput.ratioVsPowertools, 3),
          spreadRow('ratio vs the bare floor (per interleaved round; informative)', throughput.ratioVsFloor, 3),
          spreadRow("ratio vs the floor on the ledger's table (per interleaved round)", throughput.ratioVsFloorLedgerTable, 3),
          spreadRow("ratio vs the floor writing the ledger's items (per interleaved round; the target, ≥ 0.9)", throughput.ratioVsFloorLedgerItems, 3),
          spreadRow("the floor writing the ledger's items ÷ the bare floor: the most a no-logic intake reaches here", throughput.ledgerItemsFloorRatioVsFloor, 3),
        ],
      ),
      '',
      `${throughput.messages.toLocaleString('en-US')} messages per pipeline in batches of ${throughput.batchSize}, ${throughput.rounds} interleaved rounds (the order of the five pipelines rotated each round).`,
      '',
      'CPU per message (µs, each column the median of the rounds, "both" of each round\'s sum): this node process (the pipeline, its SDK clients and the in-process target) and DynamoDB Local.',
      '',
      table(
        ['pipeline', 'node', 'DynamoDB Local', 'both'],
        (
          [
            ['Dispatch Ledger intake', throughput.cpuMicrosecondsPerMessage.ours],
            ['Powertools reference', throughput.cpuMicrosecondsPerMessage.reference],
            ['bare floor', throughput.cpuMicrosecondsPerMessage.floor],
            ["the floor on the ledger's table", throughput.cpuMicrosecondsPerMessage.floorLedgerTable],
            ["the floor writing the ledger's items", throughput.cpuMicrosecondsPerMessage.floorLedgerItems],
          ] as const
        ).map(([name, cpu]) => [name, cpu.node.median, cpu.dynamodbLocal?.median ?? '–', cpu.both?.median ?? '–']),
      ),
      ...(results.tableDefinition ? ['', ...tableDefinitionText(results.tableDefinition, table)] : []),
    ].join('\n'),
    monitor: [
      table(['finished runs in the table', 'due', 'read units per tick', 'write units', 'requests'], history),
      '',
      `Read units, largest ÷ smallest history: ${results.monitorReadUnitsRatio100kVs1k}.`,
    ].join('\n'),
    monitorload: monitorLoadTable(results.monitorLoad),
    coldstart: table(['function', 'bundle', 'SDK-only bundle', 'size ratio', 'import min (median)', 'SDK-only import min (median)', 'import ratio (min ÷ min)'], cold),
    detection: table(['monitor period', 'tick phase', 'stall: ticks after deadline', 'orphan: ticks after deadline'], detection),
    scale: scaleTable(results.scale),
  };
}

function writeDoc(blocks: Record<string, string>): void {
  writeFileSync(DOC_FILE, replaceDocBlocks(readFileSync(DOC_FILE, 'utf8'), 'bench', blocks, 'docs/performance.md'));
}

/** The value of `--only PART` / `--only=PART`, if given. */
function onlyPart(argv: readonly string[]): string | undefined {
  const index = argv.findIndex((arg) => arg === '--only' || arg.startsWith('--only='));
  if (index < 0) return undefined;
  const arg = argv[index] as string;
  return arg === '--only' ? argv[index + 1] : arg.slice('--only='.length);
}

async function main(argv: readonly string[]): Promise<number> {
  const quick = argv.includes('--quick');
  const only = onlyPart(argv);
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  const log = (line: string): void => {
    process.stderr.write(`${line}\n`);
  };
  const logDir = mkdtempSync(path.join(tmpdir(), 'bench-engines-'));
  /** Fresh engines for one part: DynamoDB Local (in memory) slows down as earlier parts fill it. */
  const withEngines = async <T>(part: (ctx: BenchContext) => Promise<T>): Promise<T> => {
    log('starting DynamoDB Local, fauxqs and moto…');
    const engines = await startEngines({ logDir });
    try {
      return await part({ endpoints: engines, enginePids: engines.pids, log, uniqueName: (prefix) => `${prefix}-${randomUUID().slice(0, 8)}`, quick });
    } finally {
      await engines.stop();
    }
  };
  /** The monitor under load: each tick on engines of its own (see runMonitorLoad). */
  const monitorLoad = (): Promise<MonitorLoadResult> =>
    runMonitorLoad({ log, quick, uniqueName: (prefix) => `${prefix}-${randomUUID().slice(0, 8)}` }, (part) => withEngines((ctx) => part(ctx.endpoints.dynamodbEndpoint)));
  try {
    if (argv.includes('--monitorload')) {
      log('monitor under load (CONTRACT §14)');
      const load = await monitorLoad();
      // Only this part: the rest of the file stays as the last full run wrote it.
      const previous = JSON.parse(readFileSync(RESULTS_FILE, 'utf8')) as Results;
      const targets = monitorLoadTargets(load);
      const merged: Results = { ...previous, monitorSecondsPerDueItemRatio20kVs1k: load.monitorSecondsPerDueItemRatio20kVs1k, monitorDueItemsPerTick: load.monitorDueItemsPerTick, targets: { ...previous.targets, ...targets }, monitorLoad: load };
      writeFileSync(RESULTS_FILE, `${JSON.stringify({ ...merged, monitorLoadMeasuredAt: new Date().toISOString() }, null, 2)}\n`);
      // The summary's targets table too, so it never shows the part's old figures.
      writeDoc({ monitorload: monitorLoadTable(load), summary: summaryBlock(merged) });
      log(`wrote the monitor-load part of ${path.relative(PROJECT_ROOT, RESULTS_FILE)} and ${path.relative(PROJECT_ROOT, DOC_FILE)}`);
      for (const [name, target] of Object.entries(targets)) log(`  ${target.met ? 'met   ' : 'MISSED'} ${name}: ${target.measured} (target ${target.target})`);
      return 0;
    }
    if (argv.includes('--scale')) {
      log('scale: writes per partition key (CONTRACT §14)');
      const scale = await runScale(withEngines);
      // Only the scale part: the rest of the file stays as the last full run wrote it.
      const previous = JSON.parse(readFileSync(RESULTS_FILE, 'utf8')) as Results;
      const target = scaleTarget(scale);
      const merged: Results = { ...previous, hottestKeyWcuAt5kPerSecond: target.measured, targets: { ...previous.targets, hottestKeyWcuAt5kPerSecond: target }, scale };
      writeFileSync(RESULTS_FILE, `${JSON.stringify(merged, null, 2)}\n`);
      writeDoc({ scale: scaleTable(scale), summary: summaryBlock(merged) });
      log(`wrote the scale part of ${path.relative(PROJECT_ROOT, RESULTS_FILE)} and ${path.relative(PROJECT_ROOT, DOC_FILE)}`);
      log(`  ${target.met ? 'met   ' : 'MISSED'} hottestKeyWcuAt5kPerSecond: ${target.measured} (target ${target.target})`);
      return 0;
    }
    if (only !== undefined) {
      const parts: Record<string, () => Promise<unknown>> = {
        coldstart: () => coldStart({ log, quick }),
        monitor: () => withEngines(runMonitorHistory),
        monitorload: monitorLoad,
        throughput: () => withEngines(runIntakeThroughput),
        tabledefinition: () => withEngines(runTableDefinitionCost),
        detection: () => withEngines(runDetection),
        scale: () => runScale(withEngines),
        // The lifecycle's usage unpriced (units and reads per step), to see what a change saves.
        cost: () => withEngines((ctx) => runLifecycleCost(ctx, 'detached')),
        // The same with the result claimed and acked by its origin (wruPerLifecycleWithDelivery, the empty long poll).
        delivery: () => withEngines((ctx) => runLifecycleCost(ctx, 'callback')),
        latency: () => withEngines(runLatency),
      };
      const part = parts[only];
      if (!part) {
        log(`--only: no part "${only}" (one of ${Object.keys(parts).join(', ')})`);
        return 2;
      }
      log(`${only} alone: bench/results.json and docs/performance.md are left as they are`);
      process.stdout.write(`${JSON.stringify(await part(), null, 2)}\n`);
      return 0;
    }
    // First, with no engine running: import times are the most noise-sensitive figure.
    log('cold start');
    const cold = await coldStart({ log, quick });
    log('monitor cost vs history');
    const history = await withEngines(runMonitorHistory);
    log('the monitor under load: one tick over 1k and 20k due runs');
    const load = await monitorLoad();
    // Throughput before the lifecycle runs, on engines of its own: after the lifecycle runs, a shared DynamoDB Local
    // (its stream records and items piled up) ran our intake at 480 msg/s against 765 on fresh engines.
    log('intake throughput, interleaved with the Powertools reference and the floor (fresh engines)');
    const throughput = await withEngines(runIntakeThroughput);
    log('what the ledger table\'s definition costs a put on DynamoDB Local (fresh engines)');
    const tableDefinition = await withEngines(runTableDefinitionCost);
    log('latency (CONTRACT §18): send → target and final event → claim, ours beside a bare forwarder (fresh engines)');
    const latency = await withEngines(runLatency);
    const { lifecycle, delivered, limited, reference, detection, ctx } = await withEngines(async (ctx) => {
      log('cost per lifecycle: Dispatch Ledger (detached)');
      const lifecycle = await runLifecycleCost(ctx, 'detached');
      log('cost per lifecycle: Dispatch Ledger (callback: result claimed and acked)');
      const delivered = await runLifecycleCost(ctx, 'callback');
      log('cost per lifecycle: Dispatch Ledger (detached, to a target with maxConcurrentRuns)');
      // A limit as high as the lifecycles: never binding, so what it adds is exactly one slot taken and given back each.
      const limited = await runLifecycleCost(ctx, 'detached', { maxConcurrentRuns: 10_000 });
      log('cost per lifecycle: Powertools reference');
      const reference = await measureReferenceLifecycle(ctx);
      log('detection latency');
      const detection = await runDetection(ctx);
      return { lifecycle, delivered, limited, reference, detection, ctx };
    });
    log('scale: writes per partition key (CONTRACT §14)');
    const scale = await runScale(withEngines);
    const results = assemble(ctx, { lifecycle, delivered, limited, reference, throughput, tableDefinition, latency, history, load, cold, detection, scale });
    writeFileSync(RESULTS_FILE, `${JSON.stringify(results, null, 2)}\n`);
    writeDoc(tables(results));
    log(`wrote ${path.relative(PROJECT_ROOT, RESULTS_FILE)} and ${path.relative(PROJECT_ROOT, DOC_FILE)}`);
    for (const [name, target] of Object.entries(results.targets)) log(`  ${target.met ? 'met   ' : 'MISSED'} ${name}: ${target.measured} (target ${target.target})`);
    return 0;
  } finally {
    rmSync(logDir, { recursive: true, force: true });
  }
}

process.exitCode = await main(process.argv.slice(2));

