import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureLedgerTable } from '../../local/resources.js';
import { CapacityMeter } from '../../bench/capacity-meter.js';
import { InboxTable } from '../../shared/adapters/inbox-table.js';
import { LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import { ORIGIN_SHARDS } from '../../shared/adapters/ledger-keys.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { ApiError, type ApiRequest } from '../../shared/api/http.js';
import { route, type ApiDeps } from '../../shared/api/routes.js';
import { takeDispatchMessage } from '../../shared/usecases/intake.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { intakeDepsFactory, noTargetWork } from '../support/factories.js';
import { MemoryBlobs } from '../support/memory-blobs.js';

// CONTRACT §15 (v3): an origin learns that its own message was refused — a `conflict` included — from
// `GET /origins/{origin}/rejections`, and the owner's view lists the newest 10 refused messages of its
// origin that named the dispatch (`conflicts`). Neither reveals another origin's dispatch, origin or
// content. The intake writes the rejections (enforce mode: senders mapped to origins by the principal
// registry, as SQS's SenderId is in AWS); the router answers as the API does under SigV4.

const clients = engineClients();
const meter = new CapacityMeter();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
meter.attach(dynamodb);
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

const RETENTION = 90 * 86_400;
const PLANNER = 'AROAPLANNER';
const BILLING = 'AROABILLING';
const OPERATOR = 'AROAOPERATOR';
let clock = new Date('2026-12-05T10:00:00Z');
let table: LedgerTable;
let api: ApiDeps;

beforeAll(async () => {
  const tableName = (await ensureLedgerTable(clients.dynamodb, uniqueName('origin-rejections'))).name;
  table = new LedgerTable(documents, { tableName, retentionSeconds: RETENTION });
  await table.putPrincipal(PLANNER, { role: 'origin', origin: 'planner' });
  await table.putPrincipal(BILLING, { role: 'origin', origin: 'billing' });
  await table.putPrincipal(OPERATOR, { role: 'operator' });
  // A manual target: the dispatch is recorded and never submitted, so no target needs to run here.
  await table.putTarget({ name: 'desk', kind: 'manual' });
  api = {
    store: table,
    feeds: new LedgerFeedsTable(documents, { tableName, retentionSeconds: RETENTION, now: () => clock }),
    principals: table,
    principalMode: 'enforce',
    inbox: new InboxTable(documents, { tableName, retentionSeconds: RETENTION }),
    ...noTargetWork(() => clock, 'a manual target is never called', new MemoryBlobs()),
  };
});

/** One message through the intake, as `sender` sent it; the clock moves a second first, so each is newer. */
async function send(message: Record<string, unknown>, sender: string) {
  clock = new Date(clock.getTime() + 1000);
  const messageId = uniqueName('m');
  const deps = intakeDepsFactory({ store: table, blobs: new MemoryBlobs(), targetFor: api.targetFor, principals: table, principalMode: 'enforce', now: () => clock });
  return { messageId, result: await takeDispatchMessage(deps, { messageId, body: JSON.stringify(message), senderId: `${sender}:session` }) };
}

const original = (overrides: Record<string, unknown> = {}) => ({
  dispatchId: uniqueName('d'),
  origin: 'planner',
  target: 'desk',
  task: { goal: 'the planner-only secret goal' },
  ...overrides,
});

async function get(rawPath: string, caller: string | null, query: Record<string, string> = {}): Promise<{ status: number; body: unknown }> {
  const request: ApiRequest = { method: 'GET', rawPath, query, headers: {}, body: undefined, iamUserId: caller ?? undefined };
  try {
    const response = await route(api, request);
    return { status: response.statusCode, body: JSON.parse(response.body) as unknown };
  } catch (error) {
    if (error instanceof ApiError) return { status: error.statusCode, body: { code: error.code } };
    throw error;
  }
}

type Entry = { messageId: string; at: string; reason: string; dispatchId: string | null; origin: string | null };
const itemsOf = (answer: { body: unknown }) => (answer.body as { items: Entry[] }).items;

describe('GET /origins/{origin}/rejections and the view\'s conflicts (CONTRACT §15 v3)', () => {
  it('tells an origin its own second message under a dispatchId, with other content, was refused as a conflict; any other caller gets 404', async () => {
    const first = original();
    expect((await send(first, PLANNER)).result.outcome).toBe('waiting');
    const refused = await send({ ...first, task: { goal: 'another goal' } }, PLANNER);
    expect(refused.result).toMatchObject({ outcome: 'rejected', reason: 'conflict' });

    const own = await get('/origins/planner/rejections', PLANNER);
    expect(own.status).toBe(200);
    expect(itemsOf(own).find((entry) => entry.messageId === refused.messageId)).toMatchObject({ reason: 'conflict', dispatchId: first.dispatchId, origin: 'planner', at: clock.toISOString() });
    // That origin only: another origin, the operator (it has GET /rejections) and an unsigned caller are answered 404.
    for (const caller of [BILLING, OPERATOR, null]) expect(await get('/origins/planner/rejections', caller), String(caller)).toEqual({ status: 404, body: { code: 'not_found' } });
    expect((await get('/origins/Not-An-Origin/rejections', PLANNER)).status).toBe(404);
    // Opaque cursors: one the ledger did not issue is 400, never a 500.
    for (const cursor of ['garbage', Buffer.from(JSON.stringify({ group: 'origin-rejections#billing', after: `${clock.toISOString()}#m` })).toString('base64url')]) {
      expect(await get('/origins/planner/rejections', PLANNER, { cursor })).toEqual({ status: 400, body: { code: 'malformed' } });
    }
  });

  it('lists the owner\'s newest 10 refused messages that named the dispatch as its view\'s conflicts, and pages the origin\'s rejections newest first', async () => {
    const first = original();
    await send(first, PLANNER);
    const refused: string[] = [];
    for (let index = 0; index < 12; index += 1) refused.push((await send({ ...first, task: { goal: `attempt ${index}` } }, PLANNER)).messageId);
    const newestFirst = [...refused].reverse();

    const view = await get(`/dispatches/${first.dispatchId}`, PLANNER);
    expect(view.status).toBe(200);
    const conflicts = (view.body as { conflicts: Array<Record<string, unknown>> }).conflicts;
    expect(conflicts.map((conflict) => conflict.messageId)).toEqual(newestFirst.slice(0, 10));
    expect(conflicts[0]).toEqual({ messageId: newestFirst[0], at: clock.toISOString(), reason: 'conflict' });

    // What they cost: one query of the id's own refusals, at most 10 small items (one read unit) — never a
    // Scan — and the view of a dispatch with 12 of them makes the same calls as one with none.
    const refusals = meter.snapshot();
    expect(await table.listRefusals(first.dispatchId, 'planner', 10)).toHaveLength(10);
    expect(meter.since(refusals)).toMatchObject({ requests: 1, readUnits: 1 });
    const quiet = original();
    await send(quiet, PLANNER);
    const calls = async (dispatchId: string) => {
      const before = meter.snapshot();
      expect((await get(`/dispatches/${dispatchId}`, PLANNER)).status).toBe(200);
      return Object.fromEntries(Object.entries(meter.since(before).byOperation).map(([operation, totals]) => [operation, totals.requests]));
    };
    const [withConflicts, withNone] = [await calls(first.dispatchId), await calls(quiet.dispatchId)];
    expect(withConflicts).toEqual(withNone);
    expect(withConflicts.Scan).toBeUndefined();

    // The origin's list, a page of 5 at a time, newest first: one query per shard of the origin's list a page.
    const paged: string[] = [];
    let cursor: string | undefined;
    do {
      const pageStart = meter.snapshot();
      const page = await get('/origins/planner/rejections', PLANNER, { limit: '5', ...(cursor ? { cursor } : {}) });
      expect(meter.since(pageStart).byOperation.Query?.requests).toBeLessThanOrEqual(ORIGIN_SHARDS);
      paged.push(...itemsOf(page).map((entry) => entry.messageId));
      cursor = (page.body as { cursor: string | null }).cursor ?? undefined;
    } while (cursor && paged.length < 100);
    expect(paged.slice(0, 12)).toEqual(newestFirst);
    expect(new Set(paged).size).toBe(paged.length);
  });

  it('never shows one origin anything of another origin\'s dispatch: a conflict under another owner is listed for its sender alone, and a forged origin for nobody', async () => {
    const planners = original();
    await send(planners, PLANNER);
    const intrusion = await send({ ...planners, origin: 'billing', target: 'counter', task: { goal: 'billing wants this id' } }, BILLING);
    const forged = await send({ ...planners, task: { goal: 'forged as planner' } }, BILLING);
    expect(intrusion.result).toMatchObject({ outcome: 'rejected', reason: 'conflict' });
    expect(forged.result).toMatchObject({ outcome: 'rejected', reason: 'origin_not_allowed' });

    // The sender sees its own message refused as a conflict — and nothing of the owner.
    const billing = await get('/origins/billing/rejections', BILLING, { limit: '100' });
    const seen = itemsOf(billing).find((entry) => entry.messageId === intrusion.messageId);
    expect(seen).toMatchObject({ reason: 'conflict', dispatchId: planners.dispatchId, origin: 'billing' });
    const told = JSON.stringify(billing.body);
    for (const secret of ['planner', 'the planner-only secret goal', 'desk']) expect(told).not.toContain(secret);
    // A message whose sender may not speak for the origin it names is no origin's own: the operator's alone.
    expect(told).not.toContain(forged.messageId);
    expect(await get(`/dispatches/${planners.dispatchId}`, BILLING)).toEqual({ status: 404, body: { code: 'not_found' } });

    // The owner's view and list name neither the other origin's message nor the forged one.
    const view = await get(`/dispatches/${planners.dispatchId}`, PLANNER);
    expect((view.body as { conflicts: unknown[] }).conflicts).toEqual([]);
    const plannerList = JSON.stringify((await get('/origins/planner/rejections', PLANNER, { limit: '100' })).body);
    for (const other of [intrusion.messageId, forged.messageId, 'billing']) expect(plannerList).not.toContain(other);
    // The operator's list has both, as before.
    const operator = JSON.stringify((await get('/rejections', OPERATOR, { limit: '100' })).body);
    for (const messageId of [intrusion.messageId, forged.messageId]) expect(operator).toContain(messageId);
  });
});
