import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ensureLedgerTable } from '../local/resources.js';
import type { OperationTotals } from './capacity-units.js';
import { httpTarget } from '../shared/adapters/http-target.js';
import { LedgerDueIndex } from '../shared/adapters/due-index.js';
import { LedgerTable } from '../shared/adapters/ledger-writes.js';
import { DEFAULT_RETRY_POLICY } from '../shared/dispatch/retry.js';
import type { NextState } from '../shared/dispatch/state.js';
import { DEFAULT_PERIOD_SECONDS, DUE_PAGE_SIZE, MONITOR_TIMEOUT_SECONDS, monitorTick, PAGE_CONCURRENCY, SHARD_CONCURRENCY, tickBudget, type MonitorDeps, type TickReport } from '../shared/usecases/monitor.js';
import type { TargetPort, TargetRegistration } from '../shared/targets/port.js';
import { batchPutStates, monitorBenchClients, noBlobs, runningState } from './monitor-history.js';
import { spreadOf, type BenchContext, type Spread } from './types.js';

/**
 * The monitor under load (CONTRACT §14; issue 18): one tick with 1,000 and with 20,000 due runs whose
 * stall deadline passed. Each is read by key, looked up at an HTTP target on 127.0.0.1 (the real
 * adapter; it answers "still running"), and written back stalled and rescheduled — the per-item cost
 * of a real stall watch. The tick runs with the production budget (one period, a 2-minute invocation,
 * the handler's `tickBudget`) and the production page size and concurrency, on the real clock.
 *
 * Timed (seconds per due item, the small and large sizes interleaved over rounds, each tick on a fresh
 * table) and counted (units and requests per due item from DynamoDB Local's ConsumedCapacity, through
 * a CapacityMeter on the monitor's client; the states are seeded through an unmetered one).
 */

export interface MonitorLoadTick {
  /** Due runs seeded before the tick. */
  readonly seeded: number;
  /** Due runs the tick handled within its budget. */
  readonly handled: number;
  readonly seconds: number;
  readonly secondsPerDueItem: number;
  readonly readUnitsPerDueItem: number;
  readonly writeUnitsPerDueItem: number;
  readonly requestsPerDueItem: number;
  readonly lookups: number;
  readonly outOfBudget: boolean;
  readonly actions: TickReport['actions'];
  readonly shards: TickReport['shards'];
  readonly byOperation: Record<string, OperationTotals>;
}

export interface MonitorLoadResult {
  readonly sizes: { readonly small: number; readonly large: number };
  /** Every measured tick, in the order run (small and large interleaved). */
  readonly ticks: MonitorLoadTick[];
  /** Seconds per due item at the large size ÷ at the small, per round (target: median ≤ 1.2). */
  readonly secondsPerDueItemRatio: Spread;
  /** The median of `secondsPerDueItemRatio`. */
  readonly monitorSecondsPerDueItemRatio20kVs1k: number;
  /** Due runs handled by one tick at the large size (the least of the rounds; target ≥ 10,000). */
  readonly monitorDueItemsPerTick: number;
  /** Per due item at each size (the last round): flat is good. */
  readonly perDueItem: Record<'small' | 'large', { readonly readUnits: number; readonly writeUnits: number; readonly requests: number }>;
  readonly notes: string[];
}

const FULL = { small: 1_000, large: 20_000, rounds: 2 };
const QUICK = { small: 200, large: 2_000, rounds: 1 };
/** A warm-up tick on a fresh engine first (the JVM's JIT), not measured. */
const WARM_UP = 300;
const RETENTION_SECONDS = 90 * 86_400;
const TARGET = 'bench-agent';
const round = (value: number, digits = 4): number => Math.round(value * 10 ** digits) / 10 ** digits;

/** A target on 127.0.0.1 whose every run is still running (CONTRACT §8 run view). */
async function stillRunningTarget(): Promise<{ readonly server: Server; readonly baseUrl: string; readonly lookups: () => number }> {
  let lookups = 0;
  const server = createServer((request, response) => {
    const runId = decodeURIComponent((request.url ?? '').replace(/^\/runs\//, ''));
    lookups += 1;
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ runId, status: 'running' }));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, lookups: () => lookups };
}

