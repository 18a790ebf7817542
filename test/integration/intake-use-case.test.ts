import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoAgent, type DemoAgent } from '../../local/demo-agent/server.js';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { CapacityMeter } from '../../bench/capacity-meter.js';
import { httpTarget } from '../../shared/adapters/http-target.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { canonicalJson } from '../../shared/dispatch/canonical.js';
import { DEFAULT_PRIORITY, DEFAULT_TIMEOUTS, type DispatchState } from '../../shared/dispatch/state.js';
import { DEFAULT_MAX_HOPS } from '../../shared/dispatch/message.js';
import { takeDispatchMessage, type IntakeDeps } from '../../shared/usecases/intake.js';
import { dispatchView } from '../../shared/dispatch/view.js';
import { monitorTick } from '../../shared/usecases/monitor.js';
import { cancelDispatch } from '../../shared/usecases/flow.js';
import { redispatch } from '../../shared/usecases/redispatch.js';
import type { LedgerStoreWithWrites, StoredState } from '../../shared/ledger/port.js';

import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { intakeDepsFactory, overriding } from '../support/factories.js';

/**
 * The intake use case on the real engines with its collaborators in hand: a metered DynamoDB client,
 * a clock the test moves, and a store that can crash at a chosen point.
 */
const clients = engineClients();
const meter = new CapacityMeter();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
meter.attach(dynamodb);
let table: LedgerTable;
let blobs: S3Blobs;
let agent: DemoAgent;
let clock = new Date('2026-12-01T10:00:00Z');

beforeAll(async () => {
  const tableName = uniqueName('intake');
  await ensureLedgerTable(clients.dynamodb, tableName);
  const bucket = await ensureBucket(clients.s3, uniqueName('blobs'));
  table = new LedgerTable(DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } }), { tableName, retentionSeconds: 86_400 });
  blobs = new S3Blobs(clients.s3, bucket);
  agent = await startDemoAgent();
  await table.putTarget({ name: 'demo-agent', kind: 'http', baseUrl: agent.url });
});
afterAll(async () => {
  await agent.stop();
  clients.destroy();
  dynamodb.destroy();
});

const deps = (overrides: Partial<IntakeDeps> = {}): IntakeDeps =>
  intakeDepsFactory({ store: table, blobs, targetFor: (registration) => httpTarget(registration), principals: table, now: () => clock, ...overrides });

const message = (task: Record<string, unknown> = { behavior: 'complete' }, origin = 'planner') => ({
  dispatchId: uniqueName('d'),
  origin,
  target: 'demo-agent',
  task,
  expectedEvidence: ['out/report.md'],
});

