import { countForTarget } from '../../shared/adapters/metrics.js';
import type { ScheduledEvent } from 'aws-lambda';
import { monitorTick, type MonitorAction } from '../../shared/monitor/monitor.js';
import { logger, metrics, monitorDeps } from './deps.js';

/** The contract's metric for each action worth a graph or an alarm (dimension Target only). */
const METRIC: Partial<Record<MonitorAction, string>> = { retrying: 'SubmissionRetries', submitted: 'SubmissionRetries', blocked: 'BlockedDispatches' };

/** The monitor, on an EventBridge schedule (1 minute in AWS; `--tick` seconds locally). */
export const handler = async (_event: ScheduledEvent): Promise<void> => {
  const report = await monitorTick(monitorDeps);
  if (report.due === 0) return;
  logger.info('monitor tick', { due: report.due, actions: report.actions });
  for (const { action, target } of Object.values(report.actions)) {
    const name = METRIC[action];
    if (name) countForTarget(metrics, name, target ?? 'none');
  }
};
