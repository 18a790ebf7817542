import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
// As a consumer's app does: the construct from its package (built by `npm run build`), not from infra/constructs.
import { DispatchLedger, type DispatchLedgerProps } from '@dispatch-ledger/cdk';
import { ExampleLambdaWorker } from './example-lambda-worker.js';
import type { StackOutputName } from './outputs.js';

export interface DispatchLedgerStackProps extends StackProps {
  readonly ledger?: DispatchLedgerProps;
  /** Deploy the example Lambda worker (examples/lambda-worker) as the lambda target `example-worker`. @default false */
  readonly exampleLambdaWorker?: boolean;
}

/** The deployable stack: the `DispatchLedger` construct and the outputs the CLI and README refer to. */
export class DispatchLedgerStack extends Stack {
  readonly ledger: DispatchLedger;
  readonly exampleWorker?: ExampleLambdaWorker;

  constructor(scope: Construct, id: string, props: DispatchLedgerStackProps = {}) {
    super(scope, id, props);
    this.ledger = new DispatchLedger(this, 'Ledger', props.ledger);
    if (props.exampleLambdaWorker) this.exampleWorker = new ExampleLambdaWorker(this, 'ExampleWorker', { ledger: this.ledger });
    // Every name of STACK_OUTPUTS, and no other: the CLI's --stack reads them by these names.
    const outputs: Record<StackOutputName, string> = {
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
