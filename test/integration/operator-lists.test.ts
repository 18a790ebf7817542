import { STATE_ITEM } from '../../shared/adapters/item-kinds.js';
import { DeleteCommand, DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { isDeepStrictEqual } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureLedgerTable } from '../../local/resources.js';
import { InboxTable } from '../../shared/adapters/inbox-table.js';
import { InvalidCursorError, LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import { stateItem } from '../../shared/adapters/state-item.js';
import { recentShardOf, RECENT_SHARDS } from '../../shared/adapters/ledger-keys.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { ApiError, type ApiRequest } from '../../shared/api/http.js';
import { route, type ApiDeps } from '../../shared/api/routes.js';
import type { Counts } from '../../shared/dispatch/counts.js';
import type { DispatchFilter } from '../../shared/dispatch/dispatch-filter.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import type { DispatchState, NextState } from '../../shared/dispatch/state.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { blocked } from '../../shared/dispatch/transitions/core.js';
import type { DispatchView } from '../../shared/dispatch/view.js';
import { MemoryBlobs } from '../support/memory-blobs.js';
import { engineClients, uniqueName } from '../support/engines.js';
import { eventually } from '../support/eventually.js';
import { newDispatchFactory, NOW, noTargetWork } from '../support/factories.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

// CONTRACT §2 v2: the operator's `GET /dispatches` (every origin's dispatches, newest first, from the
// sharded `recent` index) and `GET /counts` (kept by the publisher from the table's stream), on
// DynamoDB Local — the adapters directly, the router in enforce mode, and the whole local platform.

const clients = engineClients();
const documents = DynamoDBDocumentClient.from(clients.dynamodb, { marshallOptions: { removeUndefinedValues: true } });
afterAll(() => clients.destroy());

const RETENTION = 90 * 86_400;
const at = (seconds: number): string => new Date(NOW.getTime() + seconds * 1000).toISOString();
const encode = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
/** A new dispatch's state item exactly as the ledger writes it: its first version (a create). */
const createdItem = (state: NextState) => stateItem(state, { version: 1, changes: state.changes }, RETENTION);

/** Twelve dispatches of three origins to two targets, one a second apart, in three shapes (accepted, running, blocked). */
const SEEDED: NextState[] = Array.from({ length: 12 }, (_, index) => {
  const fresh = accepted(newDispatchFactory({ dispatchId: `d-ops-${String(index).padStart(2, '0')}`, origin: ['team-a', 'team-b', 'team-c'][index % 3] as string, target: index % 4 < 2 ? 'alpha' : 'beta', writtenAt: at(index) }), new Date(at(index)));
  if (index % 3 === 1) return submitted(fresh, { kind: 'accepted', runId: `r-${index}`, status: 'running', requestId: `q-${index}` }, DEFAULT_RETRY_POLICY, new Date(at(index)));
  if (index % 6 === 2) return blocked(fresh, 'target_rejected', 'HTTP 422', new Date(at(index)));
  return fresh;
});
const NEWEST_FIRST = [...SEEDED].reverse().map((state) => state.dispatchId);
const ORIGIN_PRINCIPAL = 'AROAORIGIN';
const OPERATOR_PRINCIPAL = 'AROAOPERATOR';

let tableName = '';
let feeds: LedgerFeedsTable;
let deps: ApiDeps;

beforeAll(async () => {
  tableName = (await ensureLedgerTable(clients.dynamodb, uniqueName('operator-lists'))).name;
  // The state items exactly as the ledger writes them (the lists only read them).
  for (const state of SEEDED) await documents.send(new PutCommand({ TableName: tableName, Item: createdItem(state) }));
  const table = new LedgerTable(documents, { tableName, retentionSeconds: RETENTION });
  await table.putPrincipal(ORIGIN_PRINCIPAL, { role: 'origin', origin: 'team-a' });
  await table.putPrincipal(OPERATOR_PRINCIPAL, { role: 'operator' });
  feeds = new LedgerFeedsTable(documents, { tableName, retentionSeconds: RETENTION, now: () => NOW });
  deps = {
    store: table,
    feeds,
    principals: table,
    principalMode: 'enforce',
    inbox: new InboxTable(documents, { tableName, retentionSeconds: RETENTION }),
    ...noTargetWork(() => NOW, 'no target is called by the operator lists', new MemoryBlobs()),
  };
  // The index is eventually consistent in AWS (DynamoDB Local is not, but the test need not know).
  await eventually('the seeded states in the recent index', async () => ((await feeds.listDispatches({ limit: 100 })).items.length === SEEDED.length ? true : undefined));
});

/** Every page of the list, following its cursors (at most 30 pages). */
async function allPages(limit: number, filter: DispatchFilter = {}) {
  const ids: string[] = [];
  const cursors: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await feeds.listDispatches({ limit, cursor, filter });
    expect(page.items.length).toBeLessThanOrEqual(limit);
    ids.push(...page.items.map((state) => state.dispatchId));
    cursor = page.cursor ?? undefined;
    if (cursor) cursors.push(cursor);
  } while (cursor && cursors.length < 30);
  return { ids, cursors };
}

