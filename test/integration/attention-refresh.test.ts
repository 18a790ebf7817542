import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { InboxTable } from '../../shared/adapters/inbox-table.js';
import { LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { STATE_ITEM } from '../../shared/adapters/item-kinds.js';
import { stateVersionOf } from '../../shared/adapters/state-item.js';
import { route } from '../../shared/api/routes.js';
import type { DispatchState } from '../../shared/dispatch/state.js';
import { eventsForStreamChange, type StateVersion } from '../../shared/events/derive.js';
import { takeDispatchMessage, type IntakeDeps } from '../../shared/usecases/intake.js';
import { monitorTick } from '../../shared/usecases/monitor.js';
import type { SubmitRequest, TargetPort } from '../../shared/targets/port.js';
import type { LookupOutcome, SubmitOutcome } from '../../shared/dispatch/target-answers.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { intakeDepsFactory } from '../support/factories.js';
import { ScriptedTarget } from '../support/scripted-target.js';

/**
 * CONTRACT §2 (V3): an attention entry's `since` is when its problem began, and what `?refresh=true`
 * finds at the target is recorded like the monitor's lookup (throttled per dispatch), so `check`,
 * `check --refresh` and `attention` agree. On DynamoDB Local, with a target whose lookups the test
 * answers and counts, and a clock in hand.
 */
const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
const RETENTION = 30 * 86_400;
let tableName: string;
let table: LedgerTable;
let blobs: S3Blobs;
let clock = new Date('2026-12-01T10:00:00Z');
const tick = (seconds: number) => {
  clock = new Date(clock.getTime() + seconds * 1000);
};

/** Submits as the scripted target does; answers lookups as the test says, per run, and counts them. */
class LookedUpTarget implements TargetPort {
  private readonly scripted = new ScriptedTarget();
  answer: ScriptedTarget['answer'] = (request) => ({ kind: 'accepted', runId: `r-${request.dispatchId}`, status: 'running', requestId: `q-${request.attempt}` });
  readonly answers = new Map<string, LookupOutcome>();
  readonly lookupsOf = new Map<string, number>();
  async submit(request: SubmitRequest): Promise<SubmitOutcome> {
    return this.answer(request);
  }
  async lookup(runId: string): Promise<LookupOutcome> {
    this.lookupsOf.set(runId, (this.lookupsOf.get(runId) ?? 0) + 1);
    return this.answers.get(runId) ?? { kind: 'found', run: { runId, status: 'running' } };
  }
  decideApproval(runId: string, approvalId: string, decision: 'approve' | 'cancel') {
    return this.scripted.decideApproval(runId, approvalId, decision);
  }
  cancel() {
    return this.scripted.cancel();
  }
}
let target: LookedUpTarget;

beforeAll(async () => {
  tableName = uniqueName('attention');
  await ensureLedgerTable(clients.dynamodb, tableName);
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('blobs')));
  table = new LedgerTable(documents, { tableName, retentionSeconds: RETENTION });
  await table.putTarget({ name: 'scripted', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
  // Each dispatch's run is named after it, so the test answers each one's lookups.
  target = new LookedUpTarget();
});
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

const deps = (): IntakeDeps => intakeDepsFactory({ store: table, blobs, targetFor: () => target, principals: table, now: () => clock });
const monitorDeps = () => ({ ...deps(), dueIndex: new LedgerDueIndex(documents, tableName), pageSize: 100 });
const api = async (method: string, rawPath: string, query: Record<string, string> = {}, body?: unknown) => {
  const answer = await route(
    { ...deps(), feeds: new LedgerFeedsTable(documents, { tableName, retentionSeconds: RETENTION }), inbox: new InboxTable(documents, { tableName, retentionSeconds: RETENTION }) },
    { method, rawPath, query, headers: { 'x-ledger-origin': 'planner' }, body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)), iamUserId: undefined },
  );
  return JSON.parse(answer.body) as Record<string, unknown>;
};
const send = (dispatchId: string, timeouts: Record<string, number> = {}) =>
  takeDispatchMessage(deps(), {
    messageId: uniqueName('m'),
    body: JSON.stringify({ dispatchId, origin: 'planner', target: 'scripted', task: { behavior: 'complete' }, timeouts: { stallAfterSeconds: 60, ...timeouts } }),
    senderId: 'local',
  });
const stateOf = async (dispatchId: string) => (await table.getState(dispatchId)) as DispatchState;
/** The state item as stored: the state, the version that wrote it and what that write changed. */
const storedVersionOf = async (dispatchId: string): Promise<StateVersion> => {
  const { Item } = await documents.send(new GetCommand({ TableName: tableName, Key: STATE_ITEM.key(dispatchId), ConsistentRead: true }));
  if (!Item) throw new Error(`no state item for ${dispatchId}`);
  return stateVersionOf(Item);
};

interface Entry {
  readonly kind: string;
  readonly dispatchId: string;
  readonly since: string;
  readonly monitorStatus: string | null;
  readonly reason: string;
}
const entryOf = async (dispatchId: string): Promise<Entry | undefined> => ((await api('GET', '/attention', { limit: '100' })).items as Entry[]).find((entry) => entry.dispatchId === dispatchId);
interface View {
  readonly execution: { readonly status: string | null; readonly monitorStatus: string | null; readonly nativeStatus: string | null; readonly result: unknown };
  readonly unknowns: readonly string[];
}
const check = async (dispatchId: string, refresh = false) => (await api('GET', `/dispatches/${dispatchId}`, refresh ? { refresh: 'true' } : {})) as unknown as View;

