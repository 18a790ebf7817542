import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { CreateQueueCommand, GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import {
  CreateEventBusCommand,
  PutRuleCommand,
  PutTargetsCommand,
  ResourceAlreadyExistsException,
  type EventBridgeClient,
} from '@aws-sdk/client-eventbridge';
import { CreateTableCommand, DescribeTableCommand, ResourceInUseException, UpdateTimeToLiveCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { CreateStateMachineCommand, StateMachineAlreadyExists, UpdateStateMachineCommand, type SFNClient } from '@aws-sdk/client-sfn';
import { LEDGER_TABLE_DEFINITION } from '../shared/adapters/ledger-table.js';
import type { LocalClients } from './clients.js';
import { DEMO_FLOW_DEFINITION, DEMO_FLOW_NAME, DEMO_FLOW_ROLE_ARN } from './demo-flow.js';

/** Names of the local platform's resources (the CDK stack names its own). */
export const LOCAL_NAMES = {
  ledgerTable: 'dispatch-ledger',
  dispatchQueue: 'dispatch-ledger-dispatch',
  dispatchDlq: 'dispatch-ledger-dispatch-dlq',
  eventBus: 'dispatch-ledger',
  eventLogRule: 'dispatch-ledger-event-log',
  eventLogQueue: 'dispatch-ledger-event-log',
  evidenceBucket: 'dispatch-ledger-evidence',
  lambdaFailuresQueue: 'dispatch-ledger-lambda-failures',
  exampleWorkerRuns: 'dispatch-ledger-example-worker-runs',
  lambdaFailuresDlq: 'dispatch-ledger-lambda-failures-dlq',
  orchestratorsQueue: 'dispatch-ledger-orchestrators',
  orchestratorsDlq: 'dispatch-ledger-orchestrators-dlq',
  demoFlow: DEMO_FLOW_NAME,
} as const;

/** As in the deployed stack: SQS retries a message this often before the DLQ takes it. */
export const DISPATCH_MAX_RECEIVE_COUNT = 5;

export interface QueueRef {
  readonly url: string;
  readonly arn: string;
}

/** Creates (or finds) a queue and returns its URL and ARN. */
export async function ensureQueue(
  sqs: SQSClient,
  name: string,
  attributes: Record<string, string> = {},
): Promise<QueueRef> {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
  if (!QueueUrl) throw new Error(`CreateQueue ${name} returned no URL`);
  const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['QueueArn'] }));
  const arn = Attributes?.QueueArn;
  if (!arn) throw new Error(`queue ${name} has no ARN`);
  return { url: QueueUrl, arn };
}

/** A queue with a DLQ that takes each message after `maxReceiveCount` receives. */
export async function ensureQueueWithDlq(
  sqs: SQSClient,
  name: string,
  options: { dlqName: string; maxReceiveCount: number; visibilityTimeoutSeconds: number },
): Promise<{ queue: QueueRef; dlq: QueueRef }> {
  const dlq = await ensureQueue(sqs, options.dlqName, { MessageRetentionPeriod: '1209600' });
  const queue = await ensureQueue(sqs, name, {
    VisibilityTimeout: String(options.visibilityTimeoutSeconds),
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.arn, maxReceiveCount: String(options.maxReceiveCount) }),
  });
  return { queue, dlq };
}

/**
 * The local bus and its catch-all rule: every event on the bus is delivered, as EventBridge delivers
 * it, to a queue in moto, from which the platform appends it to the event log file.
 */
export async function ensureEventBusWithLog(
  eventBridge: EventBridgeClient,
  motoSqs: SQSClient,
  names: { bus: string; rule: string; queue: string },
): Promise<{ busName: string; logQueue: QueueRef }> {
  try {
    await eventBridge.send(new CreateEventBusCommand({ Name: names.bus }));
  } catch (error) {
    if (!(error instanceof ResourceAlreadyExistsException)) throw error;
  }
  const logQueue = await ensureQueue(motoSqs, names.queue);
  await eventBridge.send(
    new PutRuleCommand({
      Name: names.rule,
      EventBusName: names.bus,
      // Every source has a prefix of "": the catch-all pattern.
      EventPattern: JSON.stringify({ source: [{ prefix: '' }] }),
      State: 'ENABLED',
    }),
  );
  const targets = await eventBridge.send(
    new PutTargetsCommand({ Rule: names.rule, EventBusName: names.bus, Targets: [{ Id: 'event-log', Arn: logQueue.arn }] }),
  );
  if ((targets.FailedEntryCount ?? 0) > 0) throw new Error(`could not target the event log queue: ${JSON.stringify(targets.FailedEntries)}`);
  return { busName: names.bus, logQueue };
}

