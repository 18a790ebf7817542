import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_RUN_ID_CHARS, ROUTES, routePath } from '@dispatch-ledger/protocol';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { route, type ApiDeps } from '../../shared/api/routes.js';
import { takeDispatchMessage } from '../../shared/usecases/intake.js';
import { engineClients, loopbackOnly, testEngines, uniqueName } from '../support/engines.js';
import { intakeDepsFactory } from '../support/factories.js';
import { ledgerApiDeps } from '../support/api-deps.js';
import { ScriptedTarget } from '../support/scripted-target.js';

/**
 * CONTRACT §17: a durable execution's ARN is its run id — up to 1,024 characters, with `/` in it — and
 * every route that carries a run id takes one (events, control, evidence uploads, slot release), on
 * DynamoDB Local: a run id is part of a sort key only as its digest where it would not fit.
 */
const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
const NOW = new Date('2026-12-01T12:00:00.000Z');
const target = new ScriptedTarget();
let table: LedgerTable;
let tableName: string;
let blobs: S3Blobs;

/** A durable execution's ARN, padded to exactly the bound: `/` separates its parts. */
function durableArn(dispatchId: string): string {
  const head = `arn:aws:lambda:us-east-1:111122223333:function:review:7/durable-execution/${dispatchId}_1/`;
  return head + 'e'.repeat(MAX_RUN_ID_CHARS - head.length);
}

const api = (): ApiDeps => ledgerApiDeps({ table, documents, tableName, blobs, targetFor: () => target, now: () => NOW });
const call = async (method: string, rawPath: string, query: Record<string, string>, body: unknown, as: Record<string, string> = { 'x-ledger-origin': 'planner' }) => {
  const answer = await route(api(), { method, rawPath, query, headers: as, body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body)), iamUserId: undefined });
  return { status: answer.statusCode, body: JSON.parse(answer.body) as Record<string, unknown> };
};

beforeAll(async () => {
  tableName = uniqueName('long-runs');
  await ensureLedgerTable(clients.dynamodb, tableName);
  table = new LedgerTable(documents, { tableName, retentionSeconds: 86_400 });
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('long-runs-blobs')));
  await table.putTarget({ name: 'review', kind: 'http', baseUrl: 'http://127.0.0.1:9', maxConcurrentRuns: 1 });
});
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

describe('a run id of 1,024 characters with `/` in it', () => {
  it('is taken by the events, control, evidence and slot-release routes, and kept whole (was: refused above 256 characters)', async () => {
    const dispatchId = uniqueName('d').replace(/[^A-Za-z0-9-]/g, '-');
    const runId = durableArn(dispatchId);
    expect(runId.length).toBe(MAX_RUN_ID_CHARS);
    target.answer = () => ({ kind: 'accepted', runId, status: 'running', requestId: 'q-1' });
    await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor: () => target, now: () => NOW }), {
      messageId: uniqueName('m'),
      body: JSON.stringify({ dispatchId, origin: 'planner', target: 'review', task: { goal: 'review' }, expectedEvidence: ['out/report.md'] }),
      senderId: 'test',
    });
    expect(await table.getState(dispatchId)).toMatchObject({ phase: 'submitted', runId });

    // The path carries it percent-encoded in one segment, as the protocol's own path builder writes it.
    const events = routePath(ROUTES.postRunEvent, { runId });
    expect(events.split('/')).toHaveLength(4);
    expect((await call('POST', events, {}, { dispatchId, seq: 1, type: 'progress' })).status).toBe(200);
    const control = await call('GET', routePath(ROUTES.getRunControl, { runId }), { dispatchId }, undefined);
    expect(control).toMatchObject({ status: 200, body: { runId, superseded: false } });
    const upload = await call('PUT', routePath(ROUTES.putEvidence, { dispatchId, ref: 'out/report.md' }), { runId }, Buffer.from('# report\n'));
    expect(upload).toMatchObject({ status: 201, body: { runId, ref: 'out/report.md' } });
    expect((await call('POST', events, {}, { dispatchId, seq: 2, type: 'completed', result: { summary: 'done' } })).body).toMatchObject({ applied: true });
    expect((await table.getState(dispatchId))?.execution.status).toBe('completed');

    // One character more is refused at the edge, with the bound named.
    await expect(call('POST', routePath(ROUTES.postRunEvent, { runId: `${runId}e` }), {}, { dispatchId, seq: 3, type: 'heartbeat' })).rejects.toMatchObject({ code: 'malformed', message: `a run id is 1..${MAX_RUN_ID_CHARS} characters` });
    await expect(call('GET', routePath(ROUTES.getRunControl, { runId: `${runId}e` }), { dispatchId }, undefined)).rejects.toMatchObject({ code: 'malformed' });
  });

  it('a late event of such a run is kept, keyed by its digest, the run id whole in the item (was: a sort key over DynamoDB’s 1,024 bytes)', async () => {
    const dispatchId = uniqueName('d').replace(/[^A-Za-z0-9-]/g, '-');
    const runId = durableArn(dispatchId);
    target.answer = (request) => ({ kind: 'accepted', runId: request.attempt === 1 ? runId : `r-${request.attempt}`, status: 'running', requestId: `q-${request.attempt}` });
    await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor: () => target, now: () => NOW }), {
      messageId: uniqueName('m'),
      body: JSON.stringify({ dispatchId, origin: 'planner', target: 'review', task: { goal: 'review' } }),
      senderId: 'test',
    });
    // Its slot released by an operator naming the run (the body carries it).
    target.lookup = async () => ({ kind: 'not_found' });
    const released = await call('POST', routePath(ROUTES.releaseSlot, { target: 'review' }), {}, { runId, dispatchId, reason: 'the execution is gone' });
    expect(released.status).toBe(200);
    // Superseded by a forced redispatch: its next event is late.
    expect((await call('POST', `/dispatches/${dispatchId}/redispatch`, {}, { reason: 'again', force: true })).status).toBe(202);
    expect((await call('POST', routePath(ROUTES.postRunEvent, { runId }), {}, { dispatchId, seq: 5, type: 'heartbeat' })).body).toMatchObject({ applied: false, late: true });
    const { Items = [] } = await documents.send(new QueryCommand({ TableName: tableName, KeyConditionExpression: 'pk = :pk AND begins_with(sk, :late)', ExpressionAttributeValues: { ':pk': `D#${dispatchId}`, ':late': 'LATE#' }, ConsistentRead: true }));
    expect(Items.map((item) => ({ runId: item.runId, short: Buffer.byteLength(String(item.sk)) < 100 }))).toEqual([{ runId, short: true }]);
  });
});
