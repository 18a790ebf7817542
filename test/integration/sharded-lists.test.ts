import { REJECTION_ITEM } from '../../shared/adapters/item-kinds.js';
import { DynamoDBDocumentClient, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureLedgerTable } from '../../local/resources.js';
import { LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import { type Item } from '../../shared/adapters/item-codec.js';
import { stateItem } from '../../shared/adapters/state-item.js';
import { FEED, monthKey, originListOf } from '../../shared/adapters/ledger-keys.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { stateOnly, type NextState } from '../../shared/dispatch/state.js';
import { evidenceSettled } from '../../shared/dispatch/transitions/evidence.js';
import { applyRunEvent } from '../../shared/dispatch/transitions/run.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { blocked } from '../../shared/dispatch/transitions/core.js';
import type { Page } from '../../shared/ledger/port.js';
import type { Rejection } from '../../shared/dispatch/records.js';
import { engineClients, uniqueName } from '../support/engines.js';
import { watchCommands } from '../../bench/command-watch.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

// CONTRACT §14: an origin's history and the feeds are written over several partition keys (no key takes
// a busy origin's or an outage's every write), and listed back as one list. Against DynamoDB Local: any
// mix of entries — many on one instant, some still under the unsharded keys deployed stacks wrote —
// paged with any limits, gives exactly the unsharded order (the set sorted by the index sort key, newest
// first), with no gap and no duplicate; and no query of a page asks for more than the page's limit.

const clients = engineClients();
const queryLimits: number[] = [];
watchCommands(clients.dynamodb, (command, input) => {
  if (command === 'Query') queryLimits.push(Number(input['Limit']));
});
const documents = DynamoDBDocumentClient.from(clients.dynamodb, { marshallOptions: { removeUndefinedValues: true } });
afterAll(() => clients.destroy());

const RETENTION = 90 * 86_400;
/** A state item exactly as the ledger writes it: `version` is the write's (1: the dispatch's create). */
const itemOf = (state: NextState, version = 1): Item => stateItem(state, { version, changes: state.changes }, RETENTION);
const ORIGIN = 'prop';
/** A few instants only: many entries share one, and the order within it is the sort key's own. */
const CREATED = ['2026-03-01T10:00:00.000Z', '2026-03-01T10:00:01.000Z', '2026-03-01T10:00:02.000Z'];
const SINCE = ['2026-03-01T11:00:00.000Z', '2026-03-01T11:00:00.500Z', '2026-03-01T11:00:01.000Z'];
/** Rejections of this month and of the one before (two feeds, listed in turn). */
const REJECTED = ['2026-03-01T08:00:00.000Z', '2026-03-01T09:00:00.000Z', '2026-02-20T08:00:00.000Z', '2026-02-21T08:00:00.000Z'];

const byPositionNewestFirst = <T extends { position: string }>(entries: readonly T[]): T[] => [...entries].sort((a, b) => (a.position < b.position ? 1 : a.position > b.position ? -1 : 0));

/** Every page of a list, each asked with the next of `limits` (in turn): the ids in list order. */
async function pagesOf<T>(list: (limit: number, cursor: string | undefined) => Promise<Page<T>>, idOf: (item: T) => string, limits: readonly number[], total: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; ; page += 1) {
    const limit = limits[page % limits.length] as number;
    queryLimits.length = 0;
    const answer = await list(limit, cursor);
    expect(answer.items.length).toBeLessThanOrEqual(limit);
    // Page cost bounded: each shard query asks for at most the page's limit.
    expect(Math.max(0, ...queryLimits)).toBeLessThanOrEqual(limit);
    ids.push(...answer.items.map(idOf));
    if (answer.cursor === null) return ids;
    cursor = answer.cursor;
    // A full page each time but for the ends of feeds: never more pages than entries and feeds.
    expect(page).toBeLessThan(total + 10);
  }
}

const dispatchArb = fc.record({ created: fc.nat(CREATED.length - 1), since: fc.nat(SINCE.length - 1), legacyHistory: fc.boolean(), legacyFeed: fc.boolean() });
const rejectionArb = fc.record({ at: fc.nat(REJECTED.length - 1), legacy: fc.boolean() });
const scenarioArb = fc.record({
  dispatches: fc.array(dispatchArb, { maxLength: 20 }),
  rejections: fc.array(rejectionArb, { maxLength: 12 }),
  limits: fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 4 }),
});