/** A GET as API Gateway hands it over: `iamUserId` the verified IAM caller (null: none). */
const request = (rawPath: string, query: Record<string, string> = {}, iamUserId: string | null = OPERATOR_PRINCIPAL): ApiRequest => ({ method: 'GET', rawPath, query, headers: {}, body: undefined, iamUserId: iamUserId ?? undefined });

async function answer(req: ApiRequest): Promise<{ status: number; body: unknown }> {
  try {
    const response = await route(deps, req);
    return { status: response.statusCode, body: JSON.parse(response.body) as unknown };
  } catch (error) {
    if (error instanceof ApiError) return { status: error.statusCode, body: { code: error.code } };
    throw error;
  }
}

describe('GET /dispatches (the recent index, every origin)', () => {
  it('lists every origin\'s dispatches newest first, each as the history shows it plus its origin', async () => {
    const { status, body } = await answer(request('/dispatches', { limit: '100' }));
    expect(status).toBe(200);
    const { items, cursor } = body as { items: Array<{ dispatchId: string; origin: string; target: string; phase: string; status: string | null; createdAt: string }>; cursor: string | null };
    expect(items.map((item) => item.dispatchId)).toEqual(NEWEST_FIRST);
    expect(cursor).toBeNull();
    expect(new Set(items.map((item) => item.origin))).toEqual(new Set(['team-a', 'team-b', 'team-c']));
    const newest = SEEDED[11] as DispatchState;
    expect(items[0]).toEqual({ dispatchId: newest.dispatchId, origin: newest.origin, target: newest.target, createdAt: newest.createdAt, phase: newest.phase, status: newest.execution.status, runId: newest.runId, attempt: 1, blockedReason: newest.blockedReason });
  });

  it.each([1, 2, 5, 12])('pages through every dispatch with limit %i, newest first, none twice and none skipped', async (limit) => {
    const { ids, cursors } = await allPages(limit);
    expect(ids).toEqual(NEWEST_FIRST);
    expect(cursors.length).toBeGreaterThanOrEqual(Math.ceil(SEEDED.length / limit) - 1);
  });

  it.each<[string, DispatchFilter, (state: DispatchState) => boolean]>([
    ['target', { target: 'beta' }, (state) => state.target === 'beta'],
    ['phase', { phase: 'blocked' }, (state) => state.phase === 'blocked'],
    ['execution status', { status: 'running' }, (state) => state.execution.status === 'running'],
    ['no execution status yet (none)', { status: 'none' }, (state) => state.execution.status === null],
    ['origin (its history)', { origin: 'team-b' }, (state) => state.origin === 'team-b'],
    ['target and phase at once', { target: 'alpha', phase: 'accepted' }, (state) => state.target === 'alpha' && state.phase === 'accepted'],
  ])('filters by %s exactly, newest first, across pages of 1 and of 2', async (_name, filter, keep) => {
    const expected = [...SEEDED].reverse().filter(keep).map((state) => state.dispatchId);
    expect(expected.length).toBeGreaterThan(0);
    for (const limit of [1, 2]) expect((await allPages(limit, filter)).ids).toEqual(expected);
  });

  it('answers the route with the filters and paging of the adapter, and 400 for a filter value that is none of the contract\'s', async () => {
    const first = await answer(request('/dispatches', { limit: '2', target: 'beta' }));
    const next = await answer(request('/dispatches', { limit: '2', target: 'beta', cursor: (first.body as { cursor: string }).cursor }));
    const ids = [first, next].flatMap((page) => (page.body as { items: Array<{ dispatchId: string }> }).items.map((item) => item.dispatchId));
    expect(ids).toEqual([...SEEDED].reverse().filter((state) => state.target === 'beta').slice(0, 4).map((state) => state.dispatchId));
    for (const query of [{ status: 'done' }, { phase: 'finished' }, { target: 'Not A Target' }, { origin: 'UPPER' }, { limit: '0' }, { limit: '101' }] as Array<Record<string, string>>) {
      expect(await answer(request('/dispatches', query)), JSON.stringify(query)).toEqual({ status: 400, body: { code: 'malformed' } });
    }
  });

  it('refuses a cursor it did not issue — garbage, truncated, re-encoded, forged — as 400 malformed, never a 500', async () => {
    const issued = (await feeds.listDispatches({ limit: 3 })).cursor as string;
    const forged = [
      'garbage',
      issued.slice(0, -2),
      `${issued}=`,
      encode({ group: 'recent', after: 'not-a-position' }),
      encode({ group: 'recent', after: `${at(3)}#short` }),
      encode({ group: 'recent', after: `${at(3)}#AAAAAAAAAA`, extra: 1 }),
      encode({ group: 'recent', after: 42 }),
      encode({ group: 'recent' }),
      // The cursors of before the shards (a position without its list), of another index, of an origin's history.
      encode({ before: `${at(3)}#AAAAAAAAAA` }),
      encode(['before']),
      encode({ pk: 'D#d-ops-01', sk: 'STATE', originKey: 'O#team-a', createdKey: `${at(1)}#AAAAAAAAAA` }),
      encode({ group: 'O#team-a', after: `${at(3)}#AAAAAAAAAA` }),
      encode({ group: 'R#03', after: `${at(3)}#AAAAAAAAAA` }),
      'x'.repeat(3000),
    ];
    for (const cursor of forged) {
      await expect(feeds.listDispatches({ limit: 3, cursor }), cursor.slice(0, 80)).rejects.toBeInstanceOf(InvalidCursorError);
      expect(await answer(request('/dispatches', { cursor }))).toEqual({ status: 400, body: { code: 'malformed' } });
    }
    // A position the ledger could have handed out is a cursor: the page below it.
    const below = await feeds.listDispatches({ limit: 100, cursor: encode({ group: 'recent', after: `${at(5)}#----------` }) });
    expect(below.items.map((state) => state.dispatchId)).toEqual(NEWEST_FIRST.slice(-5));
  });

  it('is the operator\'s alone in enforce mode: an origin\'s caller and an unknown one are refused 403, the operator is answered', async () => {
    expect((await answer(request('/dispatches', {}, OPERATOR_PRINCIPAL))).status).toBe(200);
    expect(await answer(request('/dispatches', {}, ORIGIN_PRINCIPAL))).toEqual({ status: 403, body: { code: 'forbidden' } });
    expect(await answer(request('/dispatches', { origin: 'team-a' }, ORIGIN_PRINCIPAL))).toEqual({ status: 403, body: { code: 'forbidden' } });
    expect(await answer(request('/dispatches', {}, null))).toEqual({ status: 403, body: { code: 'forbidden' } });
    expect(await answer(request('/counts', {}, ORIGIN_PRINCIPAL))).toEqual({ status: 403, body: { code: 'forbidden' } });
    expect((await answer(request('/counts', {}, OPERATOR_PRINCIPAL))).status).toBe(200);
  });
});

