import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureLedgerTable } from '../../local/resources.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { slotTotals } from '../../shared/dispatch/slots.js';
import { takeDispatchMessage } from '../../shared/usecases/intake.js';
import { monitorTick, type MonitorDeps } from '../../shared/usecases/monitor.js';
import type { SubmitRequest, TargetPort } from '../../shared/targets/port.js';
import type { CancelOutcome, LookupOutcome, SubmitOutcome } from '../../shared/dispatch/target-answers.js';
import { targetsAtCapacity, cancelDispatch } from '../../shared/usecases/flow.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { intakeDepsFactory } from '../support/factories.js';
import { MemoryBlobs } from '../support/memory-blobs.js';

/**
 * CONTRACT §11 and its V3 amendment: a target's `maxConcurrentRuns` changed while runs are in flight
 * (raised past a shard boundary, lowered under what is held) never lets more runs be in flight than the
 * limit in force. On DynamoDB Local with the real slot writes, through the intake use case, the
 * monitor's tick and the cancel use case; the target counts the runs it holds open itself.
 */
const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
let table: LedgerTable;
let dueIndex: LedgerDueIndex;
let tableName: string;

beforeAll(async () => {
  tableName = uniqueName('limits');
  await ensureLedgerTable(clients.dynamodb, tableName);
  table = new LedgerTable(documents, { tableName, retentionSeconds: 86_400 });
  dueIndex = new LedgerDueIndex(documents, tableName);
});
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

/** A target that keeps its own count of open runs and notes every run started while it already held the limit in force. */
class CountingTarget implements TargetPort {
  readonly open = new Set<string>();
  maxOpen = 0;
  /** The limit in force, as the test last set it. */
  limit = Number.POSITIVE_INFINITY;
  readonly pastLimit: string[] = [];
  async submit(request: SubmitRequest): Promise<SubmitOutcome> {
    const runId = `r-${request.dispatchId}-${request.attempt}`;
    if (!this.open.has(runId)) {
      if (this.open.size >= this.limit) this.pastLimit.push(`${runId} started with ${this.open.size} open under a limit of ${this.limit}`);
      this.open.add(runId);
      this.maxOpen = Math.max(this.maxOpen, this.open.size);
    }
    return { kind: 'accepted', runId, status: 'running', requestId: `q-${runId}` };
  }
  async lookup(runId: string): Promise<LookupOutcome> {
    return this.open.has(runId) ? { kind: 'found', run: { runId, status: 'running' } } : { kind: 'not_found' };
  }
  async decideApproval(): Promise<{ readonly kind: 'not_found' }> {
    return { kind: 'not_found' };
  }
  async cancel(runId: string): Promise<CancelOutcome> {
    this.open.delete(runId);
    return { kind: 'cancelled', status: 'cancelled' };
  }
}

interface Harness {
  readonly name: string;
  readonly agent: CountingTarget;
  /** Changes the registration's limit (the registry's write), and the limit the agent holds the ledger to. */
  setLimit(limit: number | undefined): Promise<void>;
  /** `count` dispatch messages taken by the intake at once; their ids. */
  send(count: number): Promise<string[]>;
  /** One monitor tick (the admissions of every limited target with it). */
  tick(): Promise<void>;
  /** Ends `count` open runs by cancel (the target confirms), a tick after each. */
  end(count: number): Promise<void>;
}

