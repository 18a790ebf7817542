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
import { runTableDefinitionCost, type TableDefinitionResult } from './table-definition.js';
import { runLifecycleCost, type LifecycleCostResult } from './lifecycle-cost.js';
import { latencyTargets, runLatency, type LatencyResult } from './latency.js';
import { runMonitorHistory, type MonitorHistoryResult } from './monitor-history.js';
import { runMonitorLoad, type MonitorLoadResult } from './monitor-load.js';
import { costOf, peerModels, perMillion, PRICES, type CostBreakdown } from './prices.js';
import { KEY_WRITE_LIMIT_PER_SECOND, type ScaleResult } from './scale-figures.js';
import { runScale } from './scale.js';
import { monitorLoadTable, scaleTable } from './part-tables.js';
import type { BenchContext } from './types.js';
import { COST_TARGETS, DOC_FILE, round, summaryBlock, tables, underProfile, usd, writeDoc, type Results } from './performance-doc.js';


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

const perMillionBreakdown = (cost: CostBreakdown): Record<keyof CostBreakdown, number> =>
  Object.fromEntries(Object.entries(cost).map(([service, dollars]) => [service, perMillion(dollars)])) as Record<keyof CostBreakdown, number>;

/** The scale target (CONTRACT §14): no partition key above 1,000 WCU/s at 5,000 dispatches/s. */
const scaleTarget = (scale: ScaleResult): Results['targets'][string] => ({
  target: `≤ ${KEY_WRITE_LIMIT_PER_SECOND.toLocaleString('en-US')} WCU/s`,
  measured: round(scale.hottestKeyWcuAt5kPerSecond, 1),
  met: scale.hottestKeyWcuAt5kPerSecond <= KEY_WRITE_LIMIT_PER_SECOND,
});

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

