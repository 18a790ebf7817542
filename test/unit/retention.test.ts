import { MESSAGE_ITEM, REJECTION_ITEM } from '../../shared/adapters/item-kinds.js';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { messageItem, rejectionOf } from '../../shared/adapters/ledger-items.js';

import * as objectKeys from '../../shared/ledger/objects.js';
import { legacySealedKey, payloadFolder, resultBodyKey } from '../../shared/ledger/objects.js';
import { streamChangeOf, TTL_REMOVER } from '../../shared/adapters/stream-records.js';
import { accepted } from '../../shared/dispatch/transitions/lifecycle.js';
import { stateOnly } from '../../shared/dispatch/state.js';
import type { StreamChange, StreamItem } from '../../shared/events/derive.js';
import type { AcceptedMessage, Rejection } from '../../shared/dispatch/records.js';
import { evidenceKey } from '../../shared/usecases/evidence-check.js';
import { dispatchFolders, removeExpiredObjects, retentionPlanOf, type LiveDispatches, type ObjectSweeper } from '../../shared/usecases/retention.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

const RECEIVED_AT = NOW.toISOString();

function anchorFactory(dispatchId: string, content: Partial<{ taskRef: string | null; bodyRef: string | null; valid: boolean }> = {}): AcceptedMessage {
  const base = { dispatchId, origin: 'planner', contentHash: 'sha256:ab', messageId: 'm-1', senderId: null, receivedAt: RECEIVED_AT, claimUntil: RECEIVED_AT };
  if (content.valid === false) {
    return { ...base, content: { valid: false, target: null, errors: [{ field: 'task', message: 'required' }], bodyPreview: '{…', bodyRef: content.bodyRef ?? null, bodyBytes: 9000 } };
  }
  const taskRef = content.taskRef ?? null;
  return {
    ...base,
    content: {
      valid: true,
      target: 'demo-agent',
      task: taskRef ? null : { goal: 'x' },
      taskRef,
      taskPreview: null,
      taskBytes: 10,
      expectedEvidence: [],
      deliveryMode: 'callback',
      timeouts: { stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 },
      parentDispatchId: null,
      maxHops: 4,
    },
  };
}

const rejectionFactory = (bodyRef: string | null): Rejection => ({ messageId: 'm-9', at: RECEIVED_AT, reason: 'not_json', dispatchId: null, origin: null, senderId: null, bodyPreview: '{', bodyRef, bodyBytes: 9000 });

const ttlRemoval = (oldItem: StreamItem, overrides: Partial<StreamChange> = {}): StreamChange => ({ sequenceNumber: '1', eventName: 'REMOVE', oldItem, newItem: { kind: 'other' }, removedByTtl: true, ...overrides });

