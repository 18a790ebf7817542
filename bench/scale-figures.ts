import { BASE_TABLE, type PartitionWriteReport } from './partition-writes.js';

/**
 * The scale bench's figures (CONTRACT §14): from the writes per partition key a workload made, each table's
 * and index's hottest key, and what it would take at the contract's rate. `scale.ts` runs the workloads.
 */

/** The contract's rate (CONTRACT §14). */
export const CONTRACT_DISPATCHES_PER_SECOND = 5_000;
/** The most write units a second one partition key may take (CONTRACT §14, DynamoDB's per-partition limit). */
export const KEY_WRITE_LIMIT_PER_SECOND = 1_000;
/** The table's name in the report: the bench's table has a unique name of its own. */
const REPORTED_TABLE = 'ledger';

/** The hottest key of one table or index in one workload. */
export interface ScaleIndexFigures {
  /** `ledger` (the base table) or `ledger/<index>`. */
  readonly name: string;
  readonly totalWriteUnits: number;
  readonly keys: number;
  readonly hottestKey: string;
  readonly hottestWriteUnits: number;
  /** The hottest key's share of this table's or index's write units. */
  readonly hottestShare: number;
  /** The hottest key's write units per dispatch of the workload. */
  readonly hottestWriteUnitsPerDispatch: number;
  /** What the hottest key would take at 5,000 dispatches/s: write units per dispatch × 5,000. */
  readonly projectedWcuPerSecondAt5k: number;
  /** What it took here, at the measured local rate. */
  readonly localWcuPerSecond: number;
}

export interface ScaleWorkloadResult {
  /** Dispatches the measured part carried (steady: full lifecycles; outage: retried dispatches). */
  readonly dispatches: number;
  readonly seconds: number;
  readonly dispatchesPerSecond: number;
  /** Every table and index written, hottest projected first. */
  readonly indexes: readonly ScaleIndexFigures[];
  /** The three hottest keys over every table and index, by projected WCU/s at 5,000 dispatches/s. */
  readonly topKeys: ReadonlyArray<{ readonly name: string; readonly partitionKey: string; readonly projectedWcuPerSecondAt5k: number }>;
  readonly hottestKeyWcuAt5kPerSecond: number;
  /**
   * A check of the per-key count: its total over the table and every index, next to the write units the
   * meter read from DynamoDB's ConsumedCapacity for the same calls (transactions modelled without their
   * index writes, which a request cannot show: see `transactWriteCharge`).
   */
  readonly writeUnitsCheck: { readonly perPartitionKey: number; readonly consumedCapacity: number };
  readonly notes: readonly string[];
}

export interface ScaleResult {
  readonly steady: ScaleWorkloadResult;
  readonly outage: ScaleWorkloadResult;
  /** The larger of the two workloads' hottest projected key. */
  readonly hottestKeyWcuAt5kPerSecond: number;
  /** The steady workload's measured local rate (full lifecycles a second). */
  readonly measuredDispatchesPerSecond: number;
}

const round = (value: number, digits = 2): number => Math.round(value * 10 ** digits) / 10 ** digits;

/** A target whose `POST /runs` accepts at once (the run is named after the dispatch), or, when down, answers 503. */
export function scaleFigures(report: PartitionWriteReport, dispatches: number, consumedWriteUnits: number, notes: readonly string[]): ScaleWorkloadResult {
  const indexes: ScaleIndexFigures[] = [];
  const keys: Array<{ name: string; partitionKey: string; projectedWcuPerSecondAt5k: number }> = [];
  for (const perIndex of Object.values(report.tables)) {
    for (const [index, writes] of Object.entries(perIndex)) {
      const name = index === BASE_TABLE ? REPORTED_TABLE : `${REPORTED_TABLE}/${index}`;
      const projected = (units: number): number => round((units / dispatches) * CONTRACT_DISPATCHES_PER_SECOND, 1);
      for (const key of writes.top) keys.push({ name, partitionKey: key.partitionKey, projectedWcuPerSecondAt5k: projected(key.writeUnits) });
      const hottest = writes.top[0];
      if (!hottest) continue;
      indexes.push({
        name,
        totalWriteUnits: writes.totalWriteUnits,
        keys: writes.keys,
        hottestKey: hottest.partitionKey,
        hottestWriteUnits: hottest.writeUnits,
        hottestShare: round(hottest.writeUnits / writes.totalWriteUnits, 4),
        hottestWriteUnitsPerDispatch: round(hottest.writeUnits / dispatches, 4),
        projectedWcuPerSecondAt5k: projected(hottest.writeUnits),
        localWcuPerSecond: round(hottest.writeUnitsPerSecond, 1),
      });
    }
  }
  indexes.sort((a, b) => b.projectedWcuPerSecondAt5k - a.projectedWcuPerSecondAt5k || a.name.localeCompare(b.name));
  keys.sort((a, b) => b.projectedWcuPerSecondAt5k - a.projectedWcuPerSecondAt5k || a.name.localeCompare(b.name) || a.partitionKey.localeCompare(b.partitionKey));
  return {
    dispatches,
    seconds: round(report.elapsedSeconds, 1),
    dispatchesPerSecond: round(dispatches / report.elapsedSeconds, 1),
    indexes,
    topKeys: keys.slice(0, 3),
    hottestKeyWcuAt5kPerSecond: indexes[0]?.projectedWcuPerSecondAt5k ?? 0,
    writeUnitsCheck: { perPartitionKey: round(indexes.reduce((sum, index) => sum + index.totalWriteUnits, 0)), consumedCapacity: round(consumedWriteUnits) },
    notes,
  };
}
