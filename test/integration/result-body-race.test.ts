import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { InboxTable } from '../../shared/adapters/inbox-table.js';
import { LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import type { Caller } from '../../shared/api/caller.js';
import { postRunEvent } from '../../shared/api/lifecycle-routes.js';
import { route } from '../../shared/api/routes.js';
import type { DispatchState, NextState } from '../../shared/dispatch/state.js';
import type { StoredState } from '../../shared/ledger/port.js';
import { takeDispatchMessage, type IntakeDeps } from '../../shared/usecases/intake.js';
import type { ResultBody } from '../../shared/dispatch/records.js';
import { resultBodyKey } from '../../shared/ledger/objects.js';
import { INLINE_BODY_BYTES, resultBodyDigest } from '../../shared/usecases/result-body.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { intakeDepsFactory, overriding } from '../support/factories.js';
import { ScriptedTarget } from '../support/scripted-target.js';

/**
 * CONTRACT §10: a result is never ready with its body missing — nor with another body than the one
 * its state records. Two final events of one run with the same seq and different bodies, raced on
 * DynamoDB Local and fauxqs S3 in the order that hurts: both bodies stored before either state write,
 * the first writer's body stored first and its state write winning.
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
const open: Caller = { kind: 'open', origin: undefined };

beforeAll(async () => {
  tableName = uniqueName('bodies');
  await ensureLedgerTable(clients.dynamodb, tableName);
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('blobs')));
  table = new LedgerTable(documents, { tableName, retentionSeconds: RETENTION });
  await table.putTarget({ name: 'scripted', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
});
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

const deps = (store = table): IntakeDeps => intakeDepsFactory({ store, blobs, targetFor: () => target, principals: table, now: () => clock });
const api = (method: string, rawPath: string, body?: unknown) =>
  route(
    { ...deps(), feeds: new LedgerFeedsTable(documents, { tableName, retentionSeconds: RETENTION }), inbox: new InboxTable(documents, { tableName, retentionSeconds: RETENTION }) },
    { method, rawPath, query: {}, headers: { 'x-ledger-origin': 'planner' }, body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)), iamUserId: undefined },
  );
const finalEvent = (dispatchId: string, body: unknown) => Buffer.from(JSON.stringify({ dispatchId, seq: 7, type: 'completed', result: { summary: 'done', body } }));

/** A promise and its resolver. */
function gate(): { readonly open: () => void; readonly passed: Promise<void> } {
  let open = () => {};
  const passed = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, passed };
}

/**
 * The store both reports write through: the second body's record is stored before the first report's
 * state write, which commits before the second report's.
 */
function racingStore(firstBytes: number, secondBytes: number) {
  const secondStored = gate();
  const firstCommitted = gate();
  const bytesOf = (next: DispatchState) => next.execution.result?.body?.bytes;
  return overriding<LedgerTable>(table, {
    putResultBody: async (body: ResultBody) => {
      await table.putResultBody(body);
      if (body.bytes === secondBytes) secondStored.open();
    },
    commit: async (from: StoredState, next: NextState) => {
      if (bytesOf(next) === firstBytes) {
        await secondStored.passed;
        const written = await table.commit(from, next);
        firstCommitted.open();
        return written;
      }
      if (bytesOf(next) === secondBytes) await firstCommitted.passed;
      return table.commit(from, next);
    },
  });
}

describe('two final reports of one run with the same seq and different bodies, raced', () => {
  it.each([
    ['spilled to S3 (> 8 KB)', 9_000, 12_000],
    ['inline (≤ 8 KB)', 1_000, 2_000],
  ])('keeps the body its state records, %s: the origin reads the winner’s bytes, never the loser’s', async (_how, firstSize, secondSize) => {
    const dispatchId = uniqueName('d');
    await takeDispatchMessage(deps(), { messageId: uniqueName('m'), body: JSON.stringify({ dispatchId, origin: 'planner', target: 'scripted', task: { behavior: 'complete' } }), senderId: 'local' });
    const runId = (await table.getState(dispatchId))?.runId as string;
    const first = { writer: 'first', pad: 'a'.repeat(firstSize) };
    const second = { writer: 'second', pad: 'b'.repeat(secondSize) };
    const bytes = (body: unknown) => Buffer.byteLength(JSON.stringify(body), 'utf8');
    const store = racingStore(bytes(first), bytes(second));

    const answers = await Promise.all([postRunEvent(deps(store), runId, finalEvent(dispatchId, first), open), postRunEvent(deps(store), runId, finalEvent(dispatchId, second), open)]);
    expect(answers.map((answer) => answer.body)).toEqual([{ applied: true }, { applied: false }]);

    const state = (await table.getState(dispatchId)) as DispatchState;
    expect(state.execution.result?.body).toMatchObject({ seq: 7, bytes: bytes(first) });
    const resultId = state.result?.id ?? '';
    const claimed = JSON.parse((await api('POST', '/origins/planner/inbox/claim', { mode: 'after_turn', resultIds: [resultId] })).body) as { results: Array<{ body?: unknown }> };
    const read = await api('GET', `/origins/planner/inbox/${encodeURIComponent(resultId)}/body`);
    expect(JSON.parse(read.body)).toEqual(first);
    expect(claimed.results[0]?.body ?? JSON.parse(read.body)).toEqual(first);
    // Each report's body kept under its own key, under the dispatch's results prefix (retention deletes it).
    if (bytes(second) > INLINE_BODY_BYTES) {
      const loser = resultBodyKey(dispatchId, 1, 7, resultBodyDigest(JSON.stringify(second)));
      expect(loser.startsWith(`results/${dispatchId}/`)).toBe(true);
      expect(JSON.parse(await blobs.getText(loser))).toEqual(second);
    }
  });
});