/** Submitted an hour before `now`, silent since, due a second ago: the tick looks it up and finds it still running. */
const stalledState = (dispatchId: string, now: Date): NextState => {
  const running = runningState(dispatchId, new Date(now.getTime() - 3_600_000));
  return { ...running, target: TARGET, dueAt: new Date(now.getTime() - 1000).toISOString() };
};

/**
 * `onFreshEngines` runs its part on engines started for it alone: each measured tick gets its own
 * DynamoDB Local (with a warm-up tick first). One engine for every tick slowed the tick after the
 * 20,000 tenfold (71–103 ms per item instead of ~4): DynamoDB Local keeps what it held, dropped tables included.
 */
export async function runMonitorLoad(ctx: Pick<BenchContext, 'log' | 'quick' | 'uniqueName'>, onFreshEngines: <T>(part: (dynamodbEndpoint: string) => Promise<T>) => Promise<T>): Promise<MonitorLoadResult> {
  const plan = ctx.quick ? QUICK : FULL;
  const notes: string[] = [];
  const target = await stillRunningTarget();
  const registration: TargetRegistration = { name: TARGET, kind: 'http', baseUrl: target.baseUrl };
  // One adapter (one keep-alive pool) per target, as the functions' wiring keeps them.
  const port: TargetPort = httpTarget(registration);

  /** A warm-up tick, then one tick over `size` freshly seeded due runs, on engines of their own. */
  const tickOver = (size: number, label: string): Promise<MonitorLoadTick> =>
    onFreshEngines(async (endpoint) => {
      const clients = monitorBenchClients(endpoint);
      try {
        await tickOn(clients, WARM_UP, `${label}-warm`);
        return await tickOn(clients, size, label);
      } finally {
        clients.destroy();
      }
    });

  /** One tick over `size` freshly seeded due runs, on a table of its own. */
  const tickOn = async (clients: ReturnType<typeof monitorBenchClients>, size: number, label: string): Promise<MonitorLoadTick> => {
    const { meter, loader, loaderDocuments, meteredDocuments } = clients;
    const tableName = ctx.uniqueName('bench-monitor-load');
    await ensureLedgerTable(loader, tableName);
    // The production table options (a registration read is reused 30 s, as TARGET_CACHE_SECONDS defaults).
    const table = new LedgerTable(meteredDocuments, { tableName, retentionSeconds: RETENTION_SECONDS, targetCacheMs: 30_000 });
    await new LedgerTable(loaderDocuments, { tableName, retentionSeconds: RETENTION_SECONDS }).putTarget(registration);
    const seededAt = new Date();
    const seedStart = performance.now();
    await batchPutStates(loaderDocuments, tableName, Array.from({ length: size }, (_, n) => stalledState(`d-load-${label}-${String(n).padStart(6, '0')}`, seededAt)));
    ctx.log(`monitor-load: ${size} due runs seeded in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`);

    const deps: MonitorDeps = {
      store: table,
      dueIndex: new LedgerDueIndex(meteredDocuments, tableName),
      blobs: noBlobs,
      targetFor: () => port,
      callbackUrl: 'http://127.0.0.1:9',
      retryPolicy: DEFAULT_RETRY_POLICY,
      now: () => new Date(),
      claimSeconds: 60,
      pageSize: DUE_PAGE_SIZE,
      periodSeconds: DEFAULT_PERIOD_SECONDS,
    };
    const lookupsBefore = target.lookups();
    const before = meter.snapshot();
    const started = performance.now();
    const now = new Date();
    // What the handler gives a tick at the start of a fresh invocation: the period, less the margin.
    const report = await monitorTick(deps, tickBudget(now, MONITOR_TIMEOUT_SECONDS * 1000, DEFAULT_PERIOD_SECONDS));
    const seconds = (performance.now() - started) / 1000;
    const spent = meter.since(before);
    const handled = report.due;
    const per = (value: number): number => (handled === 0 ? Number.NaN : round(value / handled));
    const measured: MonitorLoadTick = {
      seeded: size,
      handled,
      seconds: round(seconds, 2),
      secondsPerDueItem: per(seconds),
      readUnitsPerDueItem: per(spent.readUnits),
      writeUnitsPerDueItem: per(spent.writeUnits),
      requestsPerDueItem: per(spent.requests),
      lookups: target.lookups() - lookupsBefore,
      outOfBudget: report.outOfBudget,
      actions: report.actions,
      shards: report.shards,
      byOperation: spent.byOperation,
    };
    if (report.failures.length > 0) notes.push(`tick over ${size}: ${report.actions.failed ?? 0} failed, e.g. ${report.failures[0]?.subject}: ${report.failures[0]?.error}`);
    ctx.log(
      `monitor-load: tick over ${size} due: ${handled} handled in ${seconds.toFixed(1)} s (${(seconds / Math.max(1, handled) * 1000).toFixed(2)} ms each), ${measured.readUnitsPerDueItem} RRU, ${measured.writeUnitsPerDueItem} WRU, ${measured.requestsPerDueItem} requests per item${report.outOfBudget ? ', out of budget' : ''}`,
    );
    return measured;
  };

  try {
    const ticks: MonitorLoadTick[] = [];
    const ratios: number[] = [];
    for (let index = 0; index < plan.rounds; index += 1) {
      // Interleaved: the machine's noise hits both sizes alike.
      const small = await tickOver(plan.small, `s${index}`);
      const large = await tickOver(plan.large, `l${index}`);
      ticks.push(small, large);
      ratios.push(large.secondsPerDueItem / small.secondsPerDueItem);
    }
    const larges = ticks.filter((tick) => tick.seeded === plan.large);
    const smalls = ticks.filter((tick) => tick.seeded === plan.small);
    const lastSmall = smalls[smalls.length - 1];
    const lastLarge = larges[larges.length - 1];
    if (!lastSmall || !lastLarge) throw new Error('no tick was measured');
    const ratio = spreadOf(ratios);
    const dueItemsPerTick = Math.min(...larges.map((tick) => tick.handled));
    notes.push(
      `each tick: due runs submitted an hour before, silent since (stall deadline passed), on a fresh table; the tick reads each by key, looks it up at an HTTP target on 127.0.0.1 through the real adapter (answer: still running) and writes it back stalled with its next look scheduled (backoff)`,
      `the production tick: pages of ${DUE_PAGE_SIZE}, ${SHARD_CONCURRENCY} shards at a time × ${PAGE_CONCURRENCY} dispatches per page, the budget a ${MONITOR_TIMEOUT_SECONDS} s invocation gets (no new page after one period of ${DEFAULT_PERIOD_SECONDS} s less the margin), real clock`,
      `seeded through BatchWriteItem of ledger-items.ts state items (unmetered client); units are DynamoDB Local's ConsumedCapacity on the monitor's client: per item one GetItem (0.5+ RRU strongly consistent: 1 RRU), one conditional PutItem (table + due index), plus per shard worked one claim and one release (UpdateItem) and its page queries`,
      `${plan.rounds} round(s), ${plan.small.toLocaleString('en-US')} and ${plan.large.toLocaleString('en-US')} interleaved, each on engines of its own after a warm-up tick of ${WARM_UP}; seconds per due item ratio per round: ${ratios.map((value) => value.toFixed(3)).join(', ')}`,
      `monitorDueItemsPerTick: the fewest handled by one ${plan.large.toLocaleString('en-US')} tick within its budget (${larges.map((tick) => `${tick.handled} in ${tick.seconds} s${tick.outOfBudget ? ', out of budget' : ''}`).join('; ')})`,
    );
    if (ctx.quick) notes.push(`--quick: sizes ${QUICK.small} / ${QUICK.large}, one round (the ratio is then ${QUICK.large} ÷ ${QUICK.small})`);
    const perItem = (tick: MonitorLoadTick) => ({ readUnits: tick.readUnitsPerDueItem, writeUnits: tick.writeUnitsPerDueItem, requests: tick.requestsPerDueItem });
    return {
      sizes: { small: plan.small, large: plan.large },
      ticks,
      secondsPerDueItemRatio: { min: round(ratio.min, 3), median: round(ratio.median, 3), max: round(ratio.max, 3) },
      monitorSecondsPerDueItemRatio20kVs1k: round(ratio.median, 3),
      monitorDueItemsPerTick: dueItemsPerTick,
      perDueItem: { small: perItem(lastSmall), large: perItem(lastLarge) },
      notes,
    };
  } finally {
    target.server.closeAllConnections();
    target.server.close();
  }
}
