import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { CapacityMeter } from '../../bench/capacity-meter.js';
import { httpTarget } from '../../shared/adapters/http-target.js';
import { HotPathTable } from '../../shared/adapters/hot-path-table.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { takeDispatchMessage, type IntakeDeps } from '../../shared/usecases/intake.js';
import type { BlobStore } from '../../shared/ledger/port.js';
import { cachedPrincipals } from '../../shared/principals/principals.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { intakeDepsFactory } from '../support/factories.js';

/**
 * The intake's design is three sequential round trips per message (CONTRACT §14: the anchor's
 * conditional put, the submission, the state's conditional put). This counts them — operations, not
 * time — in the common case: a valid message from a registered principal (enforce mode) to a registered
 * target without maxConcurrentRuns, with the intake's caches composed as functions/intake/deps.ts does.
 */
const clients = engineClients();
const meter = new CapacityMeter();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
meter.attach(dynamodb);
/** The intake's puts go out on a client of their own (HotPathTable), metered as well. */
const hotPath = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' }, cacheMiddleware: true }));
meter.attach(hotPath);
const SENDER = 'AROAPLANNERROLE:planner-1';
let table: LedgerTable;
let blobs: BlobStore;
let blobCalls = 0;
let submissions = 0;
let server: Server;
let baseUrl: string;

beforeAll(async () => {
  const tableName = uniqueName('round-trips');
  await ensureLedgerTable(clients.dynamodb, tableName);
  const s3 = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('blobs')));
  // Every blob store call counted (none is expected for a small task).
  blobs = {
    put: (...args) => ((blobCalls += 1), s3.put(...args)),
    getText: (...args) => ((blobCalls += 1), s3.getText(...args)),
    getBytes: (...args) => ((blobCalls += 1), s3.getBytes(...args)),
  };
  server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      submissions += 1;
      response.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ runId: `r-${submissions}`, status: 'queued' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const setup = new LedgerTable(DynamoDBDocumentClient.from(clients.dynamodb), { tableName, retentionSeconds: 86_400 });
  await setup.putTarget({ name: 'counted-agent', kind: 'http', baseUrl });
  await setup.putPrincipal('AROAPLANNERROLE', { role: 'origin', origin: 'planner' });
  // As the intake function composes it: registrations and principals reused for 30 s.
  table = new HotPathTable(DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } }), { tableName, retentionSeconds: 86_400, targetCacheMs: 30_000 }, hotPath);
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  clients.destroy();
  dynamodb.destroy();
  hotPath.destroy();
});

describe('intake round trips per message', () => {
  it('are three in the common case: the anchor put, the submission, the state put — the registry read once per batch, then cached', async () => {
    const deps: IntakeDeps = intakeDepsFactory({
      store: table,
      blobs,
      targetFor: (registration) => httpTarget(registration),
      principals: cachedPrincipals(table, 30_000),
      principalMode: 'enforce',
      now: () => new Date(),
    });
    const batch = () =>
      Array.from({ length: 10 }, () => {
        const body = JSON.stringify({ dispatchId: uniqueName('d'), origin: 'planner', target: 'counted-agent', task: { goal: 'summarise', behavior: 'complete' } });
        return takeDispatchMessage(deps, { messageId: uniqueName('m'), body, senderId: SENDER, sentAt: new Date().toISOString() });
      });

    // A cold batch of 10, as the BatchProcessor runs it (concurrently): the sender resolved once (its
    // role session's id, then its role's) and the registration read once, shared by the 10; two writes each.
    let before = meter.snapshot();
    const cold = await Promise.all(batch());
    let spent = meter.since(before);
    expect(cold.map((result) => result.outcome)).toEqual(Array(10).fill('submitted'));
    expect(spent.byOperation.GetItem?.requests).toBe(3);
    expect(spent.byOperation.PutItem?.requests).toBe(20);
    expect(spent.requests).toBe(23);

    // Warm: exactly 2 DynamoDB writes and 1 submission per message, nothing else.
    before = meter.snapshot();
    const submittedBefore = submissions;
    const warm = await Promise.all(batch());
    spent = meter.since(before);
    expect(warm.map((result) => result.outcome)).toEqual(Array(10).fill('submitted'));
    expect(Object.keys(spent.byOperation)).toEqual(['PutItem']);
    expect(spent.requests).toBe(20);
    expect(spent.byOperation.PutItem?.failedConditions).toBe(0);
    expect(submissions - submittedBefore).toBe(10);
    expect(blobCalls).toBe(0);
  });
});