describe('nothing forgotten: what a TTL removal deletes (retentionPlanOf)', () => {
  it('deletes an expired anchor\'s spilled task and every object under the dispatch\'s payload, evidence, sealed and result-body folders', () => {
    const message = anchorFactory('d-1', { taskRef: 'payloads/d-1/ab/task.json' });
    expect(retentionPlanOf(ttlRemoval({ kind: 'message', message }))).toEqual({
      kind: 'delete',
      of: 'dispatch d-1',
      keys: ['payloads/d-1/ab/task.json'],
      folders: ['payloads/d-1/', 'evidence/d-1/', 'sealed/d-1/', 'results/d-1/'],
    });
  });

  it('deletes the kept body of an invalid message\'s anchor, and the folders of an anchor whose task was inline', () => {
    const invalid = anchorFactory('d-2', { valid: false, bodyRef: 'payloads/d-2/ab/invalid-body' });
    expect(retentionPlanOf(ttlRemoval({ kind: 'message', message: invalid }))).toMatchObject({ keys: ['payloads/d-2/ab/invalid-body'], folders: dispatchFolders('d-2') });
    expect(retentionPlanOf(ttlRemoval({ kind: 'message', message: anchorFactory('d-3') }))).toMatchObject({ keys: [], folders: dispatchFolders('d-3') });
  });

  it('deletes an expired rejection\'s kept body, and nothing for one kept inline', () => {
    expect(retentionPlanOf(ttlRemoval({ kind: 'rejection', rejection: rejectionFactory('rejections/m-9/body') }))).toEqual({ kind: 'delete', of: 'rejection m-9', keys: ['rejections/m-9/body'], folders: [] });
    expect(retentionPlanOf(ttlRemoval({ kind: 'rejection', rejection: rejectionFactory(null) }))).toEqual({ kind: 'nothing' });
  });

  it('deletes nothing for a REMOVE not made by TTL (a person\'s DeleteItem), nor for any INSERT or MODIFY', () => {
    const anchor: StreamItem = { kind: 'message', message: anchorFactory('d-1', { taskRef: 'payloads/d-1/ab/task.json' }) };
    const rejection: StreamItem = { kind: 'rejection', rejection: rejectionFactory('rejections/m-9/body') };
    for (const oldItem of [anchor, rejection]) {
      expect(retentionPlanOf(ttlRemoval(oldItem, { removedByTtl: false }))).toEqual({ kind: 'nothing' });
      expect(retentionPlanOf(ttlRemoval(oldItem, { removedByTtl: undefined }))).toEqual({ kind: 'nothing' });
      expect(retentionPlanOf(ttlRemoval(oldItem, { eventName: 'MODIFY', newItem: oldItem }))).toEqual({ kind: 'nothing' });
      expect(retentionPlanOf(ttlRemoval(oldItem, { eventName: 'INSERT', oldItem: { kind: 'other' }, newItem: oldItem }))).toEqual({ kind: 'nothing' });
    }
  });

  it('deletes nothing when any other record expires: the state, a check, an operator receipt, a registry item', () => {
    const state = accepted(newDispatchFactory(), NOW);
    expect(retentionPlanOf(ttlRemoval({ kind: 'state', state: stateOnly(state), version: 1, changes: state.changes }))).toEqual({ kind: 'nothing' });
    expect(retentionPlanOf(ttlRemoval({ kind: 'other' }))).toEqual({ kind: 'nothing' });
  });

  it('reports an expired record that fails decoding instead of deleting on its word', () => {
    expect(retentionPlanOf(ttlRemoval({ kind: 'corrupt', key: 'D#d-1/MSG', problem: 'claimUntil is missing' }))).toEqual({ kind: 'corrupt', key: 'D#d-1/MSG', problem: 'claimUntil is missing' });
    // An anchor naming no dispatch id this ledger accepts: no folder can be trusted.
    const odd = anchorFactory('d-1/../d-2');
    expect(retentionPlanOf(ttlRemoval({ kind: 'message', message: odd })).kind).toBe('corrupt');
  });

  it('gives each dispatch folders that hold every key of its shapes and none of another dispatch\'s (d-1 vs d-10)', () => {
    const id = fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/);
    const ref = fc.stringMatching(/^[a-z0-9]{1,8}(\/[a-z0-9.]{1,8}){0,3}$/);
    fc.assert(
      fc.property(id, id, fc.integer({ min: 1, max: 1_000_000 }), ref, (mine, other, attempt, file) => {
        fc.pre(mine !== other);
        const folders = dispatchFolders(mine);
        const within = (key: string) => folders.some((folder) => key.startsWith(folder));
        for (const key of [evidenceKey(mine, attempt, 'f'.repeat(64), file), legacySealedKey(mine, attempt, file, 'f'.repeat(64)), `${payloadFolder(mine)}ab/task.json`, resultBodyKey(mine, attempt, 3)]) expect(within(key)).toBe(true);
        for (const key of [evidenceKey(other, attempt, 'f'.repeat(64), file), legacySealedKey(other, attempt, file, 'f'.repeat(64)), `${payloadFolder(other)}ab/task.json`, resultBodyKey(other, attempt, 3)]) expect(within(key)).toBe(false);
      }),
    );
    expect(dispatchFolders('d-1').some((folder) => evidenceKey('d-10', 1, 'f'.repeat(64), 'a.md').startsWith(folder))).toBe(false);
  });

  it('plans every kind of object a dispatch has: each key builder of objects.ts lands in one of the dispatch\'s folders (was: spilled result bodies, keyed outside them, were never deleted)', () => {
    // Every builder objects.ts exports, called for dispatch d-1 (its other arguments as strings: keys are
    // template strings). Only a rejection's body is not a dispatch's: it goes with the rejection record.
    type Builder = (...args: string[]) => string | string[];
    const exported: Record<string, unknown> = { ...objectKeys, ...objectKeys.OBJECTS };
    const builders = Object.entries(exported).flatMap(([name, value]): Array<[string, Builder]> => (typeof value === 'function' && name !== 'rejectionBody' ? [[name, value as Builder]] : []));
    expect(builders.map(([name]) => name).sort()).toEqual(['dispatchFolders', 'evidenceObjectKey', 'invalidBody', 'legacyEvidenceKey', 'legacySealedKey', 'payloadFolder', 'resultBodyKey', 'task'].sort());
    const folders = dispatchFolders('d-1');
    for (const [name, build] of builders) {
      for (const key of [build('d-1', '2', 'sha256:ab', 'out/a.md')].flat()) expect(folders.some((folder) => key.startsWith(folder)), `${name}: ${key}`).toBe(true);
    }
  });
});

