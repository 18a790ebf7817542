import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import { dueShardOf } from '../../shared/adapters/ledger-table.js';
import { describe, expect, it } from 'vitest';
import { ensureLedgerTable } from '../../local/resources.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { takeDispatchMessage } from '../../shared/usecases/intake.js';
import { FAILED_RETRY_SECONDS, monitorTick } from '../../shared/usecases/monitor.js';
import { uniqueName } from '../support/engines.js';
import { eventually } from '../support/eventually.js';
import { overriding } from '../support/factories.js';
import { ScriptedTarget } from '../support/scripted-target.js';
import { clients, clock, deps, documents, message, monitorDeps, send, setClock, stateOf, table, tableName, target, tick } from '../support/ledger-fixture.js';

/** Regression tests of the monitor on DynamoDB Local and fauxqs S3 (the ledger of test/support/ledger-fixture.ts): each names the bug it pins ("was: …"). */

describe('the monitor\'s verdict timing', () => {
  it('takes a retry claim with the clock at the write, not the tick start (was: a claim already lapsed when a tick ran long)', async () => {
    target.answer = () => ({ kind: 'unavailable', reason: 'HTTP 503' });
    const sent = message();
    await send(sent);
    target.answer = new ScriptedTarget().answer;
    setClock(new Date(Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '') + 1000));
    const tickStart = clock;
    let calls = 0;
    // The tick's first reads happen at its start; by the claim, two minutes have gone by (a long tick).
    const slowClock = () => (calls++ < 1 ? tickStart : new Date(tickStart.getTime() + 120_000));
    let dueDuringSubmit: number | undefined;
    target.onSubmit = async () => {
      dueDuringSubmit = Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '');
    };
    await monitorTick({ ...monitorDeps(), now: slowClock });
    target.onSubmit = undefined;
    expect(dueDuringSubmit).toBeGreaterThan(tickStart.getTime() + 120_000);
  });

  it('never submits the same Idempotency-Key concurrently from overlapping ticks', async () => {
    target.answer = () => ({ kind: 'unavailable', reason: 'HTTP 503' });
    const sent = message();
    await send(sent);
    target.answer = new ScriptedTarget().answer;
    setClock(new Date(Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '') + 1000));
    let inFlight = 0;
    let most = 0;
    let overlapping: Array<Awaited<ReturnType<typeof monitorTick>>> | undefined;
    const before = target.submissions.length;
    // While the first tick's submission is in flight, two more ticks run to their end.
    target.onSubmit = async () => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      if (!overlapping) {
        overlapping = [];
        overlapping = await Promise.all([monitorTick(monitorDeps()), monitorTick(monitorDeps())]);
      }
      inFlight -= 1;
    };
    await monitorTick(monitorDeps());
    target.onSubmit = undefined;
    // They ran (two reports) and left it alone: its shard was claimed by the first tick, its claim took it off the due list, or the re-read showed it claimed.
    expect(overlapping).toHaveLength(2);
    for (const report of overlapping ?? []) expect(report.actions.submitted ?? 0).toBe(0);
    expect(most).toBe(1);
    expect(target.submissions.length - before).toBe(1);
  });

  it('looks an unobservable run up with backoff doubling from stallAfterSeconds, capped at 6 h (was: every stall window, forever)', async () => {
    const sent = message({ timeouts: { stallAfterSeconds: 600 } });
    await send(sent);
    const delays: number[] = [];
    for (let round = 0; round < 9; round += 1) {
      const due = Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '');
      setClock(new Date(due + 1000));
      await monitorTick(monitorDeps());
      const next = Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '');
      delays.push(Math.round((next - clock.getTime()) / 1000));
    }
    const state = await stateOf(sent.dispatchId);
    expect(state.execution).toMatchObject({ status: 'unknown', monitorStatus: 'lookup_unavailable', nativeStatus: 'running' });
    // First the stall deadline (the coalescing window after the stall window), then the lookups.
    expect(delays).toEqual([119, 600, 1200, 2400, 4800, 9600, 19200, 21600, 21600]);
  });
});

/** The feed index is eventually consistent on DynamoDB Local too: read until the page is there. */
async function eventuallyPage<T>(read: () => Promise<T>): Promise<T> {
  return eventually('the attention page', read);
}

