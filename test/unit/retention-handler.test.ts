import { marshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createHandler } from '../../functions/retention/function.js';
import { lambdaContext } from '../../local/runtime/context.js';
import { ledgerConfigFrom } from '../../shared/adapters/config.js';
import { rejectionItem } from '../../shared/adapters/ledger-items.js';
import { TTL_REMOVER } from '../../shared/adapters/stream-records.js';

/**
 * The retention function reports a record whose objects could not be deleted back alone: its invocation
 * succeeds, so Lambda's Errors metric never sees it. Regression: nothing else counted it either, and a
 * record retried ten times and parked in the failure bucket raised no alarm (the README said "the errors
 * alarm fires"). Here S3 is a closed port on 127.0.0.1: the delete fails.
 */
describe('the retention function, when the objects of an expired record cannot be deleted', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
    vi.restoreAllMocks();
  });

  it('reports the record back and counts RetentionFailures (an EMF line), which the stack alarms on', async () => {
    Object.assign(process.env, {
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
      AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:9',
      AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:9',
      AWS_MAX_ATTEMPTS: '1',
    });
    const written: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => written.push(String(chunk)) > 0);
    vi.spyOn(console, 'log').mockImplementation((...parts: unknown[]) => void written.push(parts.map(String).join(' ')));
    vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const handler = createHandler(ledgerConfigFrom({ LEDGER_TABLE_NAME: 'ledger', EVIDENCE_BUCKET: 'evidence' }, { requireApiBaseUrl: false }));
    const expired = rejectionItem({ messageId: 'm-9', at: '2026-12-07T10:00:00.000Z', reason: 'not_json', dispatchId: null, origin: null, senderId: null, bodyPreview: '{', bodyRef: 'rejections/m-9/body', bodyBytes: 9000 }, 86_400);
    // Nothing to delete: a rejection that kept no body. Beside the failing record, so the batch is a partial failure.
    const bodiless = rejectionItem({ messageId: 'm-10', at: '2026-12-07T10:00:00.000Z', reason: 'not_json', dispatchId: null, origin: null, senderId: null, bodyPreview: '{', bodyRef: null, bodyBytes: 1 }, 86_400);
    const removal = (item: Record<string, unknown>, sequenceNumber: string): DynamoDBRecord => ({
      eventID: `e-${sequenceNumber}`,
      eventName: 'REMOVE',
      eventSource: 'aws:dynamodb',
      userIdentity: TTL_REMOVER,
      dynamodb: { OldImage: marshall(item, { removeUndefinedValues: true }) as NonNullable<DynamoDBRecord['dynamodb']>['OldImage'], SequenceNumber: sequenceNumber, StreamViewType: 'NEW_AND_OLD_IMAGES' },
    });
    const context = lambdaContext('retention', 60_000, 'us-east-1');

    const answer = await handler({ Records: [removal(expired, '100'), removal(bodiless, '101')] }, context);

    expect(answer.batchItemFailures).toEqual([{ itemIdentifier: '100' }]);
    const emf = written.filter((line) => line.includes('"_aws"')).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(emf.filter((line) => line.RetentionFailures === 1)).toHaveLength(1);
  });
});