/** A stream record exactly as Lambda delivers it: AttributeValue JSON images, and the remover's identity. */
function lambdaRemoveRecord(oldItem: Record<string, unknown>, userIdentity?: unknown): DynamoDBRecord {
  const OldImage = marshall(oldItem, { removeUndefinedValues: true }) as NonNullable<DynamoDBRecord['dynamodb']>['OldImage'];
  return {
    eventID: 'e-1',
    eventName: 'REMOVE',
    eventVersion: '1.1',
    eventSource: 'aws:dynamodb',
    awsRegion: 'eu-west-1',
    eventSourceARN: 'arn:aws:dynamodb:eu-west-1:111122223333:table/ledger/stream/2026-03-01T00:00:00.000',
    ...(userIdentity === undefined ? {} : { userIdentity }),
    dynamodb: { ApproximateCreationDateTime: 1772366400, Keys: marshall({ pk: oldItem.pk, sk: oldItem.sk }) as NonNullable<DynamoDBRecord['dynamodb']>['Keys'], OldImage, SequenceNumber: '100', SizeBytes: 300, StreamViewType: 'NEW_AND_OLD_IMAGES' },
  };
}

describe('nothing forgotten: a TTL REMOVE record as Lambda delivers it (streamChangeOf)', () => {
  const message = anchorFactory('d-1', { taskRef: 'payloads/d-1/ab/task.json' });
  const item = messageItem(message, 86_400);

  it('marks a REMOVE as made by TTL only when its userIdentity is DynamoDB\'s service principal, and decodes the anchor', () => {
    const change = streamChangeOf(lambdaRemoveRecord(item, { ...TTL_REMOVER }));
    expect(change.removedByTtl).toBe(true);
    expect(change.oldItem).toEqual({ kind: 'message', message });
    expect(MESSAGE_ITEM.key('d-1')).toEqual({ pk: item.pk, sk: item.sk });
  });

  it('does not take a DeleteItem by a person or another service for a TTL removal', () => {
    expect(streamChangeOf(lambdaRemoveRecord(item)).removedByTtl).toBe(false);
    expect(streamChangeOf(lambdaRemoveRecord(item, { type: 'Service', principalId: 'lambda.amazonaws.com' })).removedByTtl).toBe(false);
    expect(streamChangeOf(lambdaRemoveRecord(item, { type: 'AssumedRole', principalId: 'dynamodb.amazonaws.com' })).removedByTtl).toBe(false);
    expect(streamChangeOf(lambdaRemoveRecord(item, 'dynamodb.amazonaws.com')).removedByTtl).toBe(false);
    expect(streamChangeOf({ ...lambdaRemoveRecord(item, { ...TTL_REMOVER }), eventName: 'MODIFY' }).removedByTtl).toBe(false);
  });

  it('decodes a rejection the same way (its codec strips the keys)', () => {
    const rejection = rejectionFactory('rejections/m-9/body');
    const change = streamChangeOf(lambdaRemoveRecord({ ...REJECTION_ITEM.key('m-9'), ...rejection, expiresAt: 1 }, { ...TTL_REMOVER }));
    expect(change.oldItem).toEqual({ kind: 'rejection', rejection: rejectionOf({ ...REJECTION_ITEM.key('m-9'), ...rejection }) });
  });
});