describe('sharded lists read back as one (CONTRACT §14)', () => {
  it('origin history, attention and rejections pages followed by cursor give the unsharded order, legacy keys included, at random limits', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async ({ dispatches, rejections, limits }) => {
        const tableName = (await ensureLedgerTable(clients.dynamodb, uniqueName('sharded'))).name;
        const written: Array<{ dispatchId: string; item: Item }> = [];
        for (const [index, spec] of dispatches.entries()) {
          const dispatchId = `d-prop-${String(index).padStart(2, '0')}`;
          const created = CREATED[spec.created] as string;
          const state = blocked(accepted(newDispatchFactory({ dispatchId, origin: ORIGIN, writtenAt: created }), new Date(created)), 'unknown_target', 'no target "nope"', new Date(SINCE[spec.since] as string));
          const item = itemOf(state);
          // As a stack deployed before the shards wrote it: under the unsharded history key or feed.
          if (spec.legacyHistory) item.originKey = originListOf(ORIGIN);
          if (spec.legacyFeed) item.feedKey = FEED.attention('blocked');
          await documents.send(new PutCommand({ TableName: tableName, Item: item }));
          written.push({ dispatchId, item });
        }
        const table = new LedgerTable(documents, { tableName, retentionSeconds: RETENTION });
        const rejected: Array<{ messageId: string; position: string }> = [];
        for (const [index, spec] of rejections.entries()) {
          const messageId = `m-prop-${String(index).padStart(2, '0')}`;
          const at = REJECTED[spec.at] as string;
          const rejection: Rejection = { messageId, at, reason: 'not_json', dispatchId: null, origin: null, senderId: null, bodyPreview: 'nope', bodyRef: null, bodyBytes: 4 };
          expect(await table.putRejection(rejection)).toEqual({ kind: 'written' });
          if (spec.legacy) {
            await documents.send(new UpdateCommand({ TableName: tableName, Key: REJECTION_ITEM.key(messageId), UpdateExpression: 'SET feedKey = :feed', ExpressionAttributeValues: { ':feed': FEED.rejections(monthKey(new Date(at))) } }));
          }
          rejected.push({ messageId, position: `${at}#${messageId}` });
        }
        const feeds = new LedgerFeedsTable(documents, { tableName, retentionSeconds: RETENTION, now: () => NOW });
        const total = dispatches.length + rejections.length;

        const history = byPositionNewestFirst(written.map(({ dispatchId, item }) => ({ dispatchId, position: String(item.createdKey) }))).map((entry) => entry.dispatchId);
        expect(await pagesOf((limit, cursor) => feeds.listOriginDispatches(ORIGIN, { limit, cursor }), (state) => state.dispatchId, limits, total)).toEqual(history);
        expect(await pagesOf((limit, cursor) => feeds.listDispatches({ limit, cursor, filter: { origin: ORIGIN } }), (state) => state.dispatchId, limits, total)).toEqual(history);

        const attention = byPositionNewestFirst(written.map(({ dispatchId, item }) => ({ dispatchId, position: String(item.feedAt) }))).map((entry) => entry.dispatchId);
        expect(await pagesOf((limit, cursor) => feeds.listAttention({ kind: 'blocked', limit, cursor }), (state) => state.dispatchId, limits, total)).toEqual(attention);
        expect(await pagesOf((limit, cursor) => feeds.listAttention({ limit, cursor }), (state) => state.dispatchId, limits, total)).toEqual(attention);

        const rejectionOrder = byPositionNewestFirst(rejected).map((entry) => entry.messageId);
        expect(await pagesOf((limit, cursor) => feeds.listRejections({ limit, cursor }), (item) => item.messageId, limits, total)).toEqual(rejectionOrder);
      }),
      { numRuns: 8 },
    );
  });

  /**
   * A dispatch whose run completed and whose result waits in its origin's inbox (listed by `GET /origins/{origin}/inbox`):
   * its second write (version 2), the completion settling its evidence, after the create that submitted it.
   */
  function withResult(dispatchId: string, created: string): NextState {
    const start = accepted(newDispatchFactory({ dispatchId, origin: ORIGIN, writtenAt: created }), new Date(created));
    const running = stateOnly(submitted(start, { kind: 'accepted', runId: `r-${dispatchId}`, status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, new Date(created)));
    const done = applyRunEvent(running, { seq: 1, type: 'completed', result: { summary: 'done' } }, new Date(created));
    if (done.kind !== 'apply') throw new Error('the completion applies');
    return evidenceSettled(done.next, { outcome: 'handled', expected: [], missing: [] }, new Date(created));
  }
  const resultItem = (state: NextState): Item => itemOf(state, 2);

  it('lists each entry once while states move from the unsharded key to their shards between pages, newest first and oldest first', async () => {
    const tableName = (await ensureLedgerTable(clients.dynamodb, uniqueName('sharded-move'))).name;
    const states = Array.from({ length: 9 }, (_, index) => withResult(`d-move-${index}`, CREATED[index % CREATED.length] as string));
    expect(states.every((state) => state.result?.state === 'pending')).toBe(true);
    const put = (item: Item) => documents.send(new PutCommand({ TableName: tableName, Item: item }));
    // All written by a stack of before the shards.
    for (const state of states) await put({ ...resultItem(state), originKey: originListOf(ORIGIN) });
    const feeds = new LedgerFeedsTable(documents, { tableName, retentionSeconds: RETENTION, now: () => NOW });
    const positions = states.map((state) => ({ dispatchId: state.dispatchId, position: String(resultItem(state).createdKey) }));
    const newestFirst = byPositionNewestFirst(positions).map((entry) => entry.dispatchId);

    for (const [name, list, expected] of [
      ['newest first', (cursor: string | undefined) => feeds.listOriginDispatches(ORIGIN, { limit: 2, cursor }), newestFirst],
      ['oldest first', (cursor: string | undefined) => feeds.listResults(ORIGIN, { limit: 2, cursor, state: undefined }), [...newestFirst].reverse()],
    ] as const) {
      for (const state of states) await put({ ...resultItem(state), originKey: originListOf(ORIGIN) });
      const ids: string[] = [];
      let cursor: string | undefined;
      let moved = 0;
      do {
        const page = await list(cursor);
        ids.push(...page.items.map((state) => state.dispatchId));
        cursor = page.cursor ?? undefined;
        // The next write of three states (listed or not yet) puts them under their shard, as any write by this code does.
        for (const state of states.slice(moved, moved + 3)) await put(resultItem(state));
        moved += 3;
      } while (cursor);
      expect(ids, name).toEqual(expected);
    }
  });
});
