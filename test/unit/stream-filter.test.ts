import type { DynamoDBRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { KEY } from '../../shared/adapters/ledger-keys.js';
import { isPublishedRecord } from '../../shared/adapters/stream-records.js';

const recordOf = (key: { pk: string; sk: string }): DynamoDBRecord => ({ eventName: 'MODIFY', dynamodb: { Keys: { pk: { S: key.pk }, sk: { S: key.sk } } } });

describe('the publisher event source filter (isPublishedRecord, as the stack filter passes)', () => {
  it("passes every item of a dispatch's partition and rejections", () => {
    const passed = [
      KEY.state('d-1'),
      KEY.message('d-1'),
      KEY.operatorReceipt('d-1', 'rc-1'),
      KEY.manualAttestation('d-1', 'ma-1'),
      KEY.evidenceCheck('d-1', 1),
      KEY.pastAttempt('d-1', 1, 3),
      KEY.rejection('m-1'),
    ].map((key) => isPublishedRecord(recordOf(key)));
    expect(passed).toEqual([true, true, true, true, true, true, true]);
  });

  it('refuses the counters (so its own counter writes never wake the publisher), slots, registry and settings items', () => {
    const refused = [KEY.counts(0), KEY.counts(7), KEY.slotShard('demo-agent', 0), KEY.limitedTargets(), KEY.target('demo-agent'), KEY.principal('AIDA1'), KEY.originSettings('planner')].map((key) =>
      isPublishedRecord(recordOf(key)),
    );
    expect(refused).toEqual([false, false, false, false, false, false, false]);
    expect(isPublishedRecord({ eventName: 'MODIFY', dynamodb: {} })).toBe(false);
  });
});
