import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureLedgerTable } from '../../local/resources.js';
import { InvalidCursorError, LedgerFeedsTable, type LedgerFeedsOptions } from '../../shared/adapters/ledger-feeds.js';
import { stateItem } from '../../shared/adapters/state-item.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { accepted } from '../../shared/dispatch/transitions/lifecycle.js';
import { blocked } from '../../shared/dispatch/transitions/core.js';
import type { NextState } from '../../shared/dispatch/state.js';
import type { Rejection } from '../../shared/dispatch/records.js';
import { engineClients, uniqueName } from '../support/engines.js';
import { withUnprocessedKeys } from '../support/unprocessed-keys.js';
import { eventually } from '../support/eventually.js';
import { newDispatchFactory, NOW } from '../support/factories.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

// CONTRACT §2: "Every cursor is opaque; a cursor the ledger did not issue (forged, truncated, garbage)
// → 400, never 500." The feeds read DynamoDB Local for real; a cursor that reached DynamoDB in a shape
// it refuses would be a ValidationException (a 500), so every cursor must be refused before the query.

const clients = engineClients();
afterAll(() => clients.destroy());

const RETENTION = 90 * 86_400;
const encode = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
const decode = (cursor: string) => JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as Record<string, unknown>;

let tableName = '';
const PLANNER = Array.from({ length: 5 }, (_, index) => `d-feeds-planner-${index}`);
const OTHER = Array.from({ length: 2 }, (_, index) => `d-feeds-other-${index}`);
const BLOCKED = Array.from({ length: 3 }, (_, index) => `d-feeds-blocked-${index}`);
const REJECTED_AT = ['2026-03-01T08:00:00.000Z', '2026-02-20T08:00:00.000Z', '2026-02-10T08:00:00.000Z'];

const rejection = (messageId: string, at: string): Rejection => ({
  messageId, at, reason: 'not_json', dispatchId: null, origin: null, senderId: null, bodyPreview: 'nope', bodyRef: null, bodyBytes: 4,
});

function feedsOn(documents: DynamoDBDocumentClient, options: Partial<LedgerFeedsOptions> = {}): LedgerFeedsTable {
  return new LedgerFeedsTable(documents, { tableName, retentionSeconds: RETENTION, now: () => NOW, ...options });
}

beforeAll(async () => {
  tableName = (await ensureLedgerTable(clients.dynamodb, uniqueName('feeds'))).name;
  const documents = DynamoDBDocumentClient.from(clients.dynamodb, { marshallOptions: { removeUndefinedValues: true } });
  // The state items exactly as the ledger writes them (the feeds only read them): each a create, version 1.
  const put = (state: NextState) => documents.send(new PutCommand({ TableName: tableName, Item: stateItem(state, { version: 1, changes: state.changes }, RETENTION) }));
  for (const dispatchId of PLANNER) await put(accepted(newDispatchFactory({ dispatchId }), NOW));
  for (const dispatchId of OTHER) await put(accepted(newDispatchFactory({ dispatchId, origin: 'other' }), NOW));
  for (const dispatchId of BLOCKED) await put(blocked(accepted(newDispatchFactory({ dispatchId, origin: 'other' }), NOW), 'unknown_target', 'no target "nope"', NOW));
  const table = new LedgerTable(documents, { tableName, retentionSeconds: RETENTION });
  for (const [index, at] of REJECTED_AT.entries()) await table.putRejection(rejection(`m-feeds-${index}`, at));
});

/** Every page of a listing, following its cursors, as the ids listed. */
async function allPages<T>(list: (cursor: string | undefined) => Promise<{ items: readonly T[]; cursor: string | null }>, idOf: (item: T) => string) {
  const ids: string[] = [];
  const cursors: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await list(cursor);
    ids.push(...page.items.map(idOf));
    cursor = page.cursor ?? undefined;
    if (cursor) cursors.push(cursor);
  } while (cursor && cursors.length < 20);
  return { ids, cursors };
}

