import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { readLedgerConfig } from '../../shared/adapters/config.js';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { buildLedgerAdapters, dispatchWorkDeps } from '../../shared/adapters/wiring.js';
import { DUE_PAGE_SIZE, type MonitorDeps } from '../../shared/usecases/monitor.js';

/** Composition root of the monitor function. */
export const logger = new Logger({ serviceName: 'dispatch-ledger', persistentKeys: { function: 'monitor' } });
export const metrics = new Metrics({ namespace: 'DispatchLedger', serviceName: 'dispatch-ledger' });

const config = readLedgerConfig({ parseRegistry: parseStaticRegistry });
const adapters = buildLedgerAdapters(config, LedgerTable);

export const monitorDeps: MonitorDeps = {
  ...dispatchWorkDeps(config, adapters),
  store: adapters.table,
  dueIndex: new LedgerDueIndex(adapters.documents, config.tableName),
  pageSize: DUE_PAGE_SIZE,
  periodSeconds: config.monitorPeriodSeconds,
  // Where the last tick stopped short, kept while the execution environment stays warm.
  shardCursor: {},
};
