import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { readLedgerConfig } from '../../shared/adapters/config.js';
import { buildLedgerAdapters } from '../../shared/adapters/wiring.js';
import type { MonitorDeps } from '../../shared/monitor/monitor.js';

/** Composition root of the monitor function. */
export const logger = new Logger({ serviceName: 'dispatch-ledger', persistentKeys: { function: 'monitor' } });
export const metrics = new Metrics({ namespace: 'DispatchLedger', serviceName: 'dispatch-ledger' });

const config = readLedgerConfig();
const adapters = buildLedgerAdapters(config);

export const monitorDeps: MonitorDeps = {
  store: adapters.table,
  blobs: adapters.blobs,
  targetFor: adapters.targetFor,
  callbackUrl: config.apiBaseUrl,
  retryPolicy: config.retryPolicy,
  now: () => new Date(),
  claimSeconds: config.claimSeconds,
  limitPerShard: 50,
  periodSeconds: config.monitorPeriodSeconds,
};
