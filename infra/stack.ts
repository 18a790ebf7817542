import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { DispatchLedger, type DispatchLedgerProps } from './constructs/dispatch-ledger.js';

export interface DispatchLedgerStackProps extends StackProps {
  readonly ledger?: DispatchLedgerProps;
}

/** The deployable stack: the `DispatchLedger` construct and the outputs the CLI and README refer to. */
export class DispatchLedgerStack extends Stack {
  readonly ledger: DispatchLedger;

  constructor(scope: Construct, id: string, props: DispatchLedgerStackProps = {}) {
    super(scope, id, props);
    this.ledger = new DispatchLedger(this, 'Ledger', props.ledger);
    const outputs: Record<string, string> = {
      ApiUrl: this.ledger.api.url.url,
      DispatchQueueUrl: this.ledger.intake.queue.queueUrl,
      DeadLetterQueueUrl: this.ledger.intake.deadLetterQueue.queueUrl,
      LedgerTableName: this.ledger.storage.table.tableName,
      EvidenceBucketName: this.ledger.storage.evidenceBucket.bucketName,
      StreamFailureBucketName: this.ledger.publisher.failureBucket.bucketName,
      EventBusName: this.ledger.publisher.bus.eventBusName,
      AlarmTopicArn: this.ledger.alarms.topic.topicArn,
    };
    for (const [name, value] of Object.entries(outputs)) new CfnOutput(this, name, { value });
  }
}