function harness(): Harness {
  const name = uniqueName('lim');
  const agent = new CountingTarget();
  const deps = intakeDepsFactory({ store: table, blobs: new MemoryBlobs(), targetFor: () => agent, now: () => new Date() });
  const monitor: MonitorDeps = { ...deps, store: table, dueIndex, pageSize: 100 };
  const sent: string[] = [];
  return {
    name,
    agent,
    async setLimit(limit) {
      await table.putTarget({ name, kind: 'http', baseUrl: 'http://127.0.0.1:9', ...(limit === undefined ? {} : { maxConcurrentRuns: limit }) });
      agent.limit = limit ?? Number.POSITIVE_INFINITY;
    },
    async send(count) {
      const ids = Array.from({ length: count }, () => uniqueName('d'));
      sent.push(...ids);
      await Promise.all(ids.map((dispatchId) => takeDispatchMessage(deps, { messageId: uniqueName('m'), body: JSON.stringify({ dispatchId, origin: 'planner', target: name, task: { goal: 'hold a slot' } }), senderId: 'local' })));
      return ids;
    },
    async tick() {
      await monitorTick(monitor);
    },
    async end(count) {
      for (let ended = 0; ended < count; ended += 1) {
        let done = false;
        for (const dispatchId of sent) {
          const stored = await table.getStored(dispatchId);
          if (!stored?.state.runId || !agent.open.has(stored.state.runId)) continue;
          expect((await cancelDispatch(deps, stored, { reason: 'make room', by: 'local:test' })).kind).toBe('requested');
          done = true;
          break;
        }
        expect(done).toBe(true);
        await this.tick();
      }
    },
  };
}

const shardsOf = async (target: string) => slotTotals(await table.slotShards(target));

describe('a limit changed while runs are in flight (CONTRACT §11)', () => {
  it('never lets more runs be in flight than the limit in force: raised 8 → 9 with 8 held, then lowered 9 → 3', async () => {
    const h = harness();
    await h.setLimit(8);
    await h.send(8);
    expect(h.agent.open.size).toBe(8);

    await h.setLimit(9);
    await h.send(6);
    await h.tick();
    expect(h.agent.pastLimit).toEqual([]);
    expect(h.agent.maxOpen).toBe(9);
    expect(await table.countWaiting(h.name, 100)).toBe(5);

    // Lowered under what is held: nothing new starts until fewer than 3 are open.
    await h.setLimit(3);
    const capacity = (await targetsAtCapacity(table)).find((entry) => entry.target === h.name);
    expect(capacity).toMatchObject({ limit: 3, held: 9, waiting: 5 });
    expect(capacity?.reason).toContain('9 run(s) in flight for a lowered limit of 3, 0 of them unknown: nothing is submitted until fewer than 3 are');
    await h.end(6);
    expect(h.agent.open.size).toBe(3);
    expect(await table.countWaiting(h.name, 100)).toBe(5);
    // One ends: the next tick admits one (open < 3 again), never more.
    await h.end(1);
    expect(h.agent.open.size).toBe(3);
    expect(await table.countWaiting(h.name, 100)).toBe(4);
    await h.end(4);
    expect(h.agent.pastLimit).toEqual([]);
    expect(await table.countWaiting(h.name, 100)).toBe(0);
    expect(await shardsOf(h.name)).toMatchObject({ limit: 3, held: 3 });
  });

  it.each([
    [8, 20, 20],
    [32, 33, 10],
  ])('never lets more runs be in flight than the raised limit: %i → %i with the old shards full, then %i more', async (from, to, more) => {
    const h = harness();
    await h.setLimit(from);
    await h.send(from);
    expect(h.agent.open.size).toBe(from);
    await h.setLimit(to);
    await h.send(more);
    await h.tick();
    expect(h.agent.pastLimit).toEqual([]);
    expect(h.agent.maxOpen).toBe(Math.min(to, from + more));
    // As the old runs end, the raised limit is used whole.
    await h.end(from);
    expect(h.agent.pastLimit).toEqual([]);
    expect(h.agent.open.size).toBe(Math.min(to, more));
    expect(await shardsOf(h.name)).toMatchObject({ limit: to, held: Math.min(to, more) });
  });
});

/** A registry write that dies between writing the registration and writing its slot caps (a Lambda timing out there). */
class DiesBeforeCaps extends LedgerTable {
  override async syncSlotCaps(): Promise<void> {
    throw new Error('the process died before the slot caps were written');
  }
}