describe('GET /dispatches when many dispatches share one createdAt (a burst, spread over the shards)', () => {
  // Seeded a second apart, the dispatches above never tie on createdAt; a burst does, and then the
  // order within the instant is the sort key's own (createdKey: the time, then the hash of the id),
  // merged across every shard that holds one of them.
  const SAME_INSTANT = at(100);
  const BURST: NextState[] = Array.from({ length: 40 }, (_, index) =>
    accepted(newDispatchFactory({ dispatchId: `d-burst-${String(index).padStart(2, '0')}`, origin: ['team-a', 'team-b'][index % 2] as string, target: 'alpha', writtenAt: SAME_INSTANT }), new Date(SAME_INSTANT)),
  );
  const keyed = BURST.map((state) => ({ dispatchId: state.dispatchId, createdKey: String(createdItem(state).createdKey) }));
  // Newest first: the sort key descending, compared as DynamoDB compares strings (by code unit here: all ASCII).
  const SORT_KEY_ORDER = [...keyed].sort((a, b) => (a.createdKey < b.createdKey ? 1 : a.createdKey > b.createdKey ? -1 : 0)).map((entry) => entry.dispatchId);
  let burstFeeds: LedgerFeedsTable;

  beforeAll(async () => {
    const burstTable = (await ensureLedgerTable(clients.dynamodb, uniqueName('operator-burst'))).name;
    for (const state of BURST) await documents.send(new PutCommand({ TableName: burstTable, Item: createdItem(state) }));
    burstFeeds = new LedgerFeedsTable(documents, { tableName: burstTable, retentionSeconds: RETENTION, now: () => NOW });
    await eventually('the burst in the recent index', async () => ((await burstFeeds.listDispatches({ limit: 100 })).items.length === BURST.length ? true : undefined));
  });

  it('seeds one instant over most of the shards', () => {
    expect(new Set(BURST.map((state) => state.createdAt))).toEqual(new Set([SAME_INSTANT]));
    expect(new Set(keyed.map((entry) => entry.createdKey)).size).toBe(BURST.length);
    expect(new Set(BURST.map((state) => recentShardOf(state.dispatchId))).size).toBeGreaterThanOrEqual(RECENT_SHARDS - 4);
  });

  it.each([1, 2, 5])('pages through the burst with limit %i: every dispatch exactly once, in the sort key\'s order', async (limit) => {
    const ids: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await burstFeeds.listDispatches({ limit, cursor });
      expect(page.items.length).toBeLessThanOrEqual(limit);
      ids.push(...page.items.map((state) => state.dispatchId));
      cursor = page.cursor ?? undefined;
      pages += 1;
    } while (cursor && pages <= BURST.length + 1);
    expect(ids).toEqual(SORT_KEY_ORDER);
    expect(pages).toBeGreaterThanOrEqual(Math.ceil(BURST.length / limit));
  });
});

