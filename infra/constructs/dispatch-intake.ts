import { Duration } from 'aws-cdk-lib';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import type { Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { LedgerFunction } from './ledger-function.js';
import { batchSizeOf } from './function-names.js';

export interface DispatchIntakeProps {
  readonly intake: LedgerFunction;
  /** Deliveries before a message the intake cannot take at all moves to the DLQ. @default 5 */
  readonly maxReceiveCount?: number;
}

/** SQS retention is 14 days at most: the DLQ keeps what failed as long as SQS allows. */
const FOURTEEN_DAYS = Duration.days(14);

/**
 * The dispatch queue origins send to, its DLQ, and the intake function reading it with partial
 * batch failures. Both queues are SSE-encrypted with SQS-managed keys (senders need no KMS grant)
 * and refuse plain HTTP.
 */
export class DispatchIntake extends Construct {
  readonly queue: Queue;
  readonly deadLetterQueue: Queue;

  constructor(scope: Construct, id: string, props: DispatchIntakeProps) {
    super(scope, id);
    const maxReceiveCount = props.maxReceiveCount ?? 5;
    // Throttling alone can cost a few receives; fewer than 5 dead-letters healthy messages.
    if (maxReceiveCount < 5) throw new RangeError(`maxReceiveCount must be at least 5, got ${maxReceiveCount}`);
    const fn: LambdaFunction = props.intake.function;
    this.deadLetterQueue = new Queue(this, 'DeadLetterQueue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: FOURTEEN_DAYS,
    });
    this.queue = new Queue(this, 'DispatchQueue', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: FOURTEEN_DAYS,
      // AWS: at least 6 × the function timeout, or a batch still in flight is delivered again.
      visibilityTimeout: Duration.seconds(6 * props.intake.timeout.toSeconds()),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount },
    });
    fn.addEventSource(new SqsEventSource(this.queue, { batchSize: batchSizeOf('intake'), reportBatchItemFailures: true }));
  }
}
