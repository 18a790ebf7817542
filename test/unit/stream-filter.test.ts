import { COUNTS_ITEM, EVIDENCE_CHECK_ITEM, LIMITED_TARGETS_ITEM, MANUAL_ATTESTATION_ITEM, MESSAGE_ITEM, OPERATOR_RECEIPT_ITEM, ORIGIN_SETTINGS_ITEM, PAST_ATTEMPT_ITEM, PRINCIPAL_ITEM, REJECTION_ITEM, SLOT_SHARD_ITEM, STATE_ITEM, TARGET_ITEM } from '../../shared/adapters/item-kinds.js';
import type { DynamoDBRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';

import { isPublishedRecord } from '../../shared/adapters/stream-records.js';

const recordOf = (key: { pk: string; sk: string }): DynamoDBRecord => ({ eventName: 'MODIFY', dynamodb: { Keys: { pk: { S: key.pk }, sk: { S: key.sk } } } });

describe('the publisher event source filter (isPublishedRecord, as the stack filter passes)', () => {
  it("passes every item of a dispatch's partition and rejections", () => {
    const passed = [
      STATE_ITEM.key('d-1'),
      MESSAGE_ITEM.key('d-1'),
      OPERATOR_RECEIPT_ITEM.key('d-1', 'rc-1'),
      MANUAL_ATTESTATION_ITEM.key('d-1', 'ma-1'),
      EVIDENCE_CHECK_ITEM.key('d-1', 1),
      PAST_ATTEMPT_ITEM.key('d-1', 1, 3),
      REJECTION_ITEM.key('m-1'),
    ].map((key) => isPublishedRecord(recordOf(key)));
    expect(passed).toEqual([true, true, true, true, true, true, true]);
  });

  it('refuses the counters (so its own counter writes never wake the publisher), slots, registry and settings items', () => {
    const refused = [COUNTS_ITEM.key(0), COUNTS_ITEM.key(7), SLOT_SHARD_ITEM.key('demo-agent', 0), LIMITED_TARGETS_ITEM.key(), TARGET_ITEM.key('demo-agent'), PRINCIPAL_ITEM.key('AIDA1'), ORIGIN_SETTINGS_ITEM.key('planner')].map((key) =>
      isPublishedRecord(recordOf(key)),
    );
    expect(refused).toEqual([false, false, false, false, false, false, false]);
    expect(isPublishedRecord({ eventName: 'MODIFY', dynamodb: {} })).toBe(false);
  });
});
