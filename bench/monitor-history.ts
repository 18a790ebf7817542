import { newDispatchFactory, noTargetWork } from '../test/support/factories.js';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { BATCH_WRITE_ITEMS, batchPutItems, LOAD_CONCURRENCY } from './batch-load.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../local/engines/index.js';
import { ensureLedgerTable } from '../local/resources.js';
import { CapacityMeter } from './capacity-meter.js';
import type { OperationTotals } from './capacity-units.js';
import { stateItem } from '../shared/adapters/state-item.js';
import { LedgerDueIndex } from '../shared/adapters/due-index.js';
import { LedgerTable } from '../shared/adapters/ledger-writes.js';
import type { BlobStore } from '../shared/ledger/port.js';
import { DEFAULT_RETRY_POLICY } from '../shared/dispatch/retry.js';
import type { NextState } from '../shared/dispatch/state.js';
import { accepted, submitted } from '../shared/dispatch/transitions/lifecycle.js';
import { DUE_PAGE_SIZE, monitorTick, type MonitorDeps } from '../shared/usecases/monitor.js';
import { loopbackOnly } from '../local/loopback.js';
import type { BenchContext } from './types.js';

/**
 * Monitor cost vs history: read units and requests per tick with 100 due runs and 1k / 10k / 100k
 * finished runs in the table. The monitor reads the sparse, sharded `due` index and then each due
 * dispatch by key, so its cost should follow what is due and stay flat as the history grows.
 *
 * Counted, not timed: units come from DynamoDB Local's ConsumedCapacity through a CapacityMeter on the
 * monitor's client; the history is loaded through a separate, unmetered client.
 */

export interface MonitorTickMeasurement {
  /** Finished (not due) dispatches in the table when the tick ran. */
  readonly finished: number;
  /** Dispatches the tick found due (always 100 by construction). */
  readonly due: number;
  readonly readUnits: number;
  readonly writeUnits: number;
  readonly requests: number;
  /** Per DynamoDB operation (Query on the due index, GetItem per due dispatch, PutItem per rescheduled one). */
  readonly byOperation: Record<string, OperationTotals>;
}

export interface MonitorHistoryResult {
  /** History sizes measured, in order. */
  readonly finished: number[];
  readonly perTick: MonitorTickMeasurement[];
  /** readUnits at the largest history ÷ readUnits at the smallest (target ≤ 1.1). */
  readonly readUnitsRatio100kVs1k: number;
  /** How fast the history was loaded (BatchWriteItem of state items, unmetered client). */
  readonly load: { readonly items: number; readonly seconds: number; readonly itemsPerSecond: number };
  readonly notes: string[];
}

const DUE_RUNS = 100;
const FULL_SIZES = [1_000, 10_000, 100_000];
const QUICK_SIZES = [1_000, 2_000, 5_000];
const RETENTION_SECONDS = 90 * 86_400;

/** The clock of the whole benchmark: every tick runs at T. */
const T = new Date('2026-12-01T12:00:00.000Z');


function dynamodbClient(endpoint: string): DynamoDBClient {
  return loopbackOnly(new DynamoDBClient({ region: LOCAL_REGION, endpoint, credentials: LOCAL_CREDENTIALS, maxAttempts: 10 }));
}

/** A run submitted at `at` (T by default) and running (watch time `at` + stallAfterSeconds). */
export function runningState(dispatchId: string, at: Date = T): NextState {
  const start = accepted(newDispatchFactory({ dispatchId, writtenAt: at.toISOString() }), at);
  return submitted(start, { kind: 'accepted', runId: `r-${dispatchId}`, status: 'running', requestId: `q-${dispatchId}` }, DEFAULT_RETRY_POLICY, at);
}

/** Due now (its watch time passed) but active a moment ago: the tick reschedules it without contacting a target. */
const dueState = (dispatchId: string): NextState => ({ ...runningState(dispatchId), dueAt: new Date(T.getTime() - 1000).toISOString() });

/** A run that completed with nothing to check: out of the due index for good. */
function finishedState(dispatchId: string): NextState {
  const running = runningState(dispatchId);
  return {
    ...running,
    execution: { ...running.execution, status: 'completed', nativeStatus: 'completed', completedAt: T.toISOString() },
    evidence: { ...running.evidence, outcome: 'unverified', deadline: null },
    dueAt: null,
  };
}

/** No evidence is checked by a tick of running dispatches; any blob access is a bench bug (monitor-history and monitor-load). */
export const noBlobs: BlobStore = {
  put: () => Promise.reject(new Error('the monitor benches store no blobs')),
  getText: () => Promise.reject(new Error('the monitor benches read no blobs')),
  getBytes: () => Promise.reject(new Error('the monitor benches check no evidence')),
};

/** The states as ledger-items.ts stores them (each the first version intake's write leaves), loaded with BatchWriteItem (`batch-load.ts`). */
export function batchPutStates(documents: DynamoDBDocumentClient, tableName: string, states: readonly NextState[]): Promise<void> {
  return batchPutItems(documents, tableName, states.map((state) => stateItem(state, { version: 1, changes: state.changes }, RETENTION_SECONDS)));
}

