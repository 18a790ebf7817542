import { countForTarget, gaugeForTarget } from '../../shared/adapters/metrics.js';
import type { ScheduledEvent } from 'aws-lambda';
import { isAdmitEvent } from '../../shared/adapters/admission-nudge.js';
import { monitorTick, type MonitorAction } from '../../shared/monitor/monitor.js';
import { admitWaiting } from '../../shared/usecases/submit-attempt.js';
import { logger, metrics, monitorDeps } from './deps.js';

/** The contract's metric for each action worth a graph or an alarm (dimension Target only). */
const METRIC: Partial<Record<MonitorAction, string>> = { retrying: 'SubmissionRetries', submitted: 'SubmissionRetries', blocked: 'BlockedDispatches' };

/**
 * The monitor, on an EventBridge schedule (1 minute in AWS; `--tick` seconds locally) — and invoked
 * asynchronously with `{ "admit": target }` by a write that freed one of the target's slots (CONTRACT
 * §11: admission at once, not at the next tick).
 */
export const handler = async (event: ScheduledEvent | { readonly admit: string }): Promise<void> => {
  if (isAdmitEvent(event)) {
    const admitted = await admitWaiting(monitorDeps, event.admit);
    logger.info('admission', { target: event.admit, admitted });
    return;
  }
  const report = await monitorTick(monitorDeps);
  // CONTRACT §7: each limited target's queue and the slots its unknown runs hold, every tick (gauges).
  for (const [target, flow] of Object.entries(report.targets)) {
    gaugeForTarget(metrics, 'WaitingDispatches', target, flow.waiting);
    gaugeForTarget(metrics, 'SlotsHeldByUnknownRuns', target, flow.unknownHeld);
  }
  if (report.due === 0 && Object.keys(report.targets).length === 0) return;
  logger.info('monitor tick', { due: report.due, actions: report.actions, targets: report.targets });
  for (const { action, target } of Object.values(report.actions)) {
    const name = METRIC[action];
    if (name) countForTarget(metrics, name, target ?? 'none');
  }
};
