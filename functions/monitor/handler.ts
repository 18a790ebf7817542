import type { ScheduledEvent } from 'aws-lambda';
import { monitorTick } from '../../shared/monitor/monitor.js';
import { logger, monitorDeps } from './deps.js';

/** The monitor, on an EventBridge schedule (1 minute in AWS; `--tick` seconds locally). */
export const handler = async (_event: ScheduledEvent): Promise<void> => {
  const report = await monitorTick(monitorDeps);
  if (report.due > 0) logger.info('monitor tick', { due: report.due, actions: report.actions });
};