/** The monitor's client, metered; the loader's (which seeds the table), not. */
export function monitorBenchClients(endpoint: string) {
  const metered = dynamodbClient(endpoint);
  const meter = new CapacityMeter();
  meter.attach(metered);
  const loader = dynamodbClient(endpoint);
  const marshallOptions = { marshallOptions: { removeUndefinedValues: true } };
  return {
    meter,
    meteredDocuments: DynamoDBDocumentClient.from(metered, marshallOptions),
    loader,
    loaderDocuments: DynamoDBDocumentClient.from(loader, marshallOptions),
    destroy: () => {
      metered.destroy();
      loader.destroy();
    },
  };
}

export async function runMonitorHistory(ctx: BenchContext): Promise<MonitorHistoryResult> {
  const sizes = ctx.quick ? QUICK_SIZES : FULL_SIZES;
  const tableName = ctx.uniqueName('bench-monitor-history');
  const notes: string[] = [];
  const clients = monitorBenchClients(ctx.endpoints.dynamodbEndpoint);
  const { meter, loader, loaderDocuments, meteredDocuments } = clients;

  try {
    await ensureLedgerTable(loader, tableName);
    const table = new LedgerTable(meteredDocuments, { tableName, retentionSeconds: RETENTION_SECONDS });
    const deps: MonitorDeps = {
      store: table,
      dueIndex: new LedgerDueIndex(meteredDocuments, tableName),
      ...noTargetWork(() => T, 'no target is contacted when nothing has stalled', noBlobs),
      pageSize: DUE_PAGE_SIZE,
    };

    const dueIds = Array.from({ length: DUE_RUNS }, (_, n) => `d-due-${String(n).padStart(3, '0')}`);
    const perTick: MonitorTickMeasurement[] = [];
    let finished = 0;
    let loadedItems = 0;
    let loadMs = 0;

    for (const size of sizes) {
      const more = Array.from({ length: size - finished }, (_, n) => finishedState(`d-fin-${String(finished + n).padStart(7, '0')}`));
      const started = performance.now();
      await batchPutStates(loaderDocuments, tableName, more);
      const elapsed = performance.now() - started;
      loadedItems += more.length;
      loadMs += elapsed;
      finished = size;
      ctx.log(`monitor-history: ${finished} finished runs in the table (+${more.length} in ${(elapsed / 1000).toFixed(1)} s, ${Math.round(more.length / (elapsed / 1000))} items/s)`);

      // Re-arm the same 100 dispatches as due (the previous tick rescheduled them): every tick sees exactly 100.
      await batchPutStates(loaderDocuments, tableName, dueIds.map(dueState));

      const before = meter.snapshot();
      const report = await monitorTick(deps);
      const spent = meter.since(before);
      const rescheduled = report.actions.rescheduled ?? 0;
      if (report.due !== DUE_RUNS || rescheduled !== DUE_RUNS) {
        notes.push(`with ${finished} finished runs the tick saw ${report.due} due and rescheduled ${rescheduled} (expected ${DUE_RUNS} each)`);
      }
      perTick.push({ finished, due: report.due, readUnits: spent.readUnits, writeUnits: spent.writeUnits, requests: spent.requests, byOperation: spent.byOperation });
      ctx.log(`monitor-history: tick with ${finished} finished: ${report.due} due, ${spent.readUnits} RRU, ${spent.writeUnits} WRU, ${spent.requests} requests`);
    }

    const first = perTick[0];
    const last = perTick[perTick.length - 1];
    if (!first || !last) throw new Error('no tick was measured');
    const readUnitsRatio100kVs1k = first.readUnits === 0 ? Number.NaN : last.readUnits / first.readUnits;
    const loadSeconds = loadMs / 1000;

    notes.push(
      `each tick: ${DUE_RUNS} due runs (due 1 s ago, active at the tick's time) among ${sizes.join(' / ')} finished runs; the tick reschedules each due run without contacting a target`,
      `reads per tick: one Query per due-index shard (16) + one strongly consistent GetItem per due run; writes: a claim and its release per shard with something due (UpdateItem, 1 WRU each), one conditional PutItem per rescheduled run, 3 WRU each as DynamoDB Local reports it (table 1 + due index 2: moving an item's dueAt is a delete and a put in the index)`,
      `history loaded as dispatch state items only (ledger-items.ts stateItem via BatchWriteItem, ${LOAD_CONCURRENCY} batches of ${BATCH_WRITE_ITEMS} in flight, unmetered client): ${loadedItems} items in ${loadSeconds.toFixed(1)} s = ${Math.round(loadedItems / loadSeconds)} items/s on DynamoDB Local. Accepted-message items are in no index the monitor reads, so they were left out`,
      `units are DynamoDB Local's ConsumedCapacity (Query on a KEYS_ONLY GSI is eventually consistent: 0.5 RRU per 4 KB, minimum 0.5 per query)`,
      `ratio ${readUnitsRatio100kVs1k.toFixed(3)} (largest ÷ smallest history); target ≤ 1.1: ${readUnitsRatio100kVs1k <= 1.1 ? 'met' : 'NOT met'}`,
    );
    if (ctx.quick) notes.push('--quick: sizes 1k / 2k / 5k; readUnitsRatio100kVs1k is then 5k ÷ 1k');

    return {
      finished: perTick.map((tick) => tick.finished),
      perTick,
      readUnitsRatio100kVs1k,
      load: { items: loadedItems, seconds: Number(loadSeconds.toFixed(2)), itemsPerSecond: Math.round(loadedItems / loadSeconds) },
      notes,
    };
  } finally {
    clients.destroy();
  }
}
