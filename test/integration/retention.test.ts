import { EVIDENCE_CHECK_ITEM, EVIDENCE_MARK_ITEM, LATE_EVENT_ITEM, MESSAGE_ITEM, OPERATOR_RECEIPT_ITEM, PAST_ATTEMPT_ITEM, PRINCIPAL_ITEM, REJECTION_ITEM, STATE_ITEM, TARGET_ITEM } from '../../shared/adapters/item-kinds.js';
import { createHash } from 'node:crypto';
import { DeleteItemCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { Context, DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localHandlerEnvironment } from '../../local/clients.js';
import { LOCAL_REGION } from '../../local/engines/index.js';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { lambdaContext } from '../../local/runtime/context.js';
import { StreamEventSource } from '../../local/runtime/stream-event-source.js';

import { legacySealedKey, payloadFolder } from '../../shared/ledger/objects.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { S3ObjectSweeper } from '../../shared/adapters/s3-retention.js';
import { InboxTable } from '../../shared/adapters/inbox-table.js';
import { LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import { route, type ApiDeps } from '../../shared/api/routes.js';
import { operatorReceipt } from '../../shared/dispatch/receipts.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { blocked } from '../../shared/dispatch/transitions/core.js';
import { takeDispatchMessage, type IntakeDeps } from '../../shared/usecases/intake.js';
import type { AcceptedMessage } from '../../shared/dispatch/records.js';
import { notStored } from '../../shared/ledger/port.js';
import { evidenceKey } from '../../shared/usecases/evidence-check.js';
import type { SubmitRequest, TargetPort } from '../../shared/targets/port.js';
import type { ApprovalOutcome, CancelOutcome, LookupOutcome, SubmitOutcome } from '../../shared/dispatch/target-answers.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { eventually } from '../support/eventually.js';
import { intakeDepsFactory, newDispatchFactory, NOW, operatorReceiptBodyFactory, overriding } from '../support/factories.js';

/**
 * Issue 12, class 6: every ledger record expires, and the evidence bucket's objects of a record go
 * when DynamoDB's TTL removes it — from the stream's TTL REMOVE record, on fauxqs S3 and DynamoDB
 * Local. DynamoDB Local never deletes by TTL, so the tests delete the item themselves, take the REMOVE
 * record its stream really carries (as the local runtime hands it to Lambda handlers) and add the
 * `userIdentity` DynamoDB puts on the records of TTL deletions.
 */
type Handler = (event: DynamoDBStreamEvent, context: Context) => Promise<DynamoDBBatchResponse>;

const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: LOCAL_REGION, endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
const savedEnv = { ...process.env };
const RETENTION_SECONDS = 30 * 86_400;
const epoch = (at: string | Date): number => Math.floor(new Date(at).getTime() / 1000);

let tableName: string;
let bucket: string;
let table: LedgerTable;
let stream: StreamEventSource;
let handler: Handler;
const removals: DynamoDBRecord[] = [];

/** A target that takes every submission. */
class AcceptingTarget implements TargetPort {
  async submit(request: SubmitRequest): Promise<SubmitOutcome> {
    return { kind: 'accepted', runId: `r-${request.attempt}`, status: 'running', requestId: `q-${request.attempt}` };
  }
  async lookup(): Promise<LookupOutcome> {
    return { kind: 'unavailable', reason: 'not asked' };
  }
  async decideApproval(_runId: string, approvalId: string, decision: 'approve' | 'cancel'): Promise<ApprovalOutcome> {
    return { kind: 'decided', approvalId, decision };
  }
  async cancel(): Promise<CancelOutcome> {
    return { kind: 'cancelled', status: 'cancelled' };
  }
}

beforeAll(async () => {
  const ledger = await ensureLedgerTable(clients.dynamodb, uniqueName('retention'));
  tableName = ledger.name;
  bucket = await ensureBucket(clients.s3, uniqueName('retention'));
  table = new LedgerTable(documents, { tableName, retentionSeconds: RETENTION_SECONDS });
  await table.putTarget({ name: 'accepting', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
  // The handler's environment as the stack sets it, with the local endpoints; read once at import.
  Object.assign(process.env, localHandlerEnvironment(testEngines()), { EVIDENCE_BUCKET: bucket, LEDGER_TABLE_NAME: tableName, RETENTION_DAYS: String(RETENTION_SECONDS / 86_400), POWERTOOLS_LOG_LEVEL: 'WARN', POWERTOOLS_METRICS_DISABLED: 'true' });
  ({ handler } = await import('../../functions/retention/handler.js'));
  stream = new StreamEventSource({
    functionName: 'capture',
    handler: async (event) => {
      removals.push(...event.Records.filter((record) => record.eventName === 'REMOVE'));
    },
    streams: clients.streams,
    streamArn: ledger.streamArn,
    region: LOCAL_REGION,
  });
});
afterAll(() => {
  process.env = { ...savedEnv };
  clients.destroy();
  dynamodb.destroy();
});

const deps = (): IntakeDeps => intakeDepsFactory({ store: table, blobs: new S3Blobs(clients.s3, bucket), targetFor: () => new AcceptingTarget(), principals: table, now: () => NOW });
const send = (body: unknown, messageId = uniqueName('m')) => takeDispatchMessage(deps(), { messageId, body: typeof body === 'string' ? body : JSON.stringify(body), senderId: 'local' });
/** Over intake's 8 KB inline limit: spilled to the bucket. */
const large = (fill: string) => fill.repeat(9 * 1024);

async function objects(prefix = ''): Promise<string[]> {
  const keys: string[] = [];
  let token: string | undefined;
  do {
    const page = await clients.s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    keys.push(...(page.Contents ?? []).flatMap(({ Key }) => (Key ? [Key] : [])));
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return keys.sort();
}

/** An item as stored, read back by key with no codec. */
async function raw(key: { readonly pk: string; readonly sk: string }): Promise<Record<string, unknown>> {
  const { Item } = await documents.send(new GetCommand({ TableName: tableName, Key: key, ConsistentRead: true }));
  if (!Item) throw new Error(`no item ${key.pk}/${key.sk}`);
  return Item;
}

async function keptBodyOf(messageId: string): Promise<string> {
  const { bodyRef } = await raw(REJECTION_ITEM.key(messageId));
  if (typeof bodyRef !== 'string') throw new Error(`rejection ${messageId} kept no body`);
  return bodyRef;
}

async function anchorOf(dispatchId: string): Promise<AcceptedMessage> {
  const anchor = await table.getAcceptedMessage(dispatchId);
  if (!anchor) throw new Error(`no anchor for ${dispatchId}`);
  return anchor;
}

/**
 * A dispatch with everything it leaves in the bucket: its spilled task, the spill of a conflicting
 * message under its id (no record names it), evidence of two attempts, and the sealed copies a ledger
 * made before evidence was content-addressed.
 */
async function dispatchWithObjects(dispatchId: string): Promise<{ readonly taskRef: string; readonly objects: string[]; readonly conflictBody: string }> {
  expect((await send({ dispatchId, origin: 'planner', target: 'accepting', task: { notes: large('a') } })).outcome).toBe('submitted');
  const conflict = uniqueName('m');
  expect(await send({ dispatchId, origin: 'planner', target: 'accepting', task: { notes: large('b') } }, conflict)).toMatchObject({ outcome: 'rejected', reason: 'conflict' });
  const blobs = new S3Blobs(clients.s3, bucket);
  const filed: string[] = [];
  for (const attempt of [1, 2]) {
    const bytes = `report of attempt ${attempt}`;
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const evidence = evidenceKey(dispatchId, attempt, sha256, 'out/report.md');
    const sealed = legacySealedKey(dispatchId, attempt, 'out/report.md', sha256);
    await blobs.put(evidence, bytes, 'text/markdown');
    await blobs.put(sealed, bytes, 'application/octet-stream');
    filed.push(evidence, sealed);
  }
  const anchor = await anchorOf(dispatchId);
  const taskRef = anchor.content.valid ? anchor.content.taskRef : null;
  if (!taskRef) throw new Error('the task was not spilled');
  // Both spills, the anchor's task and the conflicting message's, under the dispatch's payload folder.
  const spills = await objects(payloadFolder(dispatchId));
  expect(spills).toHaveLength(2);
  expect(spills).toContain(taskRef);
  return { taskRef, objects: [...spills, ...filed].sort(), conflictBody: await keptBodyOf(conflict) };
}

/** Deletes an item as a person would (DeleteItem) and returns the REMOVE record the table's stream carries for it, as Lambda delivers it. */
async function removalOf(key: { readonly pk: string; readonly sk: string }): Promise<DynamoDBRecord> {
  await dynamodb.send(new DeleteItemCommand({ TableName: tableName, Key: marshall(key) }));
  return eventually(`the REMOVE record of ${key.pk}/${key.sk}`, async () => {
    await stream.pollOnce();
    return removals.find((record) => record.dynamodb?.Keys?.pk?.S === key.pk && record.dynamodb.Keys.sk?.S === key.sk);
  });
}

/** The same record as DynamoDB writes it when its TTL deleted the item. */
const byTtl = (record: DynamoDBRecord): DynamoDBRecord => ({ ...record, userIdentity: { type: 'Service', principalId: 'dynamodb.amazonaws.com' } });

const invoke = (...records: DynamoDBRecord[]) => handler({ Records: records }, lambdaContext('retention', 60_000, LOCAL_REGION));

describe('nothing forgotten: a dispatch\'s objects go when its anchor expires (retention handler, fauxqs S3)', () => {
  it('deletes nothing when a person deletes the anchor (a REMOVE without the TTL identity)', async () => {
    const dispatchId = uniqueName('d');
    const { objects: mine } = await dispatchWithObjects(dispatchId);
    const before = await objects();
    const removal = await removalOf(MESSAGE_ITEM.key(dispatchId));
    expect(removal.userIdentity).toBeUndefined();
    expect(removal.dynamodb?.OldImage?.sk).toEqual({ S: 'MSG' });

    expect(await invoke(removal)).toEqual({ batchItemFailures: [] });
    expect(await objects()).toEqual(before);
    expect(before).toEqual(expect.arrayContaining(mine));
  });

  it('deletes exactly the expired dispatch\'s task, conflicting spill, evidence of every attempt and sealed copies; another dispatch\'s objects and the rejection\'s body stay', async () => {
    const dispatchId = uniqueName('d');
    // An id the expired one is a prefix of: only a folder ending in "/" keeps its objects apart.
    const neighbour = `${dispatchId}0`;
    const expiring = await dispatchWithObjects(dispatchId);
    const staying = await dispatchWithObjects(neighbour);
    expect(expiring.objects).toHaveLength(6);
    expect(expiring.objects).toContain(expiring.taskRef);
    const before = await objects();

    // Its state is gone by then (TTL removes it before the anchor, which outlives it).
    await dynamodb.send(new DeleteItemCommand({ TableName: tableName, Key: marshall(STATE_ITEM.key(dispatchId)) }));
    const removal = byTtl(await removalOf(MESSAGE_ITEM.key(dispatchId)));
    expect(await invoke(removal)).toEqual({ batchItemFailures: [] });

    const after = await objects();
    expect(before.filter((key) => !after.includes(key))).toEqual(expiring.objects);
    expect(after).toEqual(expect.arrayContaining([...staying.objects, expiring.conflictBody, staying.conflictBody]));
    // Objects only: the anchor is not put back for a dispatch whose records are gone.
    expect(await table.getAcceptedMessage(dispatchId)).toBeUndefined();
    // A retried record (the stream retries a failed batch) finds nothing left and succeeds.
    expect(await invoke(removal)).toEqual({ batchItemFailures: [] });
    expect(await objects()).toEqual(after);
  });

  it('keeps every object, and puts the anchor back with a later expiry, when the anchor expires while the dispatch lives on (was: a months-long run lost its task and evidence)', async () => {
    const dispatchId = uniqueName('d');
    const { objects: mine } = await dispatchWithObjects(dispatchId);
    const anchor = await anchorOf(dispatchId);
    expect(await invoke(byTtl(await removalOf(MESSAGE_ITEM.key(dispatchId))))).toEqual({ batchItemFailures: [] });
    expect(await objects()).toEqual(expect.arrayContaining(mine));
    const restored = await documents.send(new GetCommand({ TableName: tableName, Key: MESSAGE_ITEM.key(dispatchId), ConsistentRead: true }));
    expect(restored.Item?.contentHash).toBe(anchor.contentHash);
    expect(Number(restored.Item?.expiresAt)).toBeGreaterThan(Math.floor(Date.now() / 1000) + RETENTION_SECONDS);
  });

  it('keeps the objects when the id was taken again by a new dispatch before the old anchor\'s removal was processed', async () => {
    const dispatchId = uniqueName('d');
    const { objects: mine } = await dispatchWithObjects(dispatchId);
    await dynamodb.send(new DeleteItemCommand({ TableName: tableName, Key: marshall(STATE_ITEM.key(dispatchId)) }));
    const removal = byTtl(await removalOf(MESSAGE_ITEM.key(dispatchId)));
    // A new dispatch under the same id (its objects share the folders), caught between its anchor and
    // its first state write: only its anchor says the id is taken.
    const crashing = overriding<LedgerTable>(table, {
      commit: async (): Promise<never> => {
        throw new Error('injected crash before the state write');
      },
    });
    await expect(takeDispatchMessage({ ...deps(), store: crashing }, { messageId: uniqueName('m'), body: JSON.stringify({ dispatchId, origin: 'planner', target: 'accepting', task: { again: true } }), senderId: 'local' })).rejects.toThrow('injected crash');
    expect(await table.getState(dispatchId)).toBeUndefined();
    expect(await invoke(removal)).toEqual({ batchItemFailures: [] });
    expect(await objects()).toEqual(expect.arrayContaining(mine));
  });

  it('deletes an invalid message\'s kept body with its anchor', async () => {
    const dispatchId = uniqueName('d');
    expect(await send({ dispatchId, origin: 'planner', target: 'accepting', task: 'not an object', notes: large('c') })).toMatchObject({ outcome: 'blocked' });
    await dynamodb.send(new DeleteItemCommand({ TableName: tableName, Key: marshall(STATE_ITEM.key(dispatchId)) }));
    const anchor = await anchorOf(dispatchId);
    const bodyRef = anchor.content.valid ? null : anchor.content.bodyRef;
    expect(bodyRef?.startsWith(payloadFolder(dispatchId))).toBe(true);
    expect(await objects(payloadFolder(dispatchId))).toEqual([bodyRef]);

    expect(await invoke(byTtl(await removalOf(MESSAGE_ITEM.key(dispatchId))))).toEqual({ batchItemFailures: [] });
    expect(await objects(payloadFolder(dispatchId))).toEqual([]);
  });
});

describe('retention plans every prefix the ledger writes a dispatch\'s objects under (CONTRACT §7 V3)', () => {
  /** The API's router with the same table and bucket, the target routes open (as locally). */
  const apiDeps = (): ApiDeps => ({
    store: table,
    blobs: new S3Blobs(clients.s3, bucket),
    feeds: new LedgerFeedsTable(documents, { tableName, retentionSeconds: RETENTION_SECONDS, now: () => NOW }),
    inbox: new InboxTable(documents, { tableName, retentionSeconds: RETENTION_SECONDS }),
    principals: table,
    principalMode: 'open',
    targetFor: () => new AcceptingTarget(),
    callbackUrl: 'http://127.0.0.1:9',
    retryPolicy: DEFAULT_RETRY_POLICY,
    now: () => NOW,
    claimSeconds: 60,
  });
  async function call(method: string, path: string, body: string, contentType: string): Promise<number> {
    const [rawPath = '', search = ''] = path.split('?');
    const response = await route(apiDeps(), { method, rawPath, query: Object.fromEntries(new URLSearchParams(search)), headers: { 'content-type': contentType, 'x-ledger-origin': 'planner' }, body: Buffer.from(body), iamUserId: undefined });
    return response.statusCode;
  }
  /** Every object in the bucket that belongs to the dispatch: a key with the dispatch id as one of its segments, whatever its prefix. */
  const objectsOfDispatch = async (dispatchId: string): Promise<string[]> => (await objects()).filter((key) => key.split('/').includes(dispatchId));

  it('leaves no object of an expired dispatch under any prefix: spilled task, conflicting spill, evidence, sealed copy and spilled result body (was: results/{id}/ was never planned, so spilled result bodies were kept forever)', async () => {
    const dispatchId = uniqueName('d');
    const { objects: written } = await dispatchWithObjects(dispatchId);
    // The run ends through the API as a target ends it: its evidence uploaded, then a final event whose
    // result body is over the 8 KB inline limit (CONTRACT §10), stored once in the bucket.
    expect(await call('PUT', `/dispatches/${dispatchId}/evidence/out/final.md?runId=r-1`, 'the final report', 'text/markdown')).toBe(201);
    expect(await call('POST', '/runs/r-1/events', JSON.stringify({ dispatchId, seq: 1, type: 'completed', result: { summary: 'done', body: { notes: large('r') } } }), 'application/json')).toBe(202);
    const before = await objectsOfDispatch(dispatchId);
    // Every kind the ledger writes for a dispatch is there: payloads, evidence, sealed copies and the result body.
    expect(new Set(before.map((key) => key.split('/')[0]))).toEqual(new Set(['payloads', 'evidence', 'sealed', 'results']));
    expect(before).toEqual(expect.arrayContaining(written));

    // Past retention: the dispatch's state is gone, then TTL removes its anchor.
    await dynamodb.send(new DeleteItemCommand({ TableName: tableName, Key: marshall(STATE_ITEM.key(dispatchId)) }));
    expect(await invoke(byTtl(await removalOf(MESSAGE_ITEM.key(dispatchId))))).toEqual({ batchItemFailures: [] });

    expect(await objectsOfDispatch(dispatchId)).toEqual([]);
  });
});

describe('nothing forgotten: a rejection\'s kept body goes when the rejection expires', () => {
  it('deletes the body of the rejection TTL removed, and keeps one a person deleted and one still recorded', async () => {
    const [expiring, deletedByHand, recorded] = [uniqueName('m'), uniqueName('m'), uniqueName('m')];
    for (const messageId of [expiring, deletedByHand, recorded]) expect((await send(large('not json '), messageId)).outcome).toBe('rejected');
    const [expiringBody, ...others] = [await keptBodyOf(expiring), await keptBodyOf(deletedByHand), await keptBodyOf(recorded)];
    const before = await objects();
    expect(before).toEqual(expect.arrayContaining([expiringBody, ...others]));

    expect(await invoke(await removalOf(REJECTION_ITEM.key(deletedByHand)), byTtl(await removalOf(REJECTION_ITEM.key(expiring))))).toEqual({ batchItemFailures: [] });
    expect(await objects()).toEqual(before.filter((key) => key !== expiringBody));
  });
});

describe('nothing forgotten: the S3 sweeper', () => {
  it('deletes a folder larger than one listing page, page by page, and nothing outside it', async () => {
    const dispatchId = uniqueName('d');
    const blobs = new S3Blobs(clients.s3, bucket);
    for (let n = 0; n < 5; n += 1) await blobs.put(evidenceKey(dispatchId, 1, 'f'.repeat(64), `out/${n}.md`), 'x', 'text/markdown');
    await blobs.put(evidenceKey(`${dispatchId}0`, 1, 'f'.repeat(64), 'out/0.md'), 'x', 'text/markdown');
    const sweeper = new S3ObjectSweeper(clients.s3, bucket, 2);

    expect(await sweeper.deleteFolder(`evidence/${dispatchId}/`)).toBe(5);
    expect(await objects(`evidence/${dispatchId}`)).toEqual([evidenceKey(`${dispatchId}0`, 1, 'f'.repeat(64), 'out/0.md')]);
    // Already gone is deleted: a retry succeeds.
    expect(await sweeper.deleteKeys([evidenceKey(dispatchId, 1, 'f'.repeat(64), 'out/0.md')])).toBe(1);
    await expect(sweeper.deleteFolder('evidence')).rejects.toThrow(RangeError);
    await expect(sweeper.deleteFolder('')).rejects.toThrow(RangeError);
  });
});

describe('nothing forgotten: every ledger record carries its expiry (LedgerTable on DynamoDB Local)', () => {
  it('sets expiresAt on the final state, the anchor, past attempts, checks, marks, late events, operator receipts and rejections', async () => {
    const dispatchId = uniqueName('d');
    const at = NOW.toISOString();
    const R = RETENTION_SECONDS;
    // A live state never expires (TTL would remove a dispatch under way); a final one does.
    const running = uniqueName('d');
    const start = accepted(newDispatchFactory({ dispatchId: running, target: 'accepting' }), NOW);
    await table.commit(notStored(start), submitted(start, { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q-1' }, DEFAULT_RETRY_POLICY, NOW));
    expect((await raw(STATE_ITEM.key(running))).expiresAt).toBeUndefined();
    const unsent = accepted(newDispatchFactory({ dispatchId, target: 'accepting' }), NOW);
    const final = blocked(unsent, 'unknown_target', 'no such target', NOW);
    await table.commit(notStored(unsent), final);
    const anchor = { dispatchId, origin: 'planner', contentHash: 'sha256:ab', messageId: 'm-1', senderId: null, receivedAt: at, claimUntil: at, content: { valid: false as const, target: null, errors: [], bodyPreview: '{}', bodyRef: null, bodyBytes: 2 } };
    await table.putAcceptedMessage(anchor);
    await table.archiveAttempt({ dispatchId, attempt: 1, runId: 'r-1', receipts: [], execution: final.execution, endedAt: at, reason: 'retry it', superseded: true, stateVersion: 1 });
    await table.putEvidenceCheck({ dispatchId, origin: 'planner', target: 'accepting', runId: 'r-1', attempt: 1, outcome: 'unverified', expected: [], found: [], missing: [], invalid: [], checkedAt: at, files: [], error: null });
    await table.putEvidenceMark({ dispatchId, attempt: 1, ref: 'out/a.md', status: 'invalid', reason: 'wrong file', at });
    await table.recordLateEvent({ dispatchId, runId: 'r-1', seq: 3, type: 'completed', at });
    const receipt = operatorReceipt({ dispatchId, origin: 'planner' }, operatorReceiptBodyFactory(), NOW);
    await table.putOperatorReceipt(receipt);
    const messageId = uniqueName('m');
    await table.putRejection({ messageId, at, reason: 'not_json', dispatchId: null, origin: null, senderId: null, bodyPreview: '{', bodyRef: null, bodyBytes: 1 });

    const expiries = {
      state: (await raw(STATE_ITEM.key(dispatchId))).expiresAt,
      anchor: (await raw(MESSAGE_ITEM.key(dispatchId))).expiresAt,
      pastAttempt: (await raw(PAST_ATTEMPT_ITEM.key(dispatchId, 1, 1))).expiresAt,
      check: (await raw(EVIDENCE_CHECK_ITEM.key(dispatchId, 1))).expiresAt,
      mark: (await raw(EVIDENCE_MARK_ITEM.key(dispatchId, 1, 'out/a.md'))).expiresAt,
      lateEvent: (await raw(LATE_EVENT_ITEM.key(dispatchId, 'r-1', 3))).expiresAt,
      operatorReceipt: (await raw(OPERATOR_RECEIPT_ITEM.key(dispatchId, receipt.receiptId))).expiresAt,
      rejection: (await raw(REJECTION_ITEM.key(messageId))).expiresAt,
    };
    // The retention after the record was written (the state: after it became final); twice that for
    // the anchor and the records that must outlive the state.
    expect(expiries).toEqual({
      state: epoch(final.updatedAt) + R,
      anchor: epoch(at) + 2 * R,
      pastAttempt: epoch(at) + 2 * R,
      check: epoch(at) + R,
      mark: epoch(at) + R,
      lateEvent: epoch(at) + 2 * R,
      operatorReceipt: epoch(receipt.recordedAt) + R,
      rejection: epoch(at) + R,
    });
  });

  it('sets no expiry on registry items: targets and principals are configuration, not records of a dispatch', async () => {
    // A registration serves every dispatch for as long as it stands; expiring it would silently
    // unregister a target or strip a principal of its origin. It changes only by `ledger registry`.
    const name = `t-${uniqueName('x').slice(2)}`;
    await table.putTarget({ name, kind: 'http', baseUrl: 'http://127.0.0.1:9' });
    await table.putPrincipal('AROAEXAMPLERETENTION', { role: 'operator' });
    expect((await raw(TARGET_ITEM.key(name))).expiresAt).toBeUndefined();
    expect((await raw(PRINCIPAL_ITEM.key('AROAEXAMPLERETENTION'))).expiresAt).toBeUndefined();
  });
});
