import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureLedgerTable } from '../../local/resources.js';
import { CapacityMeter } from '../../bench/capacity-meter.js';
import { DUE_SHARDS } from '../../shared/adapters/ledger-table.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import type { NextState } from '../../shared/dispatch/state.js';
import { notStored } from '../../shared/ledger/port.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { monitorTick, type MonitorDeps } from '../../shared/usecases/monitor.js';
import { newDispatchFactory, noTargetWork } from '../support/factories.js';
import { MemoryBlobs } from '../support/memory-blobs.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';

/** The monitor's cost follows what is due, never the history: counted, not timed. */
const clients = engineClients();
const meter = new CapacityMeter();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
meter.attach(dynamodb);
let table: LedgerTable;
let dueIndex: LedgerDueIndex;
const T = new Date('2026-12-01T12:00:00.000Z');

beforeAll(async () => {
  const name = uniqueName('monitor');
  await ensureLedgerTable(clients.dynamodb, name);
  const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
  table = new LedgerTable(documents, { tableName: name, retentionSeconds: 86_400 });
  dueIndex = new LedgerDueIndex(documents, name);
});
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

function runningState(dispatchId: string): NextState {
  const start = accepted(newDispatchFactory({ dispatchId, writtenAt: T.toISOString() }), T);
  return submitted(start, { kind: 'accepted', runId: `r-${dispatchId}`, status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, T);
}

/** Due now (its watch time passed) but active a moment ago: the tick reschedules it, no target contact. */
const dueState = (dispatchId: string): NextState => ({ ...runningState(dispatchId), dueAt: new Date(T.getTime() - 1000).toISOString() });
const finishedState = (dispatchId: string): NextState => {
  const running = runningState(dispatchId);
  return { ...running, execution: { ...running.execution, status: 'completed', nativeStatus: 'completed', completedAt: T.toISOString() }, dueAt: null };
};

async function putAll(states: NextState[]): Promise<void> {
  const queue = [...states];
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let state = queue.shift(); state; state = queue.shift()) await table.commit(notStored(state), state);
    }),
  );
}

const deps = (): MonitorDeps => ({
  store: table,
  dueIndex,
  ...noTargetWork(() => T, 'no target is contacted when nothing has stalled', new MemoryBlobs()),
  pageSize: 50,
});

async function measuredTick() {
  const before = meter.snapshot();
  const report = await monitorTick(deps());
  const spent = meter.since(before);
  return { due: report.due, requests: spent.requests, readUnits: spent.readUnits, reads: (spent.byOperation.Query?.requests ?? 0) + (spent.byOperation.GetItem?.requests ?? 0) };
}

describe('monitor cost versus history', () => {
  it('reads the same per tick with 100 due runs whether 100 or 5,000 finished runs are in the table', async () => {
    await putAll([...Array.from({ length: 100 }, (_, n) => finishedState(`d-fin-${n}`)), ...Array.from({ length: 100 }, (_, n) => dueState(`d-due-a-${n}`))]);
    const small = await measuredTick();

    await putAll([...Array.from({ length: 4_900 }, (_, n) => finishedState(`d-fin-more-${n}`)), ...Array.from({ length: 100 }, (_, n) => dueState(`d-due-b-${n}`))]);
    const large = await measuredTick();

    expect(small.due).toBe(100);
    expect(large.due).toBe(100);
    expect(large.reads).toBe(small.reads);
    expect(large.readUnits).toBe(small.readUnits);
    // DUE_SHARDS shard queries + one strongly consistent read per due run + the list of targets with a
    // concurrency limit (one item, CONTRACT §11; none here, so no slot or wait index reads follow).
    expect(small.reads).toBe(DUE_SHARDS + 100 + 1);
  });

  it('pages through more due runs than a page on the table, acting on each once, each shard under a claim it releases', async () => {
    await putAll(Array.from({ length: 120 }, (_, n) => dueState(`d-due-c-${n}`)));
    const before = meter.snapshot();
    const report = await monitorTick({ ...deps(), pageSize: 5 });
    const spent = meter.since(before);

    expect(report.due).toBe(120);
    expect(report.actions).toEqual({ rescheduled: 120 });
    // One read by key per due run (+ the limited targets' list), one write each; a claim and a release per shard worked.
    expect(spent.byOperation.GetItem?.requests).toBe(120 + 1);
    expect(spent.byOperation.PutItem?.requests).toBe(120);
    expect(spent.byOperation.UpdateItem?.requests).toBe(2 * report.shards.worked);
    // At least a page of 5 per 5 due in each shard: the pages, not one read of everything.
    expect(spent.byOperation.Query?.requests).toBeGreaterThanOrEqual(120 / 5);
    expect((await measuredTick()).due).toBe(0);
  });
});
