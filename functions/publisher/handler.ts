import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { decodeItem } from '../../shared/adapters/ledger-table.js';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { countForTarget } from '../../shared/adapters/metrics.js';
import { METRIC_OF_DETAIL_TYPE, type LedgerEvent } from '../../shared/events/catalog.js';
import { publishStreamBatch, type StreamChange } from '../../shared/events/derive.js';
import { logger, metrics, publisherDeps } from './deps.js';

type Image = NonNullable<DynamoDBRecord['dynamodb']>['NewImage'];
// Lambda delivers images as AttributeValue JSON (binary as base64, which no ledger item holds).
const decode = (image: Image) => decodeItem(image ? unmarshall(image as Record<string, AttributeValue>) : undefined);

const toChange = (record: DynamoDBRecord): StreamChange => ({
  sequenceNumber: record.dynamodb?.SequenceNumber ?? '',
  eventName: record.eventName ?? 'MODIFY',
  oldItem: decode(record.dynamodb?.OldImage),
  newItem: decode(record.dynamodb?.NewImage),
});

function count({ detailType, detail }: LedgerEvent): void {
  const name = METRIC_OF_DETAIL_TYPE[detailType];
  if (!name || !('target' in detail)) return;
  countForTarget(metrics, name, detail.target);
}

/** The event publisher on the ledger table's stream: the stream is the outbox (see `publishStreamBatch`). */
export const handler = async (event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> => {
  const report = await publishStreamBatch(event.Records.map(toChange), publisherDeps);
  report.published.forEach(count);
  if (report.failure) {
    const { sequenceNumber, error } = report.failure;
    logger.error('events not published; the stream retries from this record', { sequenceNumber, retried: report.batchItemFailures.length, error });
    // No dimension: a bus outage is not any one target's. Alarmed on (PublishFailures ≥ 1).
    const metric = metrics.singleMetric();
    metric.clearDefaultDimensions();
    metric.addMetric('PublishFailures', MetricUnit.Count, 1);
  }
  return { batchItemFailures: [...report.batchItemFailures] };
};
