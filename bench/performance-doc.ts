import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../infra/bundling.js';
import { replaceDocBlocks } from '../scripts/doc-blocks.js';
import type { ColdStart } from './cold-start.js';
import type { DetectionResult } from './detection.js';
import type { IntakeThroughputResult } from './intake-throughput.js';
import type { ReferenceLifecycleUsage } from './reference-lifecycle.js';
import type { TableDefinitionResult, TableVariant } from './table-definition.js';
import { latencyText, type LatencyResult } from './latency.js';
import type { MonitorHistoryResult } from './monitor-history.js';
import type { MonitorLoadResult } from './monitor-load.js';
import { costOf, peerModels, PRICES, type CostBreakdown } from './prices.js';
import type { ScaleResult } from './scale-figures.js';
import { monitorLoadTable, scaleTable } from './part-tables.js';
import { durationModelText, moneyText, type DurationModel } from './duration-model.js';
import type { LifecycleUsage, Spread } from './types.js';
import { publishedDetailTypes, type EventsProfile } from '../shared/events/profile.js';

/**
 * What `npm run bench` (bench/run.ts) writes: the shape of bench/results.json, and the tables of
 * docs/performance.md rendered from it (between the `<!-- bench:NAME -->` markers).
 */

export const DOC_FILE = path.join(PROJECT_ROOT, 'docs', 'performance.md');
export const round = (value: number, digits = 2): number => Math.round(value * 10 ** digits) / 10 ** digits;
export const usd = (value: number): string => `$${value.toFixed(2)}`;
/** The cost targets, $ per million lifecycles, on the duration model. */
export const COST_TARGETS = { allEvents: 10, attention: 7.5 } as const;

/** A row of min / median / max, rounded to `digits`. */
const spreadRow = (label: string, spread: Spread, digits: number): (string | number)[] => [label, round(spread.min, digits), round(spread.median, digits), round(spread.max, digits)];


/** A measured lifecycle's usage had the deployment chosen `profile`: the events it would have put on the bus, of those the publisher derived. */
export function underProfile(measured: { readonly usage: LifecycleUsage; readonly eventsPerLifecycle: Readonly<Record<string, number>> }, profile: EventsProfile): LifecycleUsage {
  const published = publishedDetailTypes(profile) as ReadonlySet<string>;
  const events = Object.entries(measured.eventsPerLifecycle).reduce((total, [detailType, n]) => total + (published.has(detailType) ? n : 0), 0);
  return { ...measured.usage, eventBridgeEvents: events };
}

export interface Results {
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
export function summaryBlock(results: Pick<Results, 'measuredAt' | 'quick' | 'machine' | 'targets'>): string {
  const rows = Object.entries(results.targets).map(([name, t]) => [name, t.target, t.measured, t.met ? 'met' : '**missed**']);
  return [
    `Measured ${results.measuredAt}${results.quick ? ' with --quick (small sizes: not comparable)' : ''} on ${results.machine}.`,
    '',
    ['| figure | target | measured |  |', '| --- | --- | --- | --- |', ...rows.map((cells) => `| ${cells.join(' | ')} |`)].join('\n'),
  ].join('\n');
}

/** The tables of docs/performance.md, each between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`. */
export function tables(results: Results): Record<string, string> {
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

export function writeDoc(blocks: Record<string, string>): void {
  writeFileSync(DOC_FILE, replaceDocBlocks(readFileSync(DOC_FILE, 'utf8'), 'bench', blocks, 'docs/performance.md'));
}