describe('API answers: the cursors the ledger issues page through every list', () => {
  it('pages an origin\'s history, the attention list and the rejections (across months) with limit 1 and 2, each entry once', async () => {
    const feeds = feedsOn(DynamoDBDocumentClient.from(clients.dynamodb));
    // The index is eventually consistent in AWS (DynamoDB Local is not, but the test need not know).
    await eventually('the seeded history in the byOrigin index', async () => ((await feeds.listOriginDispatches('planner', { limit: 100 })).items.length === PLANNER.length ? true : undefined));

    const history = await allPages((cursor) => feeds.listOriginDispatches('planner', { limit: 2, cursor }), (state) => state.dispatchId);
    expect([...history.ids].sort()).toEqual([...PLANNER].sort());
    expect(history.cursors.length).toBeGreaterThanOrEqual(2);

    await eventually('the seeded states in the attention feed', async () => ((await feeds.listAttention({ kind: 'blocked', limit: 100 })).items.length === BLOCKED.length ? true : undefined));
    const attention = await allPages((cursor) => feeds.listAttention({ limit: 1, cursor }), (state) => state.dispatchId);
    expect([...attention.ids].sort()).toEqual([...BLOCKED].sort());
    const blockedOnly = await allPages((cursor) => feeds.listAttention({ kind: 'blocked', limit: 2, cursor }), (state) => state.dispatchId);
    expect([...blockedOnly.ids].sort()).toEqual([...BLOCKED].sort());

    const rejections = await allPages((cursor) => feeds.listRejections({ limit: 1, cursor }), (item) => item.messageId);
    expect(rejections.ids).toEqual(['m-feeds-0', 'm-feeds-1', 'm-feeds-2']);
  });

  it('answers an empty last page, not 400, for a rejections cursor whose month has aged out of the retention', async () => {
    const feeds = feedsOn(DynamoDBDocumentClient.from(clients.dynamodb));
    expect(await feeds.listRejections({ limit: 5, cursor: encode({ group: 'rejections#2020-01' }) })).toEqual({ items: [], cursor: null });
  });
});

