import { functionLogger, functionMetrics } from '../../shared/adapters/powertools.js';
import type { LedgerConfig, ReadConfigOptions } from '../../shared/adapters/config.js';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { buildLedgerAdapters, dispatchWorkDeps } from '../../shared/adapters/wiring.js';
import { DUE_PAGE_SIZE, type MonitorDeps } from '../../shared/usecases/monitor.js';

/** Composition root of the monitor function. */
export const logger = functionLogger('monitor');
export const metrics = functionMetrics();

export const CONFIG: ReadConfigOptions = { parseRegistry: parseStaticRegistry };

export function monitorDeps(config: LedgerConfig): MonitorDeps {
  const adapters = buildLedgerAdapters(config, LedgerTable);
  return {
    ...dispatchWorkDeps(config, adapters),
    store: adapters.table,
    dueIndex: new LedgerDueIndex(adapters.documents, config.tableName),
    pageSize: DUE_PAGE_SIZE,
    periodSeconds: config.monitorPeriodSeconds,
    // Where the last tick stopped short, kept while the execution environment stays warm.
    shardCursor: {},
  };
}