describe('intake use case on the real engines', () => {
  it('finds the same run when it crashed between the target accepting and the ledger writing the state', async () => {
    const sent = message();
    const body = JSON.stringify(sent);
    /** A store whose first state write dies, as a Lambda killed at that instant would. */
    const crashing: LedgerStoreWithWrites = overriding<LedgerStoreWithWrites>(table, {
      commit: async (): Promise<never> => {
        throw new Error('injected crash after the target accepted');
      },
    });

    await expect(takeDispatchMessage(deps({ store: crashing }), { messageId: 'm-1', body, senderId: 'local' })).rejects.toThrow('injected crash');
    const afterCrash = agent.stats();
    clock = new Date(clock.getTime() + 61_000); // the crashed writer's claim has lapsed: SQS redelivers
    const redelivered = await takeDispatchMessage(deps(), { messageId: 'm-1', body, senderId: 'local' });

    expect(afterCrash.runs[sent.dispatchId]).toBe(1);
    expect(redelivered.outcome).toBe('submitted');
    const stats = agent.stats();
    expect(stats.submissions[sent.dispatchId]).toBe(2); // the same Idempotency-Key, twice…
    expect(stats.runs[sent.dispatchId]).toBe(1); // …one run
    const state = (await table.getState(sent.dispatchId)) as DispatchState;
    expect(state.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written', 'dispatch_submitted']);
  });

  it('costs at most 4 write units plus one per KB of task payload for a happy-path accept + submit (index writes included)', async () => {
    const small = message({ behavior: 'complete', goal: 'summarise the incident' });
    const oneKb = message({ behavior: 'complete', notes: 'x'.repeat(1024) });
    const costs: Array<{ taskBytes: number; writeUnits: number; budget: number }> = [];

    for (const sent of [small, oneKb]) {
      const before = meter.snapshot();
      const result = await takeDispatchMessage(deps(), { messageId: uniqueName('m'), body: JSON.stringify(sent), senderId: 'local' });
      expect(result.outcome).toBe('submitted');
      const taskBytes = Buffer.byteLength(canonicalJson(sent.task));
      const spent = meter.since(before);
      costs.push({ taskBytes, writeUnits: spent.writeUnits, budget: 4 + Math.ceil(taskBytes / 1024) });
    }

    for (const cost of costs) expect(cost.writeUnits).toBeLessThanOrEqual(cost.budget);
    // The figures, for the record: a small task costs 5 WU (message 1, state 1, due index 1, origin index 1,
    // and since GET /dispatches the recent index 1 — written once, at creation, like the origin index).
    expect(costs[0]?.writeUnits).toBe(5);
  });

  it('keeps the hot state item within 1 KB with long ids, a long run id and both receipts', async () => {
    const sent = { ...message(), dispatchId: `d-2026-12-01-${'x'.repeat(50)}`, origin: `team-${'o'.repeat(27)}` };
    await takeDispatchMessage(deps(), { messageId: uniqueName('m'), body: JSON.stringify(sent), senderId: 'local' });
    const before = meter.snapshot();
    const stored = (await table.getStored(sent.dispatchId)) as StoredState;
    const state = stored.state;
    const read = meter.since(before);

    expect(state.phase).toBe('submitted');
    expect(read.readUnits).toBe(1); // one strongly consistent read of ≤ 4 KB
    // Rewriting it (as every later state change does) must stay within one write unit.
    const rewrite = meter.snapshot();
    await table.commit(stored, { ...state, changes: ['activity'], dueAtRead: state.dueAt });
    const spent = meter.since(rewrite);
    expect(spent.byOperation.PutItem?.writeUnits).toBe(1);
  });

  it('spills a large task to the blob store, keeps a bounded preview, and submits the whole task', async () => {
    const big = message({ behavior: 'complete', blob: 'y'.repeat(20_000) });
    const result = await takeDispatchMessage(deps(), { messageId: uniqueName('m'), body: JSON.stringify(big), senderId: 'local' });
    const stored = await table.getAcceptedMessage(big.dispatchId);

    expect(result.outcome).toBe('submitted');
    expect(stored?.content.valid && stored.content.task).toBeNull();
    const taskRef = stored?.content.valid ? stored.content.taskRef : null;
    expect(taskRef).toMatch(new RegExp(`^payloads/${big.dispatchId}/[0-9a-f]{64}/task\\.json$`));
    expect(stored?.content.valid && stored.content.taskPreview?.length).toBeLessThanOrEqual(513);
    const spilled = JSON.parse(await blobs.getText(taskRef ?? '')) as { blob: string };
    expect(spilled.blob).toHaveLength(20_000);

    // A conflicting message under the same id is rejected and cannot touch the original's bytes
    // (regression: the spill key was the dispatch id alone, written before the conflict was known).
    const conflicting = { ...big, task: { behavior: 'complete', blob: 'z'.repeat(20_000) } };
    const refused = await takeDispatchMessage(deps(), { messageId: uniqueName('m'), body: JSON.stringify(conflicting), senderId: 'local' });
    expect(refused).toMatchObject({ outcome: 'rejected', reason: 'conflict' });
    expect((JSON.parse(await blobs.getText(taskRef ?? '')) as { blob: string }).blob).toBe('y'.repeat(20_000));
  });

  it('takes a message that spells out the defaults (as an MCP client sends it) as the same dispatch as one that leaves them out, and a changed one as a conflict', async () => {
    const sent = message();
    const first = await takeDispatchMessage(deps(), { messageId: uniqueName('m'), body: JSON.stringify(sent), senderId: 'local' });
    // The same dispatch as the schema reads it: every default written out, keys in another order.
    const { dispatchId, origin, ...rest } = sent;
    const spelled = { ...rest, origin, dispatchId, delivery: { mode: 'callback' }, priority: DEFAULT_PRIORITY, maxHops: DEFAULT_MAX_HOPS, timeouts: DEFAULT_TIMEOUTS };
    const again = await takeDispatchMessage(deps(), { messageId: uniqueName('m'), body: JSON.stringify(spelled), senderId: 'local' });
    const changed = await takeDispatchMessage(deps(), { messageId: uniqueName('m'), body: JSON.stringify({ ...spelled, priority: DEFAULT_PRIORITY + 1 }), senderId: 'local' });
    expect([first.outcome, again.outcome]).toEqual(['submitted', 'duplicate']);
    expect(changed).toMatchObject({ outcome: 'rejected', reason: 'conflict' });
  });

  it('rejects, in enforce mode, a sender speaking for an origin it is not registered for', async () => {
    await table.putPrincipal('AROAPLANNER', { role: 'origin', origin: 'planner' });
    const enforced = deps({ principalMode: 'enforce' });
    const own = message();
    const claimed = message({ behavior: 'complete' }, 'billing');

    const ok = await takeDispatchMessage(enforced, { messageId: uniqueName('m'), body: JSON.stringify(own), senderId: 'AROAPLANNER:session-1' });
    const refused = await takeDispatchMessage(enforced, { messageId: uniqueName('m'), body: JSON.stringify(claimed), senderId: 'AROAPLANNER:session-1' });
    const anonymous = await takeDispatchMessage(enforced, { messageId: uniqueName('m'), body: JSON.stringify(message()), senderId: 'AIDAUNKNOWN' });

    expect(ok.outcome).toBe('submitted');
    expect(refused).toMatchObject({ outcome: 'rejected', reason: 'origin_not_allowed', dispatchId: claimed.dispatchId });
    expect(anonymous).toMatchObject({ outcome: 'rejected', reason: 'origin_not_allowed' });
    expect(await table.getState(claimed.dispatchId)).toBeUndefined();
  });
});

describe('a child sent before its parent is recorded (CONTRACT §1, V3: SQS standard queues do not keep order)', () => {
  /** A table of its own: the monitor ticks over these dispatches alone. */
  let lineage: LedgerTable;
  let lineageDocuments: DynamoDBDocumentClient;
  let lineageTable: string;
  beforeAll(async () => {
    lineageTable = uniqueName('lineage');
    await ensureLedgerTable(clients.dynamodb, lineageTable);
    lineageDocuments = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
    lineage = new LedgerTable(lineageDocuments, { tableName: lineageTable, retentionSeconds: 86_400 });
    await lineage.putTarget({ name: 'demo-agent', kind: 'http', baseUrl: agent.url });
  });
  const lineageDeps = () => deps({ store: lineage, principals: lineage });
  const tick = () => monitorTick({ ...lineageDeps(), dueIndex: new LedgerDueIndex(lineageDocuments, lineageTable), pageSize: 100 });
  const take = (sent: object) => takeDispatchMessage(lineageDeps(), { messageId: uniqueName('m'), body: JSON.stringify(sent), senderId: 'local' });
  const viewOf = async (dispatchId: string) => dispatchView((await lineage.getState(dispatchId)) as DispatchState, await lineage.getAcceptedMessage(dispatchId));

  it('holds a child that arrives before its parent (waitingFor parent), then submits it with hop = parent hop + 1 once the parent is recorded', async () => {
    const grandparent = { ...message({ behavior: 'complete' }), maxHops: 3 };
    const parent = { ...message({ behavior: 'complete' }), parentDispatchId: grandparent.dispatchId };
    const child = { ...message({ behavior: 'complete' }), parentDispatchId: parent.dispatchId };
    expect((await take(grandparent)).outcome).toBe('submitted');

    const held = await take(child);
    expect(held).toMatchObject({ outcome: 'waiting', dispatchId: child.dispatchId });
    const waiting = await viewOf(child.dispatchId);
    expect(waiting).toMatchObject({ phase: 'accepted', blockedReason: null, submission: { waitingFor: 'parent' } });
    // A real accepted dispatch: its receipt is written, and it is its origin's to see.
    expect(waiting.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written']);
    expect(agent.stats().submissions[child.dispatchId]).toBeUndefined();

    expect((await take(parent)).outcome).toBe('submitted');
    clock = new Date(clock.getTime() + 10_000);
    await tick();

    const state = (await lineage.getState(child.dispatchId)) as DispatchState;
    expect(state.phase).toBe('submitted');
    // Derived from the stored parent (hop 1, maxHops 3 from the grandparent), never from the sender.
    expect([state.hop, state.maxHops]).toEqual([2, 3]);
    expect((await viewOf(child.dispatchId)).submission.waitingFor).toBeNull();
    expect(agent.stats().runs[child.dispatchId]).toBe(1);
  });

  it('blocks a child whose parent never comes unknown_parent after 300 s of the clock, and not before', async () => {
    const orphan = { ...message({ behavior: 'complete' }), parentDispatchId: uniqueName('never-sent') };
    const start = clock.getTime();
    expect((await take(orphan)).outcome).toBe('waiting');

    for (const seconds of [5, 30, 90, 180, 250, 299]) {
      clock = new Date(start + seconds * 1000);
      await tick();
      const view = await viewOf(orphan.dispatchId);
      expect({ at: seconds, phase: view.phase, waitingFor: view.submission.waitingFor }).toEqual({ at: seconds, phase: 'accepted', waitingFor: 'parent' });
    }
    clock = new Date(start + 300_000);
    await tick();

    const blocked = await viewOf(orphan.dispatchId);
    expect(blocked.phase).toBe('blocked');
    expect(blocked.blockedReason).toMatch(/^unknown_parent: /);
    expect(blocked.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written', 'dispatch_blocked']);
    expect(agent.stats().submissions[orphan.dispatchId]).toBeUndefined();
  });

  /** Ticks with the clock moved on until none of the given dispatches is held for its parent any more. */
  const settle = async (dispatchIds: readonly string[]) => {
    for (let round = 0; round < 12; round += 1) {
      const held = await Promise.all(dispatchIds.map(async (dispatchId) => (await lineage.getState(dispatchId))?.waitingFor === 'parent'));
      if (!held.includes(true)) return;
      clock = new Date(clock.getTime() + 30_000);
      await tick();
    }
  };

  it('holds a child whose parent is itself held for its parent: a held hop is not yet known, so it cannot spend the budget', async () => {
    // Grandparent allows one hop: the parent (hop 1) may run, its child (hop 2) may not.
    const grandparent = { ...message({ behavior: 'complete' }), maxHops: 1 };
    const parent = { ...message({ behavior: 'complete' }), parentDispatchId: grandparent.dispatchId };
    const child = { ...message({ behavior: 'complete' }), parentDispatchId: parent.dispatchId };
    expect((await take(parent)).outcome).toBe('waiting');
    expect((await take(child)).outcome).toBe('waiting');
    expect(agent.stats().submissions[child.dispatchId]).toBeUndefined();

    expect((await take(grandparent)).outcome).toBe('submitted');
    await settle([parent.dispatchId, child.dispatchId]);

    const parentState = (await lineage.getState(parent.dispatchId)) as DispatchState;
    expect([parentState.phase, parentState.hop, parentState.maxHops]).toEqual(['submitted', 1, 1]);
    const childState = (await lineage.getState(child.dispatchId)) as DispatchState;
    expect([childState.phase, childState.blockedCode, childState.hop]).toEqual(['blocked', 'hop_budget_exceeded', 2]);
    expect(agent.stats().submissions[child.dispatchId]).toBeUndefined();
  });

  it('blocks a child unknown_parent when its parent was cancelled while it was held for its own parent: that lineage is never derived', async () => {
    const parent = { ...message({ behavior: 'complete' }), parentDispatchId: uniqueName('never-sent') };
    const child = { ...message({ behavior: 'complete' }), parentDispatchId: parent.dispatchId };
    expect((await take(parent)).outcome).toBe('waiting');
    const held = (await lineage.getStored(parent.dispatchId)) as StoredState;
    expect((await cancelDispatch(lineageDeps(), held, { reason: 'not wanted', by: 'planner' })).kind).toBe('cancelled');

    expect((await take(child)).outcome).toBe('blocked');
    const childView = await viewOf(child.dispatchId);
    expect(childView.blockedReason).toMatch(/^unknown_parent: /);
    expect(agent.stats().submissions[child.dispatchId]).toBeUndefined();
    // Nor can a redispatch of the cancelled parent submit it with a hop it never derived.
    const cancelled = (await lineage.getStored(parent.dispatchId)) as StoredState;
    expect((await redispatch(lineageDeps(), cancelled, { reason: 'try again', force: false })).kind).toBe('not_submittable');
    expect(agent.stats().submissions[parent.dispatchId]).toBeUndefined();
  });

  it('holds a child as long as its parent is held, however deep the chain still being recorded', async () => {
    // C before B before A before R, each more than a parent-wait apart from the one it waits on.
    const root = { ...message({ behavior: 'complete' }), maxHops: 3 };
    const a = { ...message({ behavior: 'complete' }), parentDispatchId: root.dispatchId };
    const b = { ...message({ behavior: 'complete' }), parentDispatchId: a.dispatchId };
    const c = { ...message({ behavior: 'complete' }), parentDispatchId: b.dispatchId };
    const start = clock.getTime();
    expect((await take(c)).outcome).toBe('waiting');
    clock = new Date(start + 1_000);
    expect((await take(b)).outcome).toBe('waiting');
    clock = new Date(start + 200_000);
    expect((await take(a)).outcome).toBe('waiting');
    for (const seconds of [250, 301, 350, 399]) {
      clock = new Date(start + seconds * 1000);
      await tick();
      expect((await lineage.getState(c.dispatchId))?.phase, `at ${seconds} s`).toBe('accepted');
    }
    expect((await take(root)).outcome).toBe('submitted');
    await settle([a.dispatchId, b.dispatchId, c.dispatchId]);
    const hops = await Promise.all([a, b, c].map(async (sent) => (await lineage.getState(sent.dispatchId)) as DispatchState));
    expect(hops.map((state) => [state.phase, state.hop])).toEqual([['submitted', 1], ['submitted', 2], ['submitted', 3]]);
  });

  it('blocks a child unknown_parent when its parent is blocked unknown_parent: the lineage is never known, so the child never runs', async () => {
    const parent = { ...message({ behavior: 'complete' }), parentDispatchId: uniqueName('never-sent') };
    const child = { ...message({ behavior: 'complete' }), parentDispatchId: parent.dispatchId };
    const start = clock.getTime();
    expect((await take(parent)).outcome).toBe('waiting');
    clock = new Date(start + 200_000);
    // Sent 200 s after its parent: its own 300 s would end after the parent's, and it waits no less.
    expect((await take(child)).outcome).toBe('waiting');
    clock = new Date(start + 300_000);
    await tick();
    expect((await lineage.getState(parent.dispatchId))?.blockedCode).toBe('unknown_parent');
    await settle([child.dispatchId]);

    const childView = await viewOf(child.dispatchId);
    expect(childView.phase).toBe('blocked');
    expect(childView.blockedReason).toMatch(/^unknown_parent: /);
    expect(agent.stats().submissions[child.dispatchId]).toBeUndefined();
  });
});
