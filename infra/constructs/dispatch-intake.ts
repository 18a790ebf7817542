import { Queue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { LedgerFunction } from './ledger-function.js';
import { fedQueue } from './fed-queue.js';

export interface DispatchIntakeProps {
  readonly intake: LedgerFunction;
  /** Deliveries before a message the intake cannot take at all moves to the DLQ. @default 5 */
  readonly maxReceiveCount?: number;
}

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
    // Throttling alone can cost a few receives; fewer than 5 dead-letters healthy messages. SQS takes a
    // whole number up to 1,000 (regression: 5.5 and 1001 passed the synth and failed the deploy).
    if (!Number.isInteger(maxReceiveCount) || maxReceiveCount < 5 || maxReceiveCount > 1000) throw new RangeError(`maxReceiveCount must be a whole number from 5 to 1000, got ${maxReceiveCount}`);
    ({ queue: this.queue, deadLetterQueue: this.deadLetterQueue } = fedQueue(this, 'DispatchQueue', { name: 'intake', fn: props.intake }, maxReceiveCount));
  }
}