export async function ensureBucket(s3: S3Client, name: string): Promise<string> {
  try {
    await s3.send(new CreateBucketCommand({ Bucket: name }));
  } catch (error) {
    const code = (error as { name?: string }).name;
    if (code !== 'BucketAlreadyOwnedByYou' && code !== 'BucketAlreadyExists') throw error;
  }
  return name;
}

/** A worker kit's run-state table as `ledger.addLambdaTarget` makes it: one item per run, keyed `runId`. */
export async function ensureKitRunTable(dynamodb: DynamoDBClient, name: string): Promise<string> {
  try {
    await dynamodb.send(new CreateTableCommand({ TableName: name, BillingMode: 'PAY_PER_REQUEST', AttributeDefinitions: [{ AttributeName: 'runId', AttributeType: 'S' }], KeySchema: [{ AttributeName: 'runId', KeyType: 'HASH' }] }));
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
  }
  return name;
}

/**
 * Whether tables made here get DynamoDB's TTL, unless a caller says: yes, except under the integration
 * tests (`DISPATCH_LEDGER_LOCAL_TTL=off`, set by vitest.config.ts). The tests run on a fixed clock in
 * the past, so every final record they write is already expired by the real clock, and DynamoDB Local's
 * sweeper (real clock) deletes it seconds later, mid-test. The ledger never relies on TTL deletion — it
 * compares the expiry attribute (REFERENCES: deletes lag up to days) — so nothing it does changes.
 */
const ttlByDefault = (): boolean => process.env.DISPATCH_LEDGER_LOCAL_TTL !== 'off';

/**
 * The ledger table as the stack defines it: on-demand, its indexes, a stream for the publisher, TTL.
 * `stream: false` leaves the stream off (the scale bench seeds a table first, then turns it on).
 */
