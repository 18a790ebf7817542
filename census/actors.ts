import { setTimeout as sleep } from 'node:timers/promises';
import { ROUTES, routePath } from '@dispatch-ledger/protocol';
import type { RunningPlatform } from '../local/platform.js';
import type { LedgerTable } from '../shared/adapters/ledger-writes.js';
import type { CensusFaults } from './faults.js';
import { LIMIT_CHANGE, LIMITED_TARGET, ORIGIN, type DispatchPlan, type Workload } from './workload.js';

export interface Actors {
  stop(): Promise<void>;
}

/** What the census's faults of its own need from it: the limited target's limit, and the DLQ redrive. */
export interface ActorHooks {
  /** How often the second monitor tick runs (the census's `CENSUS_TIMING`). */
  readonly concurrentTickEverySeconds: number;
  setLimit(limit: number): Promise<void>;
  redrive(signal: AbortSignal): Promise<void>;
  readonly hasRedrive: boolean;
}

/**
 * What the census does while the platform works: decides approvals once they are requested, forces
 * redispatches of running or completing dispatches, and runs a second monitor tick alongside the
 * scheduled one. It watches the dispatches by key in the table, not through the event log, so its
 * timing does not depend on how far behind the bus is.
 */
export function startActors(platform: RunningPlatform, table: LedgerTable, workload: Workload, faults: CensusFaults, log: (line: Record<string, unknown>) => void, hooks: ActorHooks): Actors {
  const api = platform.info.apiUrl;
  const post = (path: string, body: unknown): Promise<Response> =>
    fetch(`${api}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-ledger-origin': ORIGIN }, body: JSON.stringify(body) });
  const stop = new AbortController();
  const work: Array<Promise<unknown>> = [];
  const toDecide = new Map(workload.dispatches.filter((plan) => plan.approval).map((plan) => [plan.dispatchId, plan]));
  const toRedispatch = new Map(faults.enabled('forced_redispatch') ? workload.dispatches.filter((plan) => plan.redispatch).map((plan) => [plan.dispatchId, plan]) : []);

  const approve = async (plan: DispatchPlan, approvalId: string): Promise<void> => {
    const answer = await post(routePath(ROUTES.decideApproval, { dispatchId: plan.dispatchId }), { approvalId, decision: plan.approval ?? 'approve' });
    const text = await answer.text();
    // Not taken (the target unreachable in an outage, a crash): asked again on the next pass.
    if (answer.ok) toDecide.delete(plan.dispatchId);
    else log({ level: 'info', msg: 'approval not taken', dispatchId: plan.dispatchId, status: answer.status, body: text.slice(0, 300) });
  };

  const redispatch = async (plan: DispatchPlan): Promise<void> => {
    // Racing the run: a slow run is mid-work; a quick one is completing or has just completed.
    await sleep(plan.behavior === 'slow' ? 1_000 : 0);
    const answer = await post(routePath(ROUTES.redispatch, { dispatchId: plan.dispatchId }), { reason: 'census: forced redispatch racing the run', force: true });
    const text = await answer.text();
    if (answer.ok) faults.count('forced_redispatch', plan.dispatchId);
    else log({ level: 'info', msg: 'redispatch refused', dispatchId: plan.dispatchId, status: answer.status, body: text.slice(0, 300) });
  };

  const watch = async (): Promise<void> => {
    while (!stop.signal.aborted && (toDecide.size > 0 || toRedispatch.size > 0)) {
      const passes: Array<Promise<void>> = [];
      for (const plan of [...toDecide.values(), ...toRedispatch.values()]) {
        passes.push(
          (async () => {
            const state = await table.getState(plan.dispatchId);
            if (!state || stop.signal.aborted) return;
            const approvalId = state.execution.pendingApproval?.approvalId;
            if (toDecide.has(plan.dispatchId) && approvalId) await approve(plan, approvalId);
            if (toRedispatch.has(plan.dispatchId) && state.phase === 'submitted' && state.attempt === 1) {
              toRedispatch.delete(plan.dispatchId);
              work.push(redispatch(plan).catch((error: unknown) => log({ level: 'warn', msg: 'redispatch failed', error: String(error) })));
            }
          })().catch((error: unknown) => log({ level: 'warn', msg: 'watch failed', dispatchId: plan.dispatchId, error: String(error) })),
        );
        // A few reads at a time: the table is shared with the platform at work.
        if (passes.length >= 4) await Promise.all(passes.splice(0));
      }
      await Promise.all(passes);
      await sleep(2_000, undefined, { signal: stop.signal }).catch(() => undefined);
    }
  };

  const concurrentTicks = async (): Promise<void> => {
    while (!stop.signal.aborted) {
      await sleep(hooks.concurrentTickEverySeconds * 1000, undefined, { signal: stop.signal }).catch(() => undefined);
      if (stop.signal.aborted || !faults.enabled('monitor_concurrent')) continue;
      faults.count('monitor_concurrent');
      await Promise.all([platform.scheduler.tick(), platform.scheduler.tick()]);
    }
  };

  // The limited target's limit, raised and lowered while dispatches wait for it (CONTRACT §11): low for
  // a while, then high long enough to fill its slots, then low again while they drain. After a number
  // of changes in proportion to its dispatches it stays high, so its queue does not outlast the census.
  const limited = workload.dispatches.filter((plan) => plan.limited).length;
  const maxChanges = Math.max(LIMIT_CHANGE.atLeastChanges, Math.round(limited * LIMIT_CHANGE.changesPerDispatch));
  const changeLimits = async (): Promise<void> => {
    let high = false;
    for (let changes = 0; !stop.signal.aborted && faults.enabled('limit_change') && (changes < maxChanges || !high); changes += 1) {
      await sleep((high ? LIMIT_CHANGE.highSeconds : LIMIT_CHANGE.lowSeconds) * 1000, undefined, { signal: stop.signal }).catch(() => undefined);
      if (stop.signal.aborted || !faults.enabled('limit_change')) return;
      const waiting = await table.countWaiting(LIMITED_TARGET, 1);
      // Raised only while dispatches wait; a raised limit comes down again until the last change.
      if (!high && waiting === 0) {
        changes -= 1;
        continue;
      }
      high = !high;
      await hooks.setLimit(high ? LIMIT_CHANGE.high : LIMIT_CHANGE.low);
      if (waiting > 0) faults.count('limit_change', LIMITED_TARGET);
    }
  };

  const loops = [
    watch(),
    concurrentTicks(),
    changeLimits().catch((error: unknown) => log({ level: 'warn', msg: 'limit change failed', error: String(error) })),
    hooks.hasRedrive ? hooks.redrive(stop.signal).catch((error: unknown) => log({ level: 'warn', msg: 'DLQ redrive failed', error: String(error) })) : Promise.resolve(),
  ];
  return {
    async stop() {
      stop.abort();
      await Promise.allSettled(loops);
      await Promise.allSettled(work);
    },
  };
}