describe('API answers: a cursor the ledger did not issue is InvalidCursorError (400), never a DynamoDB ValidationException (500)', () => {
  const feeds = () => feedsOn(DynamoDBDocumentClient.from(clients.dynamodb));
  /** A real cursor of each list, and the key inside it. */
  const issued = async () => {
    const f = feeds();
    const origin = (await f.listOriginDispatches('planner', { limit: 1 })).cursor ?? '';
    const otherOrigin = (await f.listOriginDispatches('other', { limit: 1 })).cursor ?? '';
    const attention = (await f.listAttention({ kind: 'blocked', limit: 1 })).cursor ?? '';
    const rejections = (await f.listRejections({ limit: 1 })).cursor ?? '';
    expect([origin, otherOrigin, attention, rejections].every(Boolean)).toBe(true);
    return {
      origin,
      otherOrigin,
      attention,
      rejections,
      originAt: decode(origin) as { group: string; after: string },
      attentionAt: decode(attention) as { group: string; after: string },
      rejectionAt: decode(rejections) as { group: string; after: string },
    };
  };
  type Issued = Awaited<ReturnType<typeof issued>>;

  async function refused(list: Promise<unknown>): Promise<void> {
    const outcome = await list.then(
      (page) => ({ page }),
      (error: unknown) => ({ error }),
    );
    if ('page' in outcome) throw new Error(`expected InvalidCursorError, got a page: ${JSON.stringify(outcome.page).slice(0, 300)}`);
    expect(outcome.error, String(outcome.error)).toBeInstanceOf(InvalidCursorError);
  }

  const originCases: Array<[string, (issued: Issued) => string]> = [
    ['garbage', () => 'not a cursor!'],
    ['garbage of base64url letters', () => 'AAAA'],
    ['truncated', ({ origin }) => origin.slice(0, -6)],
    ['a valid cursor with a character appended (not the encoding the ledger hands out)', ({ origin }) => `${origin}=`],
    ['base64url of text that is not JSON', () => Buffer.from('hello').toString('base64url')],
    ['JSON that is not an object', () => encode(['group', 'after'])],
    ['JSON null', () => encode(null)],
    ['an empty object', () => encode({})],
    ['the right JSON but wrong fields', () => encode({ id: 'D#d-feeds-planner-0', sort: 'STATE' })],
    ['the list only (no position: the ledger never hands out the top of a history as a cursor)', ({ originAt }) => encode({ group: originAt.group })],
    ['the position only (no list)', ({ originAt }) => encode({ after: originAt.after })],
    ['an index key, as cursors were before the shards', ({ originAt }) => encode({ pk: 'D#d-feeds-planner-0', sk: 'STATE', originKey: originAt.group, createdKey: originAt.after })],
    ['an extra field', ({ originAt }) => encode({ ...originAt, status: 'running' })],
    ['a number for the position', ({ originAt }) => encode({ ...originAt, after: 20260301 })],
    ['an AttributeValue map for the position', ({ originAt }) => encode({ ...originAt, after: { S: originAt.after } })],
    ['null for the position', ({ originAt }) => encode({ ...originAt, after: null })],
    ['an empty position', ({ originAt }) => encode({ ...originAt, after: '' })],
    ['a lone surrogate in the position', ({ originAt }) => encode({ ...originAt, after: '\ud800' })],
    ['a position that is not a creation time', ({ originAt }) => encode({ ...originAt, after: `soon${originAt.after.slice(-11)}` })],
    ['a position without the hash of an id', ({ originAt }) => encode({ ...originAt, after: '2026-03-01T11:59:59.000Z#short' })],
    ['another origin\'s history', ({ originAt }) => encode({ ...originAt, group: 'O#other' })],
    ['one shard of the history instead of the history', ({ originAt }) => encode({ ...originAt, group: `${originAt.group}#00` })],
    ['a real cursor of another origin', ({ otherOrigin }) => otherOrigin],
    ['a feed cursor', ({ attention }) => attention],
    ['a 3 KB position', ({ originAt }) => encode({ ...originAt, after: `${'x'.repeat(3_000)}${originAt.after.slice(-11)}` })],
    ['a cursor of 100 KB', ({ originAt }) => encode({ ...originAt, after: 'x'.repeat(100_000) })],
    ['100 KB of base64url letters', () => 'A'.repeat(100_000)],
  ];
  for (const [name, cursorOf] of originCases) {
    it(`refuses on an origin's history: ${name}`, async () => {
      const cursor = cursorOf(await issued());
      await refused(feeds().listOriginDispatches('planner', { limit: 2, cursor }));
    });
  }

  // The attention list is read for kind blocked (where the issued cursor is), except where said.
  const feedCases: Array<[string, 'attention' | 'attention of kind unknown' | 'rejections', (issued: Issued) => string]> = [
    ['garbage', 'attention', () => '%%%'],
    ['truncated', 'attention', ({ attention }) => attention.slice(0, 20)],
    ['a feed name that is not a string', 'attention', () => encode({ group: 7 })],
    ['a feed the list does not have', 'attention', () => encode({ group: 'attention#everything' })],
    ['one shard of the feed instead of the feed', 'attention', ({ attentionAt }) => encode({ ...attentionAt, group: `${attentionAt.group}#00` })],
    ['a feed cursor as it was before the shards (a feed and an index key)', 'attention', ({ attentionAt }) => encode({ feed: attentionAt.group, key: { pk: 'D#d-1', sk: 'STATE', feedKey: attentionAt.group, feedAt: attentionAt.after } })],
    ['an extra field', 'attention', ({ attentionAt }) => encode({ ...attentionAt, page: 2 })],
    ['a position that is an object', 'attention', ({ attentionAt }) => encode({ ...attentionAt, after: {} })],
    ['an empty position', 'attention', ({ attentionAt }) => encode({ ...attentionAt, after: '' })],
    ['a position that is a number', 'attention', ({ attentionAt }) => encode({ ...attentionAt, after: 1 })],
    ['a rejection\'s position under an attention feed', 'attention', ({ attentionAt, rejectionAt }) => encode({ ...attentionAt, after: rejectionAt.after })],
    ['a real rejections cursor', 'attention', ({ rejections }) => rejections],
    ['a real cursor of another kind than the one listed', 'attention of kind unknown', ({ attention }) => attention],
    ['an origin history cursor', 'attention', ({ origin }) => origin],
    ['a 3 KB position', 'attention', ({ attentionAt }) => encode({ ...attentionAt, after: `${'x'.repeat(3_000)}${attentionAt.after.slice(-11)}` })],
    ['a cursor of 100 KB', 'attention', ({ attentionAt }) => encode({ ...attentionAt, after: 'x'.repeat(100_000) })],
    ['a real attention cursor', 'rejections', ({ attention }) => attention],
    ['one shard of a month instead of the month', 'rejections', ({ rejectionAt }) => encode({ ...rejectionAt, group: 'rejections#2026-02#00' })],
    ['a month the ledger cannot have written yet', 'rejections', () => encode({ group: 'rejections#2999-01' })],
    ['a month that is not a month', 'rejections', () => encode({ group: 'rejections#soon' })],
    ['a position that is not a time', 'rejections', ({ rejectionAt }) => encode({ ...rejectionAt, after: 'm-someone-else' })],
  ];
  for (const [name, list, cursorOf] of feedCases) {
    it(`refuses on the ${list}: ${name}`, async () => {
      const cursor = cursorOf(await issued());
      const f = feeds();
      await refused(
        list === 'rejections'
          ? f.listRejections({ limit: 2, cursor })
          : f.listAttention({ kind: list === 'attention' ? 'blocked' : 'unknown', limit: 2, cursor }),
      );
    });
  }
});

