import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { InboxTable } from '../../shared/adapters/inbox-table.js';
import { LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import { decodeItem } from '../../shared/adapters/ledger-table.js';
import { route } from '../../shared/api/routes.js';
import { describe, expect, it } from 'vitest';
import { redispatch } from '../../shared/usecases/redispatch.js';
import { uniqueName } from '../support/engines.js';
import { apiError } from '../support/api-error.js';
import type { StoredState } from '../../shared/ledger/port.js';
import { deps, documents, message, send, table, tableName } from '../support/ledger-fixture.js';

/** Regression tests of the view and the stored items on DynamoDB Local and fauxqs S3 (the ledger of test/support/ledger-fixture.ts): each names the bug it pins ("was: …"). */

describe('stored items decode through checks, never casts', () => {
  it('answers 500 audit_failure for a state item that fails decoding, naming it (was: cast, and answered from garbage)', async () => {
    const dispatchId = uniqueName('d');
    await documents.send(new PutCommand({ TableName: tableName, Item: { pk: `D#${dispatchId}`, sk: 'STATE', originKey: 'O#planner', phase: 'bogus', version: 'three' } }));
    const feeds = new LedgerFeedsTable(documents, { tableName, retentionSeconds: 86_400 });
    const error = await apiError(route({ ...deps(), feeds, inbox: new InboxTable(documents, { tableName, retentionSeconds: 86_400 }) }, { method: 'GET', rawPath: `/dispatches/${dispatchId}`, query: {}, headers: { 'x-ledger-origin': 'planner' }, body: undefined, iamUserId: undefined }));
    expect(error.code).toBe('audit_failure');
    expect(error.statusCode).toBe(500);
    expect(decodeItem({ pk: `D#${dispatchId}`, sk: 'STATE', phase: 'bogus' })).toMatchObject({ kind: 'corrupt' });
  });
});

describe('the view stays bounded and drops nothing', () => {
  it('carries the newest 50 receipts and runs, with cursors to every older one (was: one growing item and list)', async () => {
    const sent = message();
    await send(sent);
    for (let round = 0; round < 55; round += 1) {
      expect((await redispatch(deps(), (await table.getStored(sent.dispatchId)) as StoredState, { reason: `round ${round}`, force: true })).kind).toBe('redispatched');
    }
    const feeds = new LedgerFeedsTable(documents, { tableName, retentionSeconds: 86_400 });
    const get = (path: string, cursor?: string) =>
      route({ ...deps(), feeds, inbox: new InboxTable(documents, { tableName, retentionSeconds: 86_400 }) }, { method: 'GET', rawPath: path, query: cursor ? { cursor } : {}, headers: { 'x-ledger-origin': 'planner' }, body: undefined, iamUserId: undefined });
    const answer = await get(`/dispatches/${sent.dispatchId}`);
    expect(answer.body.length).toBeLessThan(1024 * 1024);
    const view = JSON.parse(answer.body) as { receipts: Array<{ attempt: number }>; runs: Array<{ runId: string }>; more: { receipts: string | null; runs: string | null } };
    expect(view.receipts).toHaveLength(50);
    expect(view.runs).toHaveLength(50);
    expect(view.runs.at(-1)?.runId).toBe('r-56');
    const older = JSON.parse((await get(`/dispatches/${sent.dispatchId}/runs`, view.more.runs ?? '')).body) as { items: Array<{ runId: string }>; cursor: string | null };
    expect(older.items.map((run) => run.runId)).toEqual(['r-1', 'r-2', 'r-3', 'r-4', 'r-5', 'r-6']);
    expect(older.cursor).toBeNull();
    const olderReceipts = JSON.parse((await get(`/dispatches/${sent.dispatchId}/receipts`, view.more.receipts ?? '')).body) as { items: Array<{ event: string; attempt: number }> };
    expect(olderReceipts.items[0]).toMatchObject({ event: 'dispatch_written', attempt: 1 });
    expect(olderReceipts.items.length + view.receipts.length).toBe(57);
    const forged = await apiError(get(`/dispatches/${sent.dispatchId}/runs`, Buffer.from('receipts:3').toString('base64url')));
    expect(forged.statusCode).toBe(400);
  });
});
