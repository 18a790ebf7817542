import { Duration } from 'aws-cdk-lib';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { batchSizeOf, type LedgerFunctionName } from './function-names.js';
import type { LedgerFunction } from './ledger-function.js';

/** SQS retention is 14 days at most: a DLQ keeps what failed as long as SQS allows. */
const FOURTEEN_DAYS = Duration.days(14);

/**
 * A queue one ledger function reads with partial batch failures (its batch size from the list of
 * functions), and its DLQ after `maxReceiveCount` receives. Both are SSE-encrypted with SQS-managed
 * keys (senders need no KMS grant) and refuse plain HTTP. Created in `scope` under `queueId` and
 * `DeadLetterQueue`: the construct ids, and so the logical ids, of the queues that existed before it.
 */
export function fedQueue(scope: Construct, queueId: string, reader: { readonly name: LedgerFunctionName; readonly fn: LedgerFunction }, maxReceiveCount: number): { readonly queue: Queue; readonly deadLetterQueue: Queue } {
  const deadLetterQueue = new Queue(scope, 'DeadLetterQueue', { encryption: QueueEncryption.SQS_MANAGED, enforceSSL: true, retentionPeriod: FOURTEEN_DAYS });
  const queue = new Queue(scope, queueId, {
    encryption: QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod: FOURTEEN_DAYS,
    // AWS: at least 6 × the function timeout, or a batch still in flight is delivered again.
    visibilityTimeout: Duration.seconds(6 * reader.fn.timeout.toSeconds()),
    deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount },
  });
  reader.fn.function.addEventSource(new SqsEventSource(queue, { batchSize: batchSizeOf(reader.name), reportBatchItemFailures: true }));
  return { queue, deadLetterQueue };
}