describe('GET /counts on the local platform (the publisher keeps them from the stream)', () => {
  let t: TestPlatform;
  beforeAll(async () => {
    t = await startTestPlatform();
  });
  afterAll(() => t?.stop());

  const counts = async (): Promise<Counts & { asOf: string }> => {
    const { status, body } = await t.get('/counts');
    if (status !== 200) throw new Error(`GET /counts → ${status}`);
    return body as Counts & { asOf: string };
  };

  it('counts dispatches that complete, stall and block by phase, execution status and evidence outcome, as their views say, and a removed state no more', async () => {
    const done = { dispatchId: uniqueName('cnt'), origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' } };
    const stalled = { dispatchId: uniqueName('cnt'), origin: 'team-b', target: 'demo-agent', task: { behavior: 'stall' }, timeouts: { stallAfterSeconds: 2 } };
    const stuck = { dispatchId: uniqueName('cnt'), origin: 'planner', target: 'nobody-home', task: { behavior: 'complete' } };
    for (const message of [done, stalled, stuck]) await t.send(JSON.stringify(message));
    await t.viewWhen(done.dispatchId, (view) => view.execution.status === 'completed' && view.evidence.outcome !== 'pending');
    await t.viewWhen(stalled.dispatchId, (view) => view.execution.status === 'unknown', { origin: 'team-b' });
    await t.viewWhen(stuck.dispatchId, (view) => view.phase === 'blocked');

    /** The counts next to what the views of `messages` say, read together (the publisher is a moment behind the states). */
    const countsAndViews = async (messages: ReadonlyArray<{ dispatchId: string; origin: string }>) => {
      const views = await Promise.all(messages.map((message) => t.view(message.dispatchId, { origin: message.origin })));
      const tally = (of: (view: DispatchView) => string) => views.reduce<Record<string, number>>((sum, view) => ({ ...sum, [of(view)]: (sum[of(view)] ?? 0) + 1 }), {});
      const nonZero = (group: Readonly<Record<string, number>>) => Object.fromEntries(Object.entries(group).filter(([, n]) => n !== 0));
      const counted = await counts();
      return {
        counted: { total: counted.total, phase: nonZero(counted.phase), execution: nonZero(counted.execution), evidence: nonZero(counted.evidence) },
        viewed: { total: views.length, phase: tally((view) => view.phase), execution: tally((view) => view.execution.status ?? 'none'), evidence: tally((view) => view.evidence.outcome) },
        answered: counted,
      };
    };
    const agree = ({ counted, viewed }: Awaited<ReturnType<typeof countsAndViews>>) => isDeepStrictEqual(counted, viewed);

    const all = await eventually('the counts of the three dispatches', () => countsAndViews([done, stalled, stuck]), { until: agree });
    expect(all.counted).toEqual(all.viewed);
    expect(all.answered).toMatchObject({ total: 3, phase: { accepted: 0, submitted: 2, blocked: 1, cancelled: 0 }, execution: { none: 1, completed: 1, unknown: 1, running: 0 } });
    expect(Date.parse(all.answered.asOf)).not.toBeNaN();

    // A REMOVE (as a TTL expiry makes) takes the blocked dispatch out of every bucket it was in.
    await documents.send(new DeleteCommand({ TableName: t.platform.resources.ledgerTable, Key: STATE_ITEM.key(stuck.dispatchId) }));
    const left = await eventually('the counts without the removed dispatch', () => countsAndViews([done, stalled]), { until: agree });
    expect(left.answered).toMatchObject({ total: 2, phase: { submitted: 2, blocked: 0 }, execution: { none: 0, completed: 1, unknown: 1 } });

    // The list of every origin shows the two left, newest first, and refuses garbage as 400.
    const listed = await t.get('/dispatches?limit=10');
    expect(listed.status).toBe(200);
    const items = (listed.body as { items: Array<{ dispatchId: string; origin: string; createdAt: string }> }).items;
    expect(new Set(items.map((item) => item.dispatchId))).toEqual(new Set([done.dispatchId, stalled.dispatchId]));
    expect(items.map((item) => item.createdAt)).toEqual(items.map((item) => item.createdAt).sort().reverse());
    expect(new Set(items.map((item) => item.origin))).toEqual(new Set(['planner', 'team-b']));
    expect(await t.get('/dispatches?cursor=garbage')).toMatchObject({ status: 400, body: { error: { code: 'malformed' } } });
  });
});
