import type { Context, ScheduledEvent } from 'aws-lambda';
import { countForTarget, gaugeForTarget } from '../../shared/adapters/metrics.js';
import { isAdmitEvent } from '../../shared/adapters/admission-nudge.js';
import { DEFAULT_PERIOD_SECONDS, LOGGED_TARGETS, monitorTick, tickBudget, type MonitorAction } from '../../shared/usecases/monitor.js';
import { admitWaiting } from '../../shared/usecases/submit-attempt.js';
import type { LedgerConfig } from '../../shared/adapters/config.js';
import { logger, metrics, monitorDeps } from './deps.js';

export { CONFIG } from './deps.js';

/** The contract's metric for each action worth a graph or an alarm (dimension Target only). */
const METRIC: Partial<Record<MonitorAction, string>> = { retrying: 'SubmissionRetries', submitted: 'SubmissionRetries', blocked: 'BlockedDispatches' };

/**
 * The monitor, on an EventBridge schedule (1 minute in AWS; `--tick` seconds locally) — and invoked
 * asynchronously with `{ "admit": target }` by a write that freed one of the target's slots (CONTRACT
 * §11: admission at once, not at the next tick). A tick takes no new page of due work once its budget
 * (the invocation's remaining time or the period, less a margin) is spent: the rest is the next tick's.
 */
export function createHandler(config: LedgerConfig): (event: ScheduledEvent | { readonly admit: string }, context: Pick<Context, 'getRemainingTimeInMillis'>) => Promise<void> {
  const deps = monitorDeps(config);
  return async (event, context) => {
    if (isAdmitEvent(event)) {
      const admitted = await admitWaiting(deps, event.admit);
      logger.info('admission', { target: event.admit, admitted });
      return;
    }
    const budget = tickBudget(deps.now(), context.getRemainingTimeInMillis(), deps.periodSeconds ?? DEFAULT_PERIOD_SECONDS);
    const report = await monitorTick(deps, budget);
    // CONTRACT §7: each limited target's queue and the slots its unknown runs hold, every tick (gauges).
    for (const [target, flow] of Object.entries(report.targets)) {
      gaugeForTarget(metrics, 'WaitingDispatches', target, flow.waiting);
      gaugeForTarget(metrics, 'SlotsHeldByUnknownRuns', target, flow.unknownHeld);
    }
    if (report.due === 0 && report.shards.held === 0 && report.failures.length === 0 && Object.keys(report.targets).length === 0) return;
    // Counts only (the report's size does not grow with what is due): safe to log whole every tick.
    const targets = Object.entries(report.byTarget);
    logger.info('monitor tick', { ...report, byTarget: Object.fromEntries(targets.slice(0, LOGGED_TARGETS)), ...(targets.length > LOGGED_TARGETS ? { targetsNotLogged: targets.length - LOGGED_TARGETS } : {}) });
    for (const [target, counts] of Object.entries(report.byTarget)) {
      for (const [action, count] of Object.entries(counts) as Array<[MonitorAction, number]>) {
        const name = METRIC[action];
        if (name && count > 0) countForTarget(metrics, name, target, count);
      }
    }
  };
}