describe('API answers: a forged cursor on the API is 400 malformed (local platform, functions/api/function.ts)', () => {
  let t: TestPlatform;
  beforeAll(async () => {
    t = await startTestPlatform();
  });
  afterAll(() => t.stop());

  const position = { group: 'O#planner', after: '2026-03-01T12:00:00.000Z#AAAAAAAAAA' };
  const cases: Array<[string, string, string]> = [
    ['garbage', '/origins/planner/dispatches', 'garbage!'],
    ['the right JSON but wrong fields', '/origins/planner/dispatches', encode({ id: 'x' })],
    ['another origin\'s history', '/origins/planner/dispatches', encode({ ...position, group: 'O#other' })],
    ['a non-string position', '/origins/planner/dispatches', encode({ ...position, after: 5 })],
    ['a 3 KB position', '/origins/planner/dispatches', encode({ ...position, after: `${'a'.repeat(3_000)}#AAAAAAAAAA` })],
    ['an empty position on the attention list', '/attention', encode({ group: 'attention#blocked', after: '' })],
    ['a non-string feed on the rejections', '/rejections', encode({ group: ['rejections#2026-03'] })],
  ];
  for (const [name, path, cursor] of cases) {
    it(`GET ${path}?cursor=<${name}> → 400 malformed`, async () => {
      const { status, body } = await t.get(`${path}?cursor=${encodeURIComponent(cursor)}`, 'planner');
      expect({ status, body }).toMatchObject({ status: 400, body: { error: { code: 'malformed' } } });
    });
  }
});

describe('API answers: a history page is whole or the request fails (BatchGetItem UnprocessedKeys)', () => {
  it('re-reads unprocessed keys with exponential backoff until the page is whole', async () => {
    const faulty = withUnprocessedKeys(3);
    try {
      const slept: number[] = [];
      const feeds = feedsOn(faulty.documents, { sleep: async (ms: number) => void slept.push(ms) });
      const page = await feeds.listOriginDispatches('planner', { limit: 5 });
      expect([...page.items.map((state) => state.dispatchId)].sort()).toEqual([...PLANNER].sort());
      expect(faulty.calls()).toBe(4);
      expect(slept).toHaveLength(3);
      expect(slept[1]).toBe((slept[0] ?? 0) * 2);
      expect(slept[2]).toBe((slept[1] ?? 0) * 2);
    } finally {
      faulty.destroy();
    }
  });

  it('keeps the newest-first order of the index whichever round a state came back in', async () => {
    const plain = feedsOn(DynamoDBDocumentClient.from(clients.dynamodb));
    const expected = (await plain.listOriginDispatches('planner', { limit: 5 })).items.map((state) => state.dispatchId);
    const faulty = withUnprocessedKeys(2);
    try {
      const page = await feedsOn(faulty.documents, { sleep: async () => undefined }).listOriginDispatches('planner', { limit: 5 });
      expect(page.items.map((state) => state.dispatchId)).toEqual(expected);
    } finally {
      faulty.destroy();
    }
  });

  it('fails (a retryable 5xx) rather than answer a page with entries missing when keys stay unprocessed', async () => {
    const faulty = withUnprocessedKeys(Infinity, 0);
    try {
      const slept: number[] = [];
      const feeds = feedsOn(faulty.documents, { sleep: async (ms: number) => void slept.push(ms) });
      const outcome = await feeds.listOriginDispatches('planner', { limit: 5 }).then(
        (page) => ({ page: page.items.map((state) => state.dispatchId) }),
        (error: unknown) => ({ error }),
      );
      expect('error' in outcome, JSON.stringify(outcome)).toBe(true);
      const { error } = outcome as { error: unknown };
      expect(String(error)).toMatch(/unprocessed/i);
      expect(error).not.toBeInstanceOf(InvalidCursorError);
      expect(slept.length).toBeGreaterThanOrEqual(3);
      expect(faulty.calls()).toBe(slept.length + 1);
    } finally {
      faulty.destroy();
    }
  });
});
