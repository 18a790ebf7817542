import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { InboxTable } from '../../shared/adapters/inbox-table.js';
import { LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import type { Caller } from '../../shared/api/caller.js';
import { errorResponse, MAX_ERROR_MESSAGE_BYTES } from '../../shared/api/http.js';
import { MAX_API_BODY_DEPTH, postRunEvent } from '../../shared/api/lifecycle-routes.js';
import { route } from '../../shared/api/routes.js';
import { slotTotals } from '../../shared/dispatch/slots.js';
import { takeDispatchMessage, type IntakeDeps } from '../../shared/usecases/intake.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { intakeDepsFactory } from '../support/factories.js';
import { ScriptedTarget } from '../support/scripted-target.js';
import { apiError } from '../support/api-error.js';
import { withUnprocessedKeys } from '../support/unprocessed-keys.js';

/**
 * Issue 12's classes on the surfaces built after its hardening (the results inbox, flow control, the
 * operator routes): a review found instances of classes 1 and 9 there. DynamoDB Local and fauxqs S3.
 */
const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
const RETENTION = 30 * 86_400;
let tableName: string;
let table: LedgerTable;
let blobs: S3Blobs;
const clock = new Date('2026-12-01T10:00:00Z');
const target = new ScriptedTarget();

beforeAll(async () => {
  tableName = uniqueName('surfaces');
  await ensureLedgerTable(clients.dynamodb, tableName);
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('blobs')));
  table = new LedgerTable(documents, { tableName, retentionSeconds: RETENTION });
  await table.putTarget({ name: 'scripted', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
});
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

const deps = (): IntakeDeps => intakeDepsFactory({ store: table, blobs, targetFor: () => target, principals: table, now: () => clock });
const open: Caller = { kind: 'open', origin: undefined };
const send = (dispatchId: string) =>
  takeDispatchMessage(deps(), { messageId: uniqueName('m'), body: JSON.stringify({ dispatchId, origin: 'planner', target: 'scripted', task: { behavior: 'complete' } }), senderId: 'local' });
/** A final event whose `result.body` is `bodyJson` as written (JSON.stringify cannot write the deepest). */
const finalEvent = (dispatchId: string, bodyJson: string) => Buffer.from(`{"dispatchId":${JSON.stringify(dispatchId)},"seq":1,"type":"completed","result":{"summary":"done","body":${bodyJson}}}`);
const apiRoute = (method: string, rawPath: string, body?: unknown, origin = 'planner') =>
  route(
    { ...deps(), feeds: new LedgerFeedsTable(documents, { tableName, retentionSeconds: RETENTION }), inbox: new InboxTable(documents, { tableName, retentionSeconds: RETENTION }) },
    { method, rawPath, query: {}, headers: { 'x-ledger-origin': origin }, body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)), iamUserId: undefined },
  );

/** `levels` nested arrays around a leaf, as JSON: `[[[…1…]]]` (the outermost is level 1). */
const arraysNested = (levels: number): string => `${'['.repeat(levels)}1${']'.repeat(levels)}`;

describe('input that broke a writer (the result body of a final event)', () => {
  it('answers 422 too_deep to a result.body nested 20,000 levels, about 40 KB (was: JSON.stringify overflowed the stack, a 500 the target retried)', async () => {
    const dispatchId = uniqueName('d');
    await send(dispatchId);
    const runId = (await table.getState(dispatchId))?.runId as string;
    const error = await apiError(postRunEvent(deps(), runId, finalEvent(dispatchId, arraysNested(20_000)), open));
    expect(error.statusCode).toBe(422);
    expect(error.message).toContain('too_deep');
    // Nothing was recorded: the run is still live, the event can be sent again with a body that fits.
    expect((await table.getState(dispatchId))?.execution.status).not.toBe('completed');
  });

  it('takes any result.body the body bound allows (CONTRACT §2: any JSON ≤ 256 KB), 998 levels inside the event, and refuses one level more', async () => {
    // The event is level 1, `result` level 2, the body's outermost array level 3.
    const deepest = MAX_API_BODY_DEPTH - 2;
    const deep = uniqueName('d');
    await send(deep);
    const deepRun = (await table.getState(deep))?.runId as string;
    expect((await apiError(postRunEvent(deps(), deepRun, finalEvent(deep, arraysNested(deepest + 1)), open))).statusCode).toBe(422);
    const fits = uniqueName('d');
    await send(fits);
    const fitsRun = (await table.getState(fits))?.runId as string;
    expect((await postRunEvent(deps(), fitsRun, finalEvent(fits, arraysNested(deepest)), open)).status).toBe(202);
    expect((await table.getState(fits))?.execution.status).toBe('completed');
  });
});

