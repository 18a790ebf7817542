import { CfnResource, Duration, Lazy, RemovalPolicy } from 'aws-cdk-lib';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import { EventBus } from 'aws-cdk-lib/aws-events';
import { AnyPrincipal, Effect, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { FilterCriteria, FilterRule, StartingPosition, type DlqDestinationConfig, type IEventSourceDlq, type IEventSourceMapping, type IFunction } from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import type { Bucket } from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import type { LedgerFunction } from './ledger-function.js';
import { privateBucket } from './ledger-storage.js';
import { EVENT_SOURCE } from '../../shared/events/names.js';
import { PUBLISHED_KEY_PREFIXES } from '../../shared/adapters/stream-keys.js';
import { batchSizeOf } from './function-names.js';

export interface EventPublisherProps {
  readonly publisher: LedgerFunction;
  readonly table: ITable;
  /** @default 'dispatch-ledger' (CONTRACT §3) */
  readonly eventBusName?: string;
  /** Days the records of failed batches are kept for `ledger stream replay`. */
  readonly failureRetentionDays: number;
  readonly removalPolicy: RemovalPolicy;
}

/**
 * The S3 on-failure destination with only what Lambda needs to write the record (PutObject, and
 * ListBucket), where CDK's `S3OnFailureDestination` grants the function read, write and delete.
 */
export class PutOnlyS3Destination implements IEventSourceDlq {
  constructor(private readonly bucket: Bucket) {}

  bind(_mapping: IEventSourceMapping, handler: IFunction): DlqDestinationConfig {
    handler.addToRolePolicy(new PolicyStatement({ effect: Effect.ALLOW, actions: ['s3:PutObject'], resources: [this.bucket.arnForObjects('*')] }));
    handler.addToRolePolicy(new PolicyStatement({ effect: Effect.ALLOW, actions: ['s3:ListBucket'], resources: [this.bucket.bucketArn] }));
    return { destination: this.bucket.bucketArn };
  }
}

/**
 * The outbox: the ledger table's stream feeds the publisher, which puts the contract's events on the
 * `dispatch-ledger` bus. A failing record is retried (bisecting the batch to isolate it); when the
 * retries are spent the whole invocation record — stream records included — lands in the failure
 * bucket, because the stream itself forgets after 24 hours. `ledger stream replay` publishes them.
 *
 * Only the ledger publishes the ledger's events (CONTRACT §3 v2): the bus's resource policy denies
 * PutEvents with source `dispatch-ledger` to every principal but the publisher's role and those named
 * with {@link allowLedgerPublisher} (the operators, whose `ledger stream replay` republishes parked
 * batches) — so a forged `Dispatch Handled` from an origin, a target or anyone else in the account is
 * refused, whatever their own IAM policy allows.
 */
export class EventPublisher extends Construct {
  readonly bus: EventBus;
  readonly failureBucket: Bucket;
  private readonly publisherArns: string[] = [];
  private readonly publisherIds: string[] = [];

  constructor(scope: Construct, id: string, props: EventPublisherProps) {
    super(scope, id);
    this.bus = new EventBus(this, 'Bus', { eventBusName: props.eventBusName ?? 'dispatch-ledger' });
    this.failureBucket = privateBucket(this, 'Failures', { expireAfterDays: props.failureRetentionDays, removalPolicy: props.removalPolicy });
    props.publisher.function.addEventSource(
      new DynamoEventSource(props.table, {
        startingPosition: StartingPosition.TRIM_HORIZON,
        batchSize: batchSizeOf('publisher'),
        maxBatchingWindow: Duration.seconds(1),
        bisectBatchOnError: true,
        reportBatchItemFailures: true,
        retryAttempts: 10,
        maxRecordAge: Duration.hours(6),
        onFailure: new PutOnlyS3Destination(this.failureBucket),
        // Only the items it reads: its own counter writes (and slot, registry, settings items) never wake it.
        filters: PUBLISHED_KEY_PREFIXES.map((prefix) => FilterCriteria.filter({ dynamodb: { Keys: { pk: { S: FilterRule.beginsWith(prefix) } } } })),
      }),
    );
    this.bus.grantPutEventsTo(props.publisher.function);

    const role = props.publisher.function.role;
    if (!role) throw new Error('the publisher function has no role');
    this.publisherArns.push(role.roleArn);
    // Every condition must hold for the Deny: a principal in either list is not denied. Built at
    // synthesis, so the operators added after construction are in it.
    const sid = 'OnlyTheLedgerPublishesLedgerEvents';
    const statement = (): PolicyStatement =>
      new PolicyStatement({
        sid,
        effect: Effect.DENY,
        principals: [new AnyPrincipal()],
        actions: ['events:PutEvents'],
        resources: [this.bus.eventBusArn],
        conditions: {
          StringEquals: { 'events:source': EVENT_SOURCE },
          ArnNotEquals: { 'aws:PrincipalArn': this.publisherArns },
          ...(this.publisherIds.length > 0 ? { StringNotLike: { 'aws:userid': this.publisherIds } } : {}),
        },
      });
    // A plain resource: CfnEventBusPolicy's constructor trips its own deprecation warning (`principal`).
    new CfnResource(this, 'OnlyLedgerPublishes', {
      type: 'AWS::Events::EventBusPolicy',
      properties: { EventBusName: this.bus.eventBusName, StatementId: sid, Statement: Lazy.any({ produce: () => statement().toJSON() }) },
    });
  }

  /**
   * Lets this identity put events with source `dispatch-ledger` past the bus policy (it still needs
   * its own grant): by role ARN, or by unique id (`AROA…`/`AIDA…`, any session of it).
   */
  allowLedgerPublisher(identity: { readonly roleArn: string } | { readonly principalId: string }): void {
    if ('roleArn' in identity) this.publisherArns.push(identity.roleArn);
    else this.publisherIds.push(identity.principalId, `${identity.principalId}:*`);
  }
}
