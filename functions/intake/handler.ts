import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { logger } from './deps.js';

const processor = new BatchProcessor(EventType.SQS);

/**
 * Intake on the dispatch queue. Partial batch failures: a record whose processing throws is reported
 * back alone; the others are acknowledged. (The dispatch use case arrives with the intake issue; for now
 * every record is received and logged with its size, never its content.)
 */
async function recordHandler(record: SQSRecord): Promise<void> {
  logger.info('dispatch message received', {
    messageId: record.messageId,
    bytes: Buffer.byteLength(record.body, 'utf8'),
    receiveCount: Number(record.attributes.ApproximateReceiveCount),
  });
}

export const handler = async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> =>
  processPartialResponse(event, recordHandler, processor, { context });
