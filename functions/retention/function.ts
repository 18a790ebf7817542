import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { Context, DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { countOnce, RETENTION_FAILURES_METRIC } from '../../shared/adapters/metrics.js';
import { streamChangeOf } from '../../shared/adapters/stream-records.js';
import { removeExpiredObjects } from '../../shared/usecases/retention.js';
import type { LedgerConfig } from '../../shared/adapters/config.js';
import { logger, metrics, retentionDeps, type RetentionDeps } from './deps.js';

export { CONFIG } from './deps.js';

/**
 * One TTL removal (the event source mapping passes only those): the objects of the expired record go
 * (see `removeExpiredObjects`). A record whose deletes fail is reported back alone; the stream retries
 * it, bisecting, and parks it in the failure bucket when the retries are spent.
 */
async function recordHandler({ objects, live, anchorSeconds }: RetentionDeps, record: DynamoDBRecord): Promise<void> {
  const sequenceNumber = record.dynamodb?.SequenceNumber;
  let outcome: Awaited<ReturnType<typeof removeExpiredObjects>>;
  try {
    outcome = await removeExpiredObjects(streamChangeOf(record), objects, live, { now: new Date(), anchorSeconds });
  } catch (error) {
    // Reported back alone, the invocation itself succeeds: Lambda's Errors metric never sees it, so it is
    // counted here (regression: a record retried ten times and parked raised no alarm).
    logger.error('the objects of an expired record could not be deleted; the stream retries it, then parks it', { sequenceNumber, error: error instanceof Error ? error.message : String(error) });
    countOnce(metrics, RETENTION_FAILURES_METRIC);
    throw error;
  }
  if (outcome.kind === 'kept') {
    logger.info('an anchor expired while its dispatch lives on, or its id was taken again: nothing deleted', { sequenceNumber, ...outcome });
  } else if (outcome.kind === 'deleted') {
    logger.info('objects of an expired record deleted', { sequenceNumber, ...outcome });
    countOnce(metrics, 'ExpiredObjectsDeleted', {}, outcome.keys + outcome.inFolders);
  } else if (outcome.kind === 'corrupt') {
    logger.error('an expired record failed decoding: its objects are left to the bucket\'s backstop rule', { sequenceNumber, key: outcome.key, problem: outcome.problem });
    countOnce(metrics, 'CorruptRecords');
  }
}

export function createHandler(config: LedgerConfig): (event: DynamoDBStreamEvent, context: Context) => Promise<DynamoDBBatchResponse> {
  const deps = retentionDeps(config);
  // One per handler: a batch's records are its own.
  const processor = new BatchProcessor(EventType.DynamoDBStreams);
  return async (event, context) => processPartialResponse(event, (record: DynamoDBRecord) => recordHandler(deps, record), processor, { context });
}
