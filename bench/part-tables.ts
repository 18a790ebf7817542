import { KEY_WRITE_LIMIT_PER_SECOND, type ScaleResult } from './scale-figures.js';
import type { MonitorLoadResult } from './monitor-load.js';

/** Blocks of docs/performance.md that bench/run.ts also writes alone (`--scale`, `--monitorload`). */

const round = (value: number, digits = 2): number => Math.round(value * 10 ** digits) / 10 ** digits;

/** The scale block of docs/performance.md: per workload, per table and index, the hottest key and its projection. */
export function scaleTable(scale: ScaleResult): string {
  const row = (cells: readonly (string | number)[]): string => `| ${cells.join(' | ')} |`;
  const header = ['workload', 'table / index', 'write units', 'keys', 'hottest key', 'its share', 'its WU per dispatch', 'projected WCU/s at 5,000 dispatches/s'];
  const workloads: Array<[string, ScaleResult['steady']]> = [
    ['steady', scale.steady],
    ['outage', scale.outage],
  ];
  const rows = workloads.flatMap(([label, workload]) =>
    workload.indexes.map((index) => [label, index.name, index.totalWriteUnits.toLocaleString('en-US'), index.keys.toLocaleString('en-US'), `\`${index.hottestKey}\``, `${(index.hottestShare * 100).toFixed(1)}%`, index.hottestWriteUnitsPerDispatch, index.projectedWcuPerSecondAt5k.toLocaleString('en-US')]),
  );
  const topKeys = (workload: ScaleResult['steady']): string => workload.topKeys.map((key) => `\`${key.partitionKey}\` (${key.name}, ${key.projectedWcuPerSecondAt5k.toLocaleString('en-US')} WCU/s)`).join(', ');
  return [
    [row(header), row(header.map(() => '---')), ...rows.map(row)].join('\n'),
    '',
    `Top three keys, steady (${scale.steady.dispatches.toLocaleString('en-US')} lifecycles at ${scale.steady.dispatchesPerSecond} dispatches/s locally): ${topKeys(scale.steady)}.`,
    `Top three keys, outage (${scale.outage.dispatches.toLocaleString('en-US')} retried dispatches at ${scale.outage.dispatchesPerSecond} retries/s locally): ${topKeys(scale.outage)}.`,
    `Hottest key at 5,000 dispatches/s: ${scale.hottestKeyWcuAt5kPerSecond.toLocaleString('en-US')} WCU/s (limit ${KEY_WRITE_LIMIT_PER_SECOND.toLocaleString('en-US')}).`,
    `Check of the per-key count against DynamoDB's own ConsumedCapacity for the same calls: steady ${scale.steady.writeUnitsCheck.perPartitionKey.toLocaleString('en-US')} vs ${scale.steady.writeUnitsCheck.consumedCapacity.toLocaleString('en-US')} WU, outage ${scale.outage.writeUnitsCheck.perPartitionKey.toLocaleString('en-US')} vs ${scale.outage.writeUnitsCheck.consumedCapacity.toLocaleString('en-US')} WU.`,
  ].join('\n');
}

/** The monitor-load table of docs/performance.md. */
export function monitorLoadTable(load: MonitorLoadResult): string {
  const row = (cells: readonly (string | number)[]): string => `| ${cells.join(' | ')} |`;
  const table = (header: readonly string[], rows: ReadonlyArray<readonly (string | number)[]>): string =>
    [row(header), row(header.map(() => '---')), ...rows.map(row)].join('\n');
  return [
  table(
    ['due runs seeded', 'handled in one tick', 'seconds', 'ms per due item', 'read units per due item', 'write units per due item', 'requests per due item'],
    load.ticks.map((tick) => [tick.seeded.toLocaleString('en-US'), `${tick.handled.toLocaleString('en-US')}${tick.outOfBudget ? ' (budget spent)' : ''}`, tick.seconds, round(tick.secondsPerDueItem * 1000, 3), tick.readUnitsPerDueItem, tick.writeUnitsPerDueItem, tick.requestsPerDueItem]),
  ),
  '',
  `Seconds per due item, ${load.sizes.large.toLocaleString('en-US')} ÷ ${load.sizes.small.toLocaleString('en-US')} due (per interleaved round): min ${load.secondsPerDueItemRatio.min}, median ${load.secondsPerDueItemRatio.median}, max ${load.secondsPerDueItemRatio.max}. Due items handled by one tick of ${load.sizes.large.toLocaleString('en-US')}: ${load.monitorDueItemsPerTick.toLocaleString('en-US')}.`,
].join('\n');
}
