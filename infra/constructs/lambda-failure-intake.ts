import { Duration } from 'aws-cdk-lib';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { LedgerFunction } from './ledger-function.js';
import { batchSizeOf } from './function-names.js';

export interface LambdaFailureIntakeProps {
  readonly failures: LedgerFunction;
}

const FOURTEEN_DAYS = Duration.days(14);

/**
 * The on-failure destination of every lambda target (CONTRACT §12): Lambda puts an invocation that
 * failed or timed out after its own retries on this queue, and the failures function records it as
 * the run's failure. What the function cannot take after 5 receives moves to a DLQ, which alarms.
 */
export class LambdaFailureIntake extends Construct {
  readonly queue: Queue;
  readonly deadLetterQueue: Queue;

  constructor(scope: Construct, id: string, props: LambdaFailureIntakeProps) {
    super(scope, id);
    this.deadLetterQueue = new Queue(this, 'DeadLetterQueue', { encryption: QueueEncryption.SQS_MANAGED, enforceSSL: true, retentionPeriod: FOURTEEN_DAYS });
    this.queue = new Queue(this, 'Queue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: FOURTEEN_DAYS,
      visibilityTimeout: Duration.seconds(6 * props.failures.timeout.toSeconds()),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: 5 },
    });
    props.failures.function.addEventSource(new SqsEventSource(this.queue, { batchSize: batchSizeOf('failures'), reportBatchItemFailures: true }));
  }
}