describe('attention: since is when the problem began', () => {
  it('keeps since where it was when a stalled run is looked up again and when a blocked dispatch’s result is claimed', async () => {
    const stalled = uniqueName('d');
    await send(stalled);
    tick(90); // past the stall deadline (60 s + the coalescing window)
    await monitorTick(monitorDeps());
    const began = await entryOf(stalled);
    expect(began).toMatchObject({ kind: 'unknown', monitorStatus: 'stalled', since: clock.toISOString() });
    for (const seconds of [70, 130, 250]) {
      tick(seconds); // the next lookup is due (the backoff doubles)
      const before = (await storedVersionOf(stalled)).version;
      await monitorTick(monitorDeps());
      expect((await storedVersionOf(stalled)).version).toBe(before + 1); // looked up again and written
      expect(await entryOf(stalled)).toMatchObject({ kind: 'unknown', since: began?.since });
    }

    const blocked = uniqueName('d');
    const answer = target.answer;
    target.answer = () => ({ kind: 'rejected', httpStatus: 400, reason: 'no such task' });
    await send(blocked);
    target.answer = answer;
    const blockedAt = (await entryOf(blocked))?.since;
    expect(blockedAt).toBe(clock.toISOString());
    tick(30);
    const claimed = await api('POST', '/origins/planner/inbox/claim', {}, { mode: 'after_turn', resultIds: [(await stateOf(blocked)).result?.id] });
    expect((claimed.results as unknown[]).length).toBe(1);
    expect((await stateOf(blocked)).result?.state).toBe('claimed');
    expect(await entryOf(blocked)).toMatchObject({ kind: 'blocked', since: blockedAt });
  });
});

describe('?refresh=true: what it finds at the target is recorded like the monitor’s lookup', () => {
  it('records a 404 a refresh finds, so check, check --refresh and attention agree, and advises what a person can do rather than the same command again', async () => {
    const dispatchId = uniqueName('d');
    await send(dispatchId, { stallAfterSeconds: 600 });
    target.answers.set(`r-${dispatchId}`, { kind: 'not_found' });
    tick(5); // well inside the run's activity window
    const refreshed = await check(dispatchId, true);
    expect(refreshed.execution).toMatchObject({ status: 'unknown', monitorStatus: 'target_not_found' });
    const plain = await check(dispatchId);
    expect(plain.execution).toEqual(refreshed.execution);
    expect(await entryOf(dispatchId)).toMatchObject({ kind: 'unknown', monitorStatus: 'target_not_found', since: clock.toISOString() });
    // A refresh would only find the same 404: the advice names what can change it.
    const advice = [...plain.unknowns, (await entryOf(dispatchId))?.reason ?? ''].join(' ');
    expect(advice).not.toContain('--refresh');
    expect(advice).toContain(`npx ledger redispatch ${dispatchId} --force`);
  });

  it('looks a run up at most once per 10 s per dispatch: a second refresh within them answers the stored view without calling the target', async () => {
    const dispatchId = uniqueName('d');
    await send(dispatchId, { stallAfterSeconds: 600 });
    const run = `r-${dispatchId}`;
    tick(5);
    await check(dispatchId, true);
    expect(target.lookupsOf.get(run)).toBe(1);
    tick(9);
    target.answers.set(run, { kind: 'not_found' });
    const throttled = await check(dispatchId, true);
    expect(target.lookupsOf.get(run)).toBe(1);
    expect(throttled.execution).toMatchObject({ status: 'running', monitorStatus: null });
    tick(1); // 10 s after the first
    const asked = await check(dispatchId, true);
    expect(target.lookupsOf.get(run)).toBe(2);
    expect(asked.execution).toMatchObject({ status: 'unknown', monitorStatus: 'target_not_found' });
  });

  it('records a final status a refresh finds exactly as the monitor records the same lookup (the changes, receipts and events)', async () => {
    const byRefresh = uniqueName('d');
    const byMonitor = uniqueName('d');
    await send(byRefresh);
    await send(byMonitor);
    for (const dispatchId of [byRefresh, byMonitor]) {
      target.answers.set(`r-${dispatchId}`, { kind: 'found', run: { runId: `r-${dispatchId}`, status: 'completed', result: { summary: 'found at the target' } } });
    }
    const before = { refresh: await storedVersionOf(byRefresh), monitor: await storedVersionOf(byMonitor) };
    tick(5);
    await check(byRefresh, true);
    const refreshed = await storedVersionOf(byRefresh);
    tick(90);
    await monitorTick(monitorDeps());
    const after = { refresh: refreshed, monitor: await storedVersionOf(byMonitor) };
    const recorded = (from: StateVersion, to: StateVersion) => ({
      version: to.version - from.version,
      changes: to.changes,
      execution: { ...to.state.execution, lastActivityAt: null, completedAt: null },
      evidence: to.state.evidence.outcome,
      receipts: to.state.receipts.map((receipt) => receipt.event),
      result: to.state.result?.state,
      events: eventsForStreamChange({ sequenceNumber: '1', eventName: 'MODIFY', oldItem: { kind: 'state', ...from }, newItem: { kind: 'state', ...to } }).map((event) => event.detailType),
    });
    expect(recorded(before.refresh, after.refresh)).toEqual(recorded(before.monitor, after.monitor));
    expect(recorded(before.refresh, after.refresh)).toMatchObject({ version: 1, changes: ['recovered', 'result_ready'], events: ['Run Recovered', 'Result Ready'] });
  });
});