export async function ensureLedgerTable(dynamodb: DynamoDBClient, name: string, options?: { ttl?: boolean; stream?: true }): Promise<{ name: string; streamArn: string }>;
export async function ensureLedgerTable(dynamodb: DynamoDBClient, name: string, options: { ttl?: boolean; stream: false }): Promise<{ name: string; streamArn: undefined }>;
export async function ensureLedgerTable(dynamodb: DynamoDBClient, name: string, options: { ttl?: boolean; stream?: boolean }): Promise<{ name: string; streamArn: string | undefined }>;
export async function ensureLedgerTable(dynamodb: DynamoDBClient, name: string, options: { ttl?: boolean; stream?: boolean } = {}): Promise<{ name: string; streamArn: string | undefined }> {
  const stream = options.stream ?? true;
  let streamArn: string | undefined;
  try {
    const created = await dynamodb.send(
      new CreateTableCommand({
        TableName: name,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: LEDGER_TABLE_DEFINITION.attributeDefinitions,
        KeySchema: LEDGER_TABLE_DEFINITION.keySchema,
        GlobalSecondaryIndexes: LEDGER_TABLE_DEFINITION.globalSecondaryIndexes,
        ...(stream ? { StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' } } : {}),
      }),
    );
    streamArn = created.TableDescription?.LatestStreamArn;
    if (options.ttl ?? ttlByDefault()) await dynamodb.send(
      new UpdateTimeToLiveCommand({ TableName: name, TimeToLiveSpecification: { Enabled: true, AttributeName: LEDGER_TABLE_DEFINITION.ttlAttribute } }),
    );
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
    const described = await dynamodb.send(new DescribeTableCommand({ TableName: name }));
    streamArn = described.Table?.LatestStreamArn;
  }
  if (stream && !streamArn) throw new Error(`table ${name} has no stream`);
  // Asked for none: none, even from a table that existed with one.
  return { name, streamArn: stream ? streamArn : undefined };
}

/**
 * A Standard state machine (CONTRACT §17), created or, when its name is taken, given this definition
 * and role. Returns its ARN.
 */
export async function ensureStateMachine(sfn: SFNClient, name: string, definition: unknown, roleArn: string): Promise<string> {
  const text = JSON.stringify(definition);
  try {
    const created = await sfn.send(new CreateStateMachineCommand({ name, definition: text, roleArn, type: 'STANDARD' }));
    if (!created.stateMachineArn) throw new Error(`CreateStateMachine ${name} returned no ARN`);
    return created.stateMachineArn;
  } catch (error) {
    if (!(error instanceof StateMachineAlreadyExists)) throw error;
    // The name's ARN, as Step Functions builds it (the message names the existing one).
    const arn = /arn:aws:states:[^'"\s]+/.exec(error.message)?.[0];
    if (!arn) throw error;
    await sfn.send(new UpdateStateMachineCommand({ stateMachineArn: arn, definition: text, roleArn }));
    return arn;
  }
}

export interface LocalResources {
  readonly dispatchQueue: QueueRef;
  readonly dlq: QueueRef;
  readonly eventBusName: string;
  readonly eventLogQueue: QueueRef;
  readonly evidenceBucket: string;
  readonly ledgerTable: string;
  /** The ledger table's stream: the event publisher's outbox. */
  readonly ledgerStreamArn: string;
  /** Lambda's on-failure destination of lambda targets (CONTRACT §12), read by the failures function. */
  readonly lambdaFailuresQueue: QueueRef;
  /** The example Lambda worker's run-state table (examples/lambda-worker, the target `example-worker`). */
  readonly exampleWorkerRuns: string;
  /**
   * The orchestrator queue (CONTRACT §17), read by the orchestrators function: in moto, beside its Step
   * Functions, whose `sqs:sendMessage.waitForTaskToken` tasks send to moto's own SQS (an approval request
   * reaches it as in AWS). moto sends no `aws.states` status changes: the monitor's lookup finds the ends.
   */
  readonly orchestratorsQueue: QueueRef;
  /** The `demo-flow` state machine's ARN (local/demo-flow.ts), the target `demo-sfn`. */
  readonly demoFlowArn: string;
}

/** Everything the local platform's functions use, created idempotently. */
export async function createLocalResources(
  clients: LocalClients,
  options: { dispatchVisibilityTimeoutSeconds: number; prefix?: string },
): Promise<LocalResources> {
  // A prefix gives a test its own set of resources on shared engines.
  const name = (base: string): string => (options.prefix ? `${options.prefix}-${base}` : base);
  const [{ queue, dlq }, bus, evidenceBucket, ledger, failures, exampleWorkerRuns, orchestrators, demoFlowArn] = await Promise.all([
    ensureQueueWithDlq(clients.sqs, name(LOCAL_NAMES.dispatchQueue), {
      dlqName: name(LOCAL_NAMES.dispatchDlq),
      maxReceiveCount: DISPATCH_MAX_RECEIVE_COUNT,
      visibilityTimeoutSeconds: options.dispatchVisibilityTimeoutSeconds,
    }),
    ensureEventBusWithLog(clients.eventBridge, clients.motoSqs, {
      bus: name(LOCAL_NAMES.eventBus),
      rule: name(LOCAL_NAMES.eventLogRule),
      queue: name(LOCAL_NAMES.eventLogQueue),
    }),
    ensureBucket(clients.s3, name(LOCAL_NAMES.evidenceBucket)),
    ensureLedgerTable(clients.dynamodb, name(LOCAL_NAMES.ledgerTable)),
    ensureQueueWithDlq(clients.sqs, name(LOCAL_NAMES.lambdaFailuresQueue), { dlqName: name(LOCAL_NAMES.lambdaFailuresDlq), maxReceiveCount: 5, visibilityTimeoutSeconds: 180 }),
    ensureKitRunTable(clients.dynamodb, name(LOCAL_NAMES.exampleWorkerRuns)),
    ensureQueueWithDlq(clients.motoSqs, name(LOCAL_NAMES.orchestratorsQueue), { dlqName: name(LOCAL_NAMES.orchestratorsDlq), maxReceiveCount: 5, visibilityTimeoutSeconds: 180 }),
    ensureStateMachine(clients.sfn, name(LOCAL_NAMES.demoFlow), DEMO_FLOW_DEFINITION, DEMO_FLOW_ROLE_ARN),
  ]);
  return {
    dispatchQueue: queue,
    dlq,
    eventBusName: bus.busName,
    eventLogQueue: bus.logQueue,
    evidenceBucket,
    ledgerTable: ledger.name,
    ledgerStreamArn: ledger.streamArn,
    lambdaFailuresQueue: failures.queue,
    exampleWorkerRuns,
    orchestratorsQueue: orchestrators.queue,
    demoFlowArn,
  };
}