describe('the attention feed\'s order', () => {
  it('orders by when the problem began, stable while later writes touch a dispatch (was: by its last write, so pages shifted)', async () => {
    const own = await ensureLedgerTable(clients.dynamodb, uniqueName('attention'));
    const ownTable = new LedgerTable(documents, { tableName: own.name, retentionSeconds: 86_400 });
    await ownTable.putTarget({ name: 'scripted', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
    const ownDeps = () => ({ ...deps(), store: ownTable, dueIndex: new LedgerDueIndex(documents, own.name), pageSize: 100 });
    const first = message({ timeouts: { stallAfterSeconds: 60 } });
    const second = message({ timeouts: { stallAfterSeconds: 60 } });
    await takeDispatchMessage(ownDeps(), { messageId: uniqueName('m'), body: JSON.stringify(first), senderId: 'local' });
    tick(30);
    await takeDispatchMessage(ownDeps(), { messageId: uniqueName('m'), body: JSON.stringify(second), senderId: 'local' });
    tick(60);
    await monitorTick(ownDeps()); // first is lost (lookup 503): unknown since now
    tick(30);
    await monitorTick(ownDeps()); // second: unknown since now
    // The first is looked up again later (a write), still unknown: its place must not move.
    setClock(new Date(Date.parse((await ownTable.getState(first.dispatchId))?.dueAt ?? '') + 1000));
    await monitorTick(ownDeps());
    const feeds = new LedgerFeedsTable(documents, { tableName: own.name, retentionSeconds: 86_400 });
    const order = async () => {
      const ids: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await eventuallyPage(() => feeds.listAttention({ kind: 'unknown', limit: 1, cursor }));
        ids.push(...page.items.map((state) => state.dispatchId));
        cursor = page.cursor ?? undefined;
      } while (cursor);
      return ids;
    };
    expect(await order()).toEqual([second.dispatchId, first.dispatchId]);
  });
});

describe('the monitor retries a dispatch it failed on one schedule period later', () => {
  it('tries a dispatch the monitor failed on again one schedule period later, not a fixed minute (a 1 s local tick waited 60 ticks)', async () => {
    const sent = message();
    target.answer = () => ({ kind: 'unavailable', reason: 'HTTP 503' });
    await send(sent);
    target.answer = new ScriptedTarget().answer;
    setClock(new Date(Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '') + 1000));
    // The store fails the claim once: the action throws, as a crash between two steps would.
    const failing = overriding<LedgerTable>(table, {
      commit: () => Promise.reject(new Error('the table timed out')),
    });
    const report = await monitorTick({ ...monitorDeps(), store: failing, periodSeconds: 2 });
    expect(report.failures.map((failure) => failure.subject)).toContain(sent.dispatchId);
    expect((await stateOf(sent.dispatchId)).dueAt).toBe(new Date(clock.getTime() + 2000).toISOString());
  });
  it('counts that period from the tick\'s start, so a long tick still retries on the next one, not the one after', async () => {
    const sent = message();
    target.answer = () => ({ kind: 'unavailable', reason: 'HTTP 503' });
    await send(sent);
    target.answer = new ScriptedTarget().answer;
    const tickStart = new Date(Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '') + 1000);
    // Each read of the clock is 700 ms later: the tick runs for a while before its failure is deferred.
    let reads = 0;
    const slowClock = () => new Date(tickStart.getTime() + 700 * reads++);
    const failing = overriding<LedgerTable>(table, { commit: () => Promise.reject(new Error('the table timed out')) });
    const report = await monitorTick({ ...monitorDeps(), store: failing, now: slowClock, periodSeconds: 2 });
    expect(report.failures.map((failure) => failure.subject)).toContain(sent.dispatchId);
    expect(reads).toBeGreaterThan(1);
    expect((await stateOf(sent.dispatchId)).dueAt).toBe(new Date(tickStart.getTime() + 2000).toISOString());
  });
});

describe('the monitor: edges the first reviews found', () => {
  it('moves a due record that fails decoding out of the way, and acts on the healthy ones of the tick', async () => {
    const corrupt = uniqueName('d');
    await documents.send(new PutCommand({ TableName: tableName, Item: { pk: `D#${corrupt}`, sk: 'STATE', originKey: 'O#planner', phase: 'bogus', dueShard: dueShardOf(corrupt), dueAt: new Date(clock.getTime() - 1000).toISOString() } }));
    target.answer = () => ({ kind: 'unavailable', reason: 'HTTP 503' });
    const healthy = message();
    await send(healthy);
    target.answer = new ScriptedTarget().answer;
    setClock(new Date(Date.parse((await stateOf(healthy.dispatchId)).dueAt ?? '') + 1000));
    const report = await monitorTick(monitorDeps());
    expect(report.failures.map((failure) => failure.subject)).toContain(corrupt);
    expect(report.failures.map((failure) => failure.subject)).not.toContain(healthy.dispatchId);
    expect((await stateOf(healthy.dispatchId)).phase).toBe('submitted');
    const raw = await documents.send(new GetCommand({ TableName: tableName, Key: { pk: `D#${corrupt}`, sk: 'STATE' } }));
    expect(Date.parse(String(raw.Item?.dueAt))).toBe(clock.getTime() + FAILED_RETRY_SECONDS * 1000);
  });
});
