import type { Context, SQSRecord } from 'aws-lambda';
import type { LedgerStoreWithWrites } from '../../shared/ledger/port.js';
import { takeLambdaFailure } from '../../shared/usecases/lambda-failure.js';
import { eventually } from './eventually.js';

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

/**
 * Lambda's on-failure destination as the failures queue and function take it, for a local Lambda
 * without them: each record taken in (open mode: the sender is not checked), and one that comes before
 * the ledger wrote its run (`not_yet`) brought back until it is taken, as SQS brings back what the
 * function reports back. `store`: read at each record (a test may build its table after the runtime).
 */
export function failuresQueue(store: () => LedgerStoreWithWrites): (record: unknown) => Promise<void> {
  return async (record) => {
    await eventually('the on-failure record taken in', async () => ((await takeLambdaFailure({ store: store(), now: () => new Date(), principalMode: 'open' }, record)) === 'not_yet' ? undefined : true), { timeoutMs: 30_000, intervalMs: 20 });
  };
}
