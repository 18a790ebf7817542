import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { REDRIVEN_FOR } from '../principals/principals.js';

/**
 * Who sent a record: SQS's `SenderId`, and — for a message an operator moved back from a DLQ — the first
 * sender it carries (`REDRIVEN_FOR`), which the use cases honour only from a registered operator.
 */
export function senderOf(record: SQSRecord): { readonly senderId: string | undefined; readonly redrivenFor: string | undefined } {
  return { senderId: record.attributes.SenderId, redrivenFor: record.messageAttributes?.[REDRIVEN_FOR]?.stringValue };
}

/** A record's body as JSON, or `undefined` when it is not JSON (the use case then answers it `unreadable`). */
export function jsonBodyOf(record: SQSRecord): unknown {
  try {
    return JSON.parse(record.body);
  } catch {
    return undefined;
  }
}

/**
 * A ledger function's handler of an SQS batch: each record handled on its own, and one that throws
 * reported back alone (a partial batch response), so SQS brings back that record and no other. One
 * processor per handler: a batch's records are its own.
 */
export function sqsBatchHandler(handle: (record: SQSRecord) => Promise<void>): (event: SQSEvent, context: Context) => Promise<SQSBatchResponse> {
  const processor = new BatchProcessor(EventType.SQS);
  return async (event, context) => processPartialResponse(event, handle, processor, { context });
}