class RecordingSweeper implements ObjectSweeper {
  readonly calls: string[] = [];
  constructor(private readonly failOn?: string) {}
  async deleteKeys(keys: readonly string[]): Promise<number> {
    this.calls.push(`keys ${keys.join(',')}`);
    return keys.length;
  }
  async deleteFolder(folder: string): Promise<number> {
    this.calls.push(`folder ${folder}`);
    if (folder === this.failOn) throw new Error('S3 unavailable');
    return 2;
  }
}

describe('nothing forgotten: removeExpiredObjects', () => {
  const change = ttlRemoval({ kind: 'message', message: anchorFactory('d-1', { taskRef: 'payloads/d-1/ab/task.json' }) });
  const gone: LiveDispatches = { stateLives: async () => false, anchorHeld: async () => false, restoreAnchor: async () => undefined };
  const options = { now: new Date('2026-12-01T10:00:00Z'), anchorSeconds: 3600 };

  it('deletes the named keys first, then each folder, and says how many objects went', async () => {
    const sweeper = new RecordingSweeper();
    expect(await removeExpiredObjects(change, sweeper, gone, options)).toEqual({ kind: 'deleted', of: 'dispatch d-1', keys: 1, inFolders: 8 });
    expect(sweeper.calls).toEqual(['keys payloads/d-1/ab/task.json', 'folder payloads/d-1/', 'folder evidence/d-1/', 'folder sealed/d-1/', 'folder results/d-1/']);
  });

  it('touches nothing for a change that deletes nothing', async () => {
    const sweeper = new RecordingSweeper();
    expect(await removeExpiredObjects({ ...change, removedByTtl: false }, sweeper, gone, options)).toEqual({ kind: 'nothing' });
    expect(sweeper.calls).toEqual([]);
  });

  it('deletes nothing and puts the anchor back, expiring later, while the dispatch lives; nothing either when the id is taken again', async () => {
    const sweeper = new RecordingSweeper();
    const restored: Array<[string, string]> = [];
    const lives: LiveDispatches = { ...gone, stateLives: async () => true, restoreAnchor: async (message, until) => void restored.push([message.dispatchId, until.toISOString()]) };
    expect(await removeExpiredObjects(change, sweeper, lives, options)).toEqual({ kind: 'kept', of: 'dispatch d-1', why: 'dispatch_lives' });
    expect(restored).toEqual([['d-1', '2026-12-01T11:00:00.000Z']]);
    expect(await removeExpiredObjects(change, sweeper, { ...gone, anchorHeld: async () => true }, options)).toEqual({ kind: 'kept', of: 'dispatch d-1', why: 'id_taken_again' });
    expect(sweeper.calls).toEqual([]);
  });

  it('fails when a deletion fails, so the stream retries the record (deletion is idempotent)', async () => {
    await expect(removeExpiredObjects(change, new RecordingSweeper('evidence/d-1/'), gone, options)).rejects.toThrow('S3 unavailable');
  });
});