describe('the limit in force is the registration last written, whatever reads are stale or writes die (CONTRACT §11)', () => {
  const register = (store: LedgerTable, name: string, limit: number) => store.putTarget({ name, kind: 'http', baseUrl: 'http://127.0.0.1:9', maxConcurrentRuns: limit });

  it('an admission working from a cached registration and a cached "no shards yet" never raises a limit lowered since', async () => {
    const name = uniqueName('lim');
    // Another process: it reads registrations and shard counts through its caches (as every Lambda does).
    const stale = new LedgerTable(documents, { tableName, retentionSeconds: 86_400, targetCacheMs: 60_000 });
    expect(await stale.slotShards(name)).toEqual([]);
    await register(table, name, 10);
    expect((await stale.getTarget(name))?.maxConcurrentRuns).toBe(10);
    await register(table, name, 3);

    const agent = new CountingTarget();
    const deps = intakeDepsFactory({ store: stale, blobs: new MemoryBlobs(), targetFor: () => agent, now: () => new Date() });
    const dispatchId = uniqueName('d');
    await takeDispatchMessage(deps, { messageId: uniqueName('m'), body: JSON.stringify({ dispatchId, origin: 'planner', target: name, task: { goal: 'hold a slot' } }), senderId: 'local' });

    expect(await shardsOf(name)).toMatchObject({ limit: 3 });
    expect(agent.open.size).toBe(1);
  });

  it('a registration written without its caps (the writer died between the two) has its limit put in force by the next tick', async () => {
    const h = harness();
    await h.setLimit(5);
    await h.send(2);
    await expect(register(new DiesBeforeCaps(documents, { tableName, retentionSeconds: 86_400 }), h.name, 2)).rejects.toThrow(/died/);
    h.agent.limit = 2;
    expect(await shardsOf(h.name)).toMatchObject({ limit: 5 });

    await h.tick();
    expect(await shardsOf(h.name)).toMatchObject({ limit: 2, held: 2 });
    await h.send(3);
    await h.tick();
    expect(h.agent.pastLimit).toEqual([]);
    expect(await table.countWaiting(h.name, 100)).toBe(3);
  });

  it('of two registry writes racing, the caps follow the one whose registration was written last, even when its caps were written first', async () => {
    const name = uniqueName('lim');
    await register(table, name, 4);
    // The second registration's whole write (registration then caps) lands inside the first one's, after its registration.
    let inside: Promise<void> | undefined;
    class Interleaved extends LedgerTable {
      override async syncSlotCaps(target: string, limit: number | undefined, options?: Parameters<LedgerTable['syncSlotCaps']>[2]): Promise<void> {
        inside ??= register(table, name, 2);
        await inside;
        return super.syncSlotCaps(target, limit, options);
      }
    }
    await register(new Interleaved(documents, { tableName, retentionSeconds: 86_400 }), name, 7);

    const registered = (await table.getTarget(name))?.maxConcurrentRuns;
    expect(registered).toBe(2);
    expect(await shardsOf(name)).toMatchObject({ limit: registered });
  });
});

describe('a tick whose caps alignment fails', () => {
  it('reports the failure in the tick and still admits what the free slots allow', async () => {
    const h = harness();
    await h.setLimit(1);
    const stored = await Promise.all((await h.send(2)).map(async (dispatchId) => table.getStored(dispatchId)));
    expect(h.agent.open.size).toBe(1);
    const open = stored.find((found) => found?.state.phase === 'submitted');
    const waiting = stored.find((found) => found?.state.phase === 'accepted')?.state;
    const agentDeps = intakeDepsFactory({ store: table, blobs: new MemoryBlobs(), targetFor: () => h.agent, now: () => new Date() });
    expect((await cancelDispatch(agentDeps, open as NonNullable<typeof open>, { reason: 'make room', by: 'local:test' })).kind).toBe('requested');
    class AlignFails extends LedgerTable {
      override async alignSlotCaps(): Promise<void> {
        throw new Error('the registration could not be read');
      }
    }
    const failing = new AlignFails(documents, { tableName, retentionSeconds: 86_400 });
    const report = await monitorTick({ ...agentDeps, store: failing, dueIndex, pageSize: 100 });
    expect(report.failures).toContainEqual({ subject: `slot caps of ${h.name}`, error: 'Error: the registration could not be read' });
    expect((await table.getState(waiting?.dispatchId ?? ''))?.phase).toBe('submitted');
  });
});
