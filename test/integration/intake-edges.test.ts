import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { takeDispatchMessage } from '../../shared/usecases/intake.js';
import { uniqueName } from '../support/engines.js';
import { overriding } from '../support/factories.js';
import { clock, deps, documents, message, nested, send, stateOf, table, tableName, target, tick } from '../support/ledger-fixture.js';

/** Regression tests of intake on DynamoDB Local and fauxqs S3 (the ledger of test/support/ledger-fixture.ts): each names the bug it pins ("was: …"). */

describe('intake: input that broke the writer, through the intake on DynamoDB Local', () => {
  it('stores and submits a task nested 40 levels deep intact (was: DynamoDB refused the anchor past 32 levels, the message went to the DLQ)', async () => {
    const sent = message({ task: nested(40) });
    const result = await send(sent);
    expect(result.outcome).toBe('submitted');
    const stored = await table.getAcceptedMessage(sent.dispatchId);
    expect(stored?.content.valid && stored.content.task).toEqual(nested(40));
    expect(target.submissions.at(-1)?.task).toEqual(nested(40));
    // CONTRACT §8 v2: the submission carries the dispatch's clocks, defaults resolved.
    expect(target.submissions.at(-1)?.timeouts).toEqual({ stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 });
  });

  it('stores a task of exactly 64 levels and blocks one of 65 as invalid_fields', async () => {
    expect((await send(message({ task: nested(64) }))).outcome).toBe('submitted');
    const deep = message({ task: nested(65) });
    const result = await send(deep);
    expect(result.outcome).toBe('blocked');
    expect((await stateOf(deep.dispatchId)).blockedCode).toBe('invalid_fields');
  });

  it('takes a message nested 200,000 levels without a stack overflow: blocked when its ids are readable, a too_deep rejection otherwise', async () => {
    const dispatchId = uniqueName('d');
    const deepTask = `${'{"n":'.repeat(200_000)}1${'}'.repeat(200_000)}`;
    const attributable = `{"dispatchId":"${dispatchId}","origin":"planner","target":"scripted","task":${deepTask}}`;
    expect((await send(attributable)).outcome).toBe('blocked');
    const anonymous = `{"task":${deepTask}}`;
    expect(await send(anonymous)).toMatchObject({ outcome: 'rejected', reason: 'too_deep' });
  });

  it('keeps every item small for a message with 5,000 unknown keys (was: the error text listed them all)', async () => {
    const sent: Record<string, unknown> = message();
    for (let index = 0; index < 5_000; index += 1) sent[`unknown_key_${index}_${'x'.repeat(40)}`] = index;
    expect((await send(sent)).outcome).toBe('blocked');
    const state = await stateOf(String(sent.dispatchId));
    expect(Buffer.byteLength(state.blockedReason ?? '')).toBeLessThanOrEqual(1024);
    const anchor = await documents.send(new GetCommand({ TableName: tableName, Key: { pk: `D#${String(sent.dispatchId)}`, sk: 'MSG' } }));
    expect(Buffer.byteLength(JSON.stringify(anchor.Item))).toBeLessThan(400 * 1024);
    const errors = anchor.Item?.content?.errors as Array<{ field: string; message: string }>;
    expect(Buffer.byteLength(errors.map((error) => `${error.field}: ${error.message}`).join('; '))).toBeLessThanOrEqual(1024 + 64);
  });
});

describe('intake: the v2 fields of a message are kept with it', () => {
  it('keeps resultDelivery, notBefore, priority and traceparent with the accepted message (was: refused as unknown fields, so the dispatch was blocked)', async () => {
    const notBefore = new Date(clock.getTime() + 3600_000).toISOString();
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const sent = message({ resultDelivery: 'inject', notBefore, priority: 9, traceparent });
    expect((await send(sent)).outcome).not.toBe('blocked');
    const stored = await table.getAcceptedMessage(sent.dispatchId);
    expect(stored?.content.valid && stored.content).toMatchObject({ resultDelivery: 'inject', notBefore, priority: 9, traceparent });
  });

  it('blocks a notBefore more than 30 days ahead as invalid_fields, with the field named', async () => {
    const sent = message({ notBefore: new Date(clock.getTime() + 31 * 86_400_000).toISOString() });
    expect((await send(sent)).outcome).toBe('blocked');
    const state = await stateOf(sent.dispatchId);
    expect(state.blockedCode).toBe('invalid_fields');
    expect(state.blockedReason).toContain('notBefore');
  });
});

describe('intake: taken-in work is resumed at any age', () => {
  it('resumes a redelivery of a message whose anchor is two days old and has no state (was: dropped as an expired duplicate)', async () => {
    const sent = message();
    const crashing = overriding<LedgerTable>(table, {
      commit: async (): Promise<never> => {
        throw new Error('injected crash before the state write');
      },
    });
    await expect(takeDispatchMessage({ ...deps(), store: crashing }, { messageId: 'm-old', body: JSON.stringify(sent), senderId: 'local' })).rejects.toThrow('injected crash');
    tick(2 * 86_400);
    const resumed = await send(sent, 'm-old');
    expect(resumed.outcome).toBe('submitted');
    expect((await stateOf(sent.dispatchId)).phase).toBe('submitted');
  });
});

describe('intake: edges the first reviews found', () => {
  it('sets an expiry on the accepted-message anchor (was: none — kept forever)', async () => {
    const sent = message();
    await send(sent);
    const anchor = await documents.send(new GetCommand({ TableName: tableName, Key: { pk: `D#${sent.dispatchId}`, sk: 'MSG' } }));
    expect(anchor.Item?.expiresAt).toBe(Math.floor(clock.getTime() / 1000) + 2 * 30 * 86_400);
  });
});
