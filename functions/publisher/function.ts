import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { countForTarget, countOnce, PUBLISH_FAILURES_METRIC } from '../../shared/adapters/metrics.js';
import { crashPoint } from '../../shared/faults.js';
import { streamChangeOf } from '../../shared/adapters/stream-records.js';
import type { LedgerEvent } from '../../shared/events/catalog.js';
import { METRIC_OF_DETAIL_TYPE } from '../../shared/events/names.js';
import { publishStreamBatch } from '../../shared/events/derive.js';
import type { LedgerConfig } from '../../shared/adapters/config.js';
import { logger, metrics, publisherDeps } from './deps.js';

export { CONFIG } from './deps.js';

function count({ detailType, detail }: LedgerEvent): void {
  const name = METRIC_OF_DETAIL_TYPE[detailType];
  if (!name || !('target' in detail)) return;
  // A result superseded by a redispatch is replaced by the new attempt's: nothing is lost, nobody is paged.
  if (detailType === 'Result Dropped' && detail.reason === 'superseded') return;
  countForTarget(metrics, name, detail.target);
}

/** The event publisher on the ledger table's stream: the stream is the outbox (see `publishStreamBatch`). */
export function createHandler(config: LedgerConfig): (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse> {
  const deps = publisherDeps(config);
  return async (event) => {
    const changes = event.Records.map(streamChangeOf);
    for (const change of changes) {
      // A record that fails decoding publishes nothing and is reported — never cast into an event.
      if (change.newItem.kind === 'corrupt') {
        logger.error('a stored record failed decoding: no event published for it', { sequenceNumber: change.sequenceNumber, key: change.newItem.key, problem: change.newItem.problem });
        countOnce(metrics, 'CorruptRecords');
      }
    }
    const report = await publishStreamBatch(changes, deps);
    // Metrics count every derived event: an events profile that leaves Dispatch Orphaned off the bus
    // never silences the OrphanedDispatches alarm.
    report.derived.forEach(count);
    if (report.failure) {
      const { sequenceNumber, error } = report.failure;
      logger.error('events not published; the stream retries from this record', { sequenceNumber, retried: report.batchItemFailures.length, error });
      // No dimension: a bus outage is not any one target's. Alarmed on (PublishFailures ≥ 1).
      countOnce(metrics, PUBLISH_FAILURES_METRIC);
    }
    if (!report.failure) crashPoint('publisher.before_checkpoint', changes[0]?.sequenceNumber ?? 'empty');
    return { batchItemFailures: [...report.batchItemFailures] };
  };
}
