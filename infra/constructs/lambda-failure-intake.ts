import { Queue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { LedgerFunction } from './ledger-function.js';
import { fedQueue } from './fed-queue.js';

export interface LambdaFailureIntakeProps {
  readonly failures: LedgerFunction;
}

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
    ({ queue: this.queue, deadLetterQueue: this.deadLetterQueue } = fedQueue(this, 'Queue', { name: 'failures', fn: props.failures }, 5));
  }
}
