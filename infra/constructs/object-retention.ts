import { Duration } from 'aws-cdk-lib';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import { Effect, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { FilterCriteria, FilterRule, StartingPosition } from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import type { Bucket } from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { TTL_REMOVER } from '../../shared/adapters/stream-keys.js';
import { PutOnlyS3Destination } from './event-publisher.js';
import type { LedgerFunction } from './ledger-function.js';
import { batchSizeOf } from './function-names.js';

export interface ObjectRetentionProps {
  readonly retention: LedgerFunction;
  readonly table: ITable;
  /** The bucket of evidence, spilled payloads and result bodies, whose objects expire with their records. */
  readonly evidenceBucket: Bucket;
  /** Where batches whose objects could not be deleted are parked (the stream forgets after 24 hours). */
  readonly failureBucket: Bucket;
}

/**
 * The objects of a ledger record go when DynamoDB's TTL removes the record (CONTRACT §7): the
 * table's stream feeds the retention function, filtered by the event source mapping so that it is
 * invoked only for TTL REMOVE records (`userIdentity` is DynamoDB's own service principal; a
 * person's DeleteItem is never passed on). A failing record is retried, bisecting the batch; when the
 * retries are spent the invocation record lands in the failure bucket; each failed try counts RetentionFailures, whose alarm
 * fires: the objects stay until a person acts, or until the bucket's backstop age rule (ledger-storage.ts) takes them.
 *
 * The retention function is the only one that may delete objects: ListBucket (to find a
 * dispatch's folders) and DeleteObject on the evidence bucket; on the table, its stream and the two
 * items by key it looks at before deleting (the state: does the dispatch live on? the anchor: put back,
 * or is the id taken again?).
 */
export class ObjectRetention extends Construct {
  constructor(scope: Construct, id: string, props: ObjectRetentionProps) {
    super(scope, id);
    const fn = props.retention.function;
    fn.addEventSource(
      new DynamoEventSource(props.table, {
        startingPosition: StartingPosition.TRIM_HORIZON,
        // Nothing waits on a deletion: fuller batches, fewer invocations.
        batchSize: batchSizeOf('retention'),
        maxBatchingWindow: Duration.minutes(1),
        filters: [
          FilterCriteria.filter({
            eventName: FilterRule.isEqual('REMOVE'),
            userIdentity: { type: FilterRule.isEqual(TTL_REMOVER.type), principalId: FilterRule.isEqual(TTL_REMOVER.principalId) },
          }),
        ],
        bisectBatchOnError: true,
        reportBatchItemFailures: true,
        retryAttempts: 10,
        // The stream keeps a record 24 hours: retry for as long as it can be read.
        maxRecordAge: Duration.hours(24),
        onFailure: new PutOnlyS3Destination(props.failureBucket),
      }),
    );
    fn.addToRolePolicy(new PolicyStatement({ effect: Effect.ALLOW, actions: ['s3:ListBucket'], resources: [props.evidenceBucket.bucketArn] }));
    fn.addToRolePolicy(new PolicyStatement({ effect: Effect.ALLOW, actions: ['s3:DeleteObject'], resources: [props.evidenceBucket.arnForObjects('*')] }));
    // Before deleting a dispatch's objects: does its state live on (then its anchor is put back), or
    // does a new anchor hold the id? Items by key only.
    fn.addToRolePolicy(new PolicyStatement({ effect: Effect.ALLOW, actions: ['dynamodb:GetItem', 'dynamodb:PutItem'], resources: [props.table.tableArn] }));
  }
}