describe('API answers: error texts stay bounded whatever the path', () => {
  // Quotes double under JSON escaping; a decoded CJK character is 3 bytes of UTF-8 in one UTF-16 unit.
  const long = `${'"'.repeat(6_000)}${'中'.repeat(6_000)}`;
  // A POST carries a body its route takes, so the path is what the answer is about.
  it.each([
    ['an inbox ack of a 12,000-character result id', 'POST', `/origins/planner/inbox/${long}/ack`, { claimToken: 't-1' }],
    ['an inbox body of a 12,000-character result id', 'GET', `/origins/planner/inbox/${long}/body`, undefined],
    ['a dispatch view of a 12,000-character id', 'GET', `/dispatches/${long}`, undefined],
    ['a path no route takes', 'GET', `/nowhere/${long}`, undefined],
    ['a slot release on a 12,000-character target name', 'POST', `/targets/${long}/slots/release`, { runId: 'r-1', reason: 'gone' }],
  ])('answers %s with an error body under 1 KB (was: the whole path segment echoed)', async (_name, method, path, body) => {
    const error = await apiError(apiRoute(method, path, body));
    expect(error.statusCode).toBeGreaterThanOrEqual(400);
    expect(Buffer.byteLength(error.message, 'utf8')).toBeLessThanOrEqual(MAX_ERROR_MESSAGE_BYTES);
    expect(Buffer.byteLength(errorResponse(error).body, 'utf8')).toBeLessThan(1024);
  });
});

describe('API answers: BatchGetItem unprocessed keys are read again with backoff (flow control\'s slot shards)', () => {
  it('reads every slot shard of a limited target, waiting 50, 100, 200 ms between rounds (was: five rounds back to back, then an error)', async () => {
    const limited = uniqueName('limited').toLowerCase();
    await table.putTarget({ name: limited, kind: 'http', baseUrl: 'http://127.0.0.1:9', maxConcurrentRuns: 40 });
    const shards = (await table.slotShards(limited)).length;
    expect(shards).toBeGreaterThan(1);
    const faulty = withUnprocessedKeys(3);
    try {
      const slept: number[] = [];
      const throttled = new LedgerTable(faulty.documents, { tableName, retentionSeconds: RETENTION, sleep: async (ms: number) => void slept.push(ms) });
      const read = await throttled.slotShards(limited);
      expect(read).toHaveLength(shards);
      expect(slotTotals(read).limit).toBe(40);
      expect(slept).toEqual([50, 100, 200]);
    } finally {
      faulty.destroy();
    }
  });

  it('fails the read (a 5xx to retry) rather than admit against slot shards it could not read', async () => {
    const limited = uniqueName('limited').toLowerCase();
    await table.putTarget({ name: limited, kind: 'http', baseUrl: 'http://127.0.0.1:9', maxConcurrentRuns: 40 });
    const faulty = withUnprocessedKeys(Infinity, 0);
    try {
      const slept: number[] = [];
      const throttled = new LedgerTable(faulty.documents, { tableName, retentionSeconds: RETENTION, sleep: async (ms: number) => void slept.push(ms) });
      await expect(throttled.slotShards(limited)).rejects.toThrow(/stayed unprocessed after 6 BatchGetItem rounds/);
      expect(slept).toEqual([50, 100, 200, 400, 800]);
    } finally {
      faulty.destroy();
    }
  });
});
