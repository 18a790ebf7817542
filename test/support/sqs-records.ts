import type { Context, SQSRecord } from 'aws-lambda';

/** One SQS record as an event source mapping hands it to a handler: first delivery, from `senderId`, on `queue`. */
export function sqsRecord(messageId: string, body: string, senderId: string, queue: string): SQSRecord {
  return {
    messageId,
    receiptHandle: `rh-${messageId}`,
    body,
    attributes: { ApproximateReceiveCount: '1', SentTimestamp: '0', SenderId: senderId, ApproximateFirstReceiveTimestamp: '0' },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: `arn:aws:sqs:us-east-1:000000000000:${queue}`,
    awsRegion: 'us-east-1',
  };
}

/** A Lambda context with only what the handlers read: the time left. */
export const lambdaContext = (remainingMs: number): Context => ({ getRemainingTimeInMillis: () => remainingMs }) as Partial<Context> as Context;
