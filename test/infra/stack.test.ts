import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Match } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEDGER_TABLE_DEFINITION } from '../../shared/adapters/ledger-table.js';
import { CONTRACT_METRICS, FLOW_GAUGES } from '@dispatch-ledger/cdk';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { DispatchLedgerStack } from '../../infra/stack.js';
import { longestOpenSeconds, objectBackstopDays } from '../../shared/usecases/retention-backstop.js';
import { logicalId, synthesizeLedger, type Synthesized } from './synth.js';

type Resource = { readonly Type: string; readonly Properties?: Record<string, unknown>; readonly DeletionPolicy?: string };

let synth: Synthesized;
let resources: Record<string, Resource>;
const ofType = (type: string): Array<[string, Resource]> => Object.entries(resources).filter(([, resource]) => resource.Type === type);
const props = (id: string): Record<string, unknown> => resources[id]?.Properties ?? {};

beforeAll(() => {
  synth = synthesizeLedger();
  resources = synth.template.toJSON().Resources as Record<string, Resource>;
});
afterAll(() => synth.dispose());

describe('DispatchLedger stack: queues', () => {
  it('encrypts both queues and refuses plain HTTP to them', () => {
    const { stack } = synth;
    for (const queue of [stack.ledger.intake.queue, stack.ledger.intake.deadLetterQueue]) {
      const id = logicalId(stack, queue);
      expect(props(id).SqsManagedSseEnabled).toBe(true);
      synth.template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: Match.arrayWith([{ Ref: id }]),
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({ Effect: 'Deny', Action: 'sqs:*', Condition: { Bool: { 'aws:SecureTransport': 'false' } }, Principal: { AWS: '*' } }),
          ]),
        },
      });
    }
  });

  it('dead-letters after at least 5 receives, with a visibility of at least 6 × the intake timeout', () => {
    const { stack } = synth;
    const queue = props(logicalId(stack, stack.ledger.intake.queue));
    const redrive = queue.RedrivePolicy as { maxReceiveCount: number; deadLetterTargetArn: unknown };
    expect(redrive.maxReceiveCount).toBeGreaterThanOrEqual(5);
    expect(redrive.deadLetterTargetArn).toEqual({ 'Fn::GetAtt': [logicalId(stack, stack.ledger.intake.deadLetterQueue), 'Arn'] });
    const intakeTimeout = props(logicalId(stack, stack.ledger.functions.intake.function)).Timeout as number;
    expect(queue.VisibilityTimeout).toBeGreaterThanOrEqual(6 * intakeTimeout);
  });

  it('reads the dispatch queue with partial batch failures', () => {
    const { stack } = synth;
    synth.template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [logicalId(stack, stack.ledger.intake.queue), 'Arn'] },
      FunctionName: { Ref: logicalId(stack, stack.ledger.functions.intake.function) },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
  });

  it('refuses a maxReceiveCount under 5 at synth time', async () => {
    const { DispatchLedgerStack } = await import('../../infra/stack.js');
    const { App } = await import('aws-cdk-lib');
    const app = new App();
    expect(() => new DispatchLedgerStack(app, 'S', { ledger: { maxReceiveCount: 3 } })).toThrow(/maxReceiveCount must be a whole number from 5 to 1000, got 3/);
  });

  // Regression: 5.5 and 1001 passed the synth and failed the deploy (SQS takes a whole number from 1 to 1,000).
  it('refuses a maxReceiveCount that is no whole number or over 1,000 at synth time', async () => {
    const { DispatchLedgerStack } = await import('../../infra/stack.js');
    const { App } = await import('aws-cdk-lib');
    for (const maxReceiveCount of [5.5, 1001, Number.NaN]) {
      expect(() => new DispatchLedgerStack(new App(), 'S', { ledger: { maxReceiveCount } }), String(maxReceiveCount)).toThrow(/maxReceiveCount must be a whole number from 5 to 1000/);
    }
  });
});

describe('DispatchLedger stack: table and buckets', () => {
  it('makes the ledger table on-demand, point-in-time recoverable, streamed, expiring and deletion-protected', () => {
    const { stack } = synth;
    const id = logicalId(stack, stack.ledger.storage.table);
    expect(resources[id]?.DeletionPolicy).toBe('Retain');
    expect(props(id)).toMatchObject({
      BillingMode: 'PAY_PER_REQUEST',
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      StreamSpecification: { StreamViewType: 'NEW_AND_OLD_IMAGES' },
      TimeToLiveSpecification: { AttributeName: LEDGER_TABLE_DEFINITION.ttlAttribute, Enabled: true },
      DeletionProtectionEnabled: true,
      KeySchema: LEDGER_TABLE_DEFINITION.keySchema,
    });
  });

  it('gives the table exactly the indexes the adapters query, with their projections', () => {
    const { stack } = synth;
    const indexes = props(logicalId(stack, stack.ledger.storage.table)).GlobalSecondaryIndexes as Array<{ IndexName: string; KeySchema: unknown; Projection: { ProjectionType: string } }>;
    expect(indexes.map(({ IndexName, KeySchema, Projection }) => ({ IndexName, KeySchema, Projection: { ProjectionType: Projection.ProjectionType } }))).toEqual(
      LEDGER_TABLE_DEFINITION.globalSecondaryIndexes.map(({ IndexName, KeySchema, Projection }) => ({ IndexName, KeySchema, Projection: { ProjectionType: Projection?.ProjectionType } })),
    );
    // Flow control (CONTRACT §11): dispatches waiting for a slot, by target partition and admission order.
    expect(indexes.find((index) => index.IndexName === 'waiting')).toEqual({
      IndexName: 'waiting',
      KeySchema: [{ AttributeName: 'waitKey', KeyType: 'HASH' }, { AttributeName: 'waitAt', KeyType: 'RANGE' }],
      Projection: { ProjectionType: 'KEYS_ONLY' },
    });
    const attributes = props(logicalId(stack, stack.ledger.storage.table)).AttributeDefinitions as Array<{ AttributeName: string; AttributeType: string }>;
    expect(attributes).toEqual(expect.arrayContaining([{ AttributeName: 'waitKey', AttributeType: 'S' }, { AttributeName: 'waitAt', AttributeType: 'S' }]));
  });

  it('keeps both buckets private, encrypted and TLS-only; failed batches expire after the retention, evidence by a backstop rule past the longest a dispatch stays open', () => {
    const { stack } = synth;
    // Evidence, payloads and result bodies go with their records (the retention function); the age rule
    // only catches what that missed, so it is longer than the retention plus the longest a dispatch may stay open.
    for (const [bucket, days] of [[stack.ledger.storage.evidenceBucket, objectBackstopDays(90)], [stack.ledger.publisher.failureBucket, 90]] as const) {
      const id = logicalId(stack, bucket);
      expect(resources[id]?.DeletionPolicy).toBe('Retain');
      expect(props(id)).toMatchObject({
        PublicAccessBlockConfiguration: { BlockPublicAcls: true, BlockPublicPolicy: true, IgnorePublicAcls: true, RestrictPublicBuckets: true },
        BucketEncryption: { ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
        OwnershipControls: { Rules: [{ ObjectOwnership: 'BucketOwnerEnforced' }] },
        LifecycleConfiguration: { Rules: [{ ExpirationInDays: days, AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 }, Status: 'Enabled' }] },
      });
      synth.template.hasResourceProperties('AWS::S3::BucketPolicy', {
        Bucket: { Ref: id },
        PolicyDocument: {
          Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Action: 's3:*', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]),
        },
      });
    }
  });
});

describe('DispatchLedger stack: functions, schedule, stream and API', () => {
  it('runs every function on arm64, Node.js 22 or newer, with a log group that has a retention', () => {
    const functions = ofType('AWS::Lambda::Function');
    expect(functions.map(([id]) => id).sort()).toEqual(Object.values(synth.stack.ledger.functions).map((fn) => logicalId(synth.stack, fn.function)).sort());
    for (const [, fn] of functions) {
      expect(fn.Properties?.Architectures).toEqual(['arm64']);
      expect(String(fn.Properties?.Runtime)).toMatch(/^nodejs(2[2-9]|[3-9]\d)\.x$/);
      const logGroupRef = (fn.Properties?.LoggingConfig as { LogGroup: { Ref: string } }).LogGroup.Ref;
      expect(props(logGroupRef).RetentionInDays).toBe(30);
    }
  });

  it('refuses a Node.js runtime older than 22 at synth time', async () => {
    const { App, Stack } = await import('aws-cdk-lib');
    const { Runtime } = await import('aws-cdk-lib/aws-lambda');
    const { Duration } = await import('aws-cdk-lib');
    const { LedgerFunction } = await import('@dispatch-ledger/cdk');
    const stack = new Stack(new App(), 'Old');
    for (const [id, runtime] of [['N20', Runtime.NODEJS_20_X], ['N18', Runtime.NODEJS_18_X], ['Py', Runtime.PYTHON_3_12]] as const) {
      expect(() => new LedgerFunction(stack, id, { name: 'api', timeout: Duration.seconds(5), environment: {}, runtime })).toThrow(/Node.js 22 or newer/);
    }
    expect(() => new LedgerFunction(stack, 'N22', { name: 'api', timeout: Duration.seconds(5), environment: {}, runtime: Runtime.NODEJS_22_X })).not.toThrow();
  });

  it('enforces the principal registry in every function that reads callers', () => {
    const { stack } = synth;
    for (const name of ['intake', 'api'] as const) {
      const variables = (props(logicalId(stack, stack.ledger.functions[name].function)).Environment as { Variables: Record<string, unknown> }).Variables;
      expect(variables.PRINCIPAL_MODE).toBe('enforce');
      expect(variables.LEDGER_REGISTRY).toBeDefined();
    }
  });

  it('ticks the monitor every minute from an EventBridge schedule', () => {
    const { stack } = synth;
    synth.template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 minute)',
      State: 'ENABLED',
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [logicalId(stack, stack.ledger.functions.monitor.function), 'Arn'] }, RetryPolicy: { MaximumRetryAttempts: 0 } })],
    });
  });

  it('feeds the publisher from the table stream with bisection, bounded retries and an S3 on-failure destination', () => {
    const { stack } = synth;
    synth.template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [logicalId(stack, stack.ledger.storage.table), 'StreamArn'] },
      FunctionName: { Ref: logicalId(stack, stack.ledger.functions.publisher.function) },
      BisectBatchOnFunctionError: true,
      MaximumRetryAttempts: 10,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [logicalId(stack, stack.ledger.publisher.failureBucket), 'Arn'] } } },
    });
  });

  it('nothing forgotten: feeds retention from the table stream with only TTL removals, bisection, bounded retries and an S3 on-failure destination', () => {
    const { stack } = synth;
    const mappings = ofType('AWS::Lambda::EventSourceMapping').filter(([, mapping]) => JSON.stringify(mapping.Properties?.FunctionName) === JSON.stringify({ Ref: logicalId(stack, stack.ledger.functions.retention.function) }));
    expect(mappings).toHaveLength(1);
    const mapping = mappings[0]?.[1].Properties ?? {};
    expect(mapping).toMatchObject({
      EventSourceArn: { 'Fn::GetAtt': [logicalId(stack, stack.ledger.storage.table), 'StreamArn'] },
      StartingPosition: 'TRIM_HORIZON',
      BisectBatchOnFunctionError: true,
      MaximumRetryAttempts: 10,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [logicalId(stack, stack.ledger.publisher.failureBucket), 'Arn'] } } },
    });
    // A REMOVE DynamoDB's TTL made, never one a person or a function made with DeleteItem.
    const patterns = (mapping.FilterCriteria as { Filters: Array<{ Pattern: string }> }).Filters.map((filter) => JSON.parse(filter.Pattern) as unknown);
    expect(patterns).toEqual([{ eventName: ['REMOVE'], userIdentity: { type: ['Service'], principalId: ['dynamodb.amazonaws.com'] } }]);
    // The publisher sees every record of a dispatch's items and of rejections (TTL removals included),
    // and none of the counter, slot, registry and settings items: its own counter writes never wake it.
    const publisher = ofType('AWS::Lambda::EventSourceMapping').find(([, candidate]) => JSON.stringify(candidate.Properties?.FunctionName) === JSON.stringify({ Ref: logicalId(stack, stack.ledger.functions.publisher.function) }));
    const publisherPatterns = (publisher?.[1].Properties?.FilterCriteria as { Filters: Array<{ Pattern: string }> }).Filters.map((filter) => JSON.parse(filter.Pattern) as unknown);
    expect(publisherPatterns).toEqual([{ dynamodb: { Keys: { pk: { S: [{ prefix: 'D#' }] } } } }, { dynamodb: { Keys: { pk: { S: [{ prefix: 'REJ#' }] } } } }]);
    const variables = (props(logicalId(stack, stack.ledger.functions.retention.function)).Environment as { Variables: Record<string, unknown> }).Variables;
    expect(variables.EVIDENCE_BUCKET).toEqual({ Ref: logicalId(stack, stack.ledger.storage.evidenceBucket) });
  });

  it('publishes on a bus named dispatch-ledger', () => {
    synth.template.hasResourceProperties('AWS::Events::EventBus', { Name: 'dispatch-ledger' });
  });

  it('puts IAM auth on every route: the only HTTP entry is an AWS_IAM function URL, and nothing grants anonymous invocation', () => {
    const urls = ofType('AWS::Lambda::Url');
    expect(urls.length).toBeGreaterThan(0);
    for (const [, url] of urls) expect(url.Properties?.AuthType).toBe('AWS_IAM');
    expect(ofType('AWS::ApiGateway::RestApi')).toEqual([]);
    for (const [, route] of ofType('AWS::ApiGatewayV2::Route')) expect(route.Properties?.AuthorizationType).toBe('AWS_IAM');
    for (const [, permission] of ofType('AWS::Lambda::Permission')) expect(permission.Properties?.Principal).not.toBe('*');
  });
});

describe('DispatchLedger stack: alarms and dashboard', () => {
  const alarmOn = (needle: string): Record<string, unknown> => {
    const match = ofType('AWS::CloudWatch::Alarm').find(([, alarm]) => JSON.stringify(alarm.Properties).includes(needle));
    if (!match) throw new Error(`no alarm mentions ${needle}`);
    return match[1].Properties ?? {};
  };
  const topicRef = () => ({ Ref: logicalId(synth.stack, synth.stack.ledger.alarms.topic as never) });

  it('pages on OrphanedDispatches ≥ 1 in the DispatchLedger namespace, summed over every target, with an action', () => {
    const alarm = alarmOn('OrphanedDispatches');
    const metrics = alarm.Metrics as Array<{ Expression?: string; ReturnData?: boolean }>;
    expect(metrics.find((metric) => metric.ReturnData !== false)?.Expression).toBe('SELECT SUM(OrphanedDispatches) FROM SCHEMA("DispatchLedger", Target)');
    expect(alarm).toMatchObject({ Threshold: 1, ComparisonOperator: 'GreaterThanOrEqualToThreshold', TreatMissingData: 'notBreaching', EvaluationPeriods: 1 });
    expect(alarm.AlarmActions).toEqual([topicRef()]);
  });

  it('pages on any message in the DLQ, treating a quiet queue as healthy rather than INSUFFICIENT_DATA', () => {
    const dlq = logicalId(synth.stack, synth.stack.ledger.intake.deadLetterQueue);
    const alarm = ofType('AWS::CloudWatch::Alarm')
      .map(([, resource]) => resource.Properties ?? {})
      .find((candidate) => candidate.MetricName === 'ApproximateNumberOfMessagesVisible' && JSON.stringify(candidate.Dimensions).includes(dlq));
    expect(alarm).toMatchObject({ Namespace: 'AWS/SQS', Statistic: 'Maximum', Threshold: 1, ComparisonOperator: 'GreaterThanOrEqualToThreshold', TreatMissingData: 'notBreaching' });
    expect(alarm?.AlarmActions).toEqual([topicRef()]);
  });

  it('pages on stalls, unobservable runs, publisher failures, publisher lag, retention failures and every function\'s errors', () => {
    for (const needle of ['StalledRuns', 'UnobservableRuns', 'PublishFailures', 'IteratorAge', 'RetentionFailures']) expect(alarmOn(needle).AlarmActions).toEqual([topicRef()]);
    // Retention reports a failed record alone (its invocation succeeds: no Errors datapoint), so its own count is alarmed.
    expect(alarmOn('RetentionFailures')).toMatchObject({ Namespace: 'DispatchLedger', MetricName: 'RetentionFailures', Threshold: 1, ComparisonOperator: 'GreaterThanOrEqualToThreshold' });
    for (const fn of Object.values(synth.stack.ledger.functions)) {
      const id = logicalId(synth.stack, fn.function);
      const errors = ofType('AWS::CloudWatch::Alarm').find(([, alarm]) => alarm.Properties?.MetricName === 'Errors' && JSON.stringify(alarm.Properties?.Dimensions).includes(id));
      expect(errors?.[1].Properties?.AlarmActions).toEqual([topicRef()]);
    }
  });

  it('nothing forgotten: pages on the retention function\'s errors and graphs what it deletes', () => {
    const id = logicalId(synth.stack, synth.stack.ledger.functions.retention.function);
    const errors = ofType('AWS::CloudWatch::Alarm').find(([, alarm]) => alarm.Properties?.MetricName === 'Errors' && JSON.stringify(alarm.Properties?.Dimensions).includes(id));
    expect(errors?.[1].Properties).toMatchObject({ Namespace: 'AWS/Lambda', Statistic: 'Sum', Threshold: 1, ComparisonOperator: 'GreaterThanOrEqualToThreshold', TreatMissingData: 'notBreaching' });
    expect(errors?.[1].Properties?.AlarmActions).toEqual([topicRef()]);
    const [[, dashboard] = ['', { Type: '' }]] = ofType('AWS::CloudWatch::Dashboard');
    const body = JSON.stringify(dashboard.Properties?.DashboardBody);
    expect(body).toContain('ExpiredObjectsDeleted');
    expect(body).toContain(id);
  });

  it('sends alarms to a topic the caller passes instead of its own', async () => {
    const { Topic } = await import('aws-cdk-lib/aws-sns');
    const { App, Stack } = await import('aws-cdk-lib');
    const { Template } = await import('aws-cdk-lib/assertions');
    const { DispatchLedger } = await import('@dispatch-ledger/cdk');
    const app = new App();
    const stack = new Stack(app, 'Own');
    const topic = new Topic(stack, 'Pager');
    new DispatchLedger(stack, 'Ledger', { alarmTopic: topic });
    const template = Template.fromStack(stack);
    template.resourceCountIs('AWS::SNS::Topic', 1);
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm'));
    expect(alarms.length).toBeGreaterThan(0);
    for (const alarm of alarms) expect((alarm as Resource).Properties?.AlarmActions).toEqual([{ Ref: stack.getLogicalId(topic.node.defaultChild as never) }]);
  });

  it('graphs every contract metric on the dashboard', () => {
    const [[, dashboard] = ['', { Type: '' }]] = ofType('AWS::CloudWatch::Dashboard');
    const body = JSON.stringify(dashboard.Properties?.DashboardBody);
    for (const metric of CONTRACT_METRICS) expect(body).toContain(`SUM(${metric})`);
  });

  it('graphs the flow-control gauges by target at their level (their maximum), never summed (CONTRACT §7, §11)', () => {
    const [[, dashboard] = ['', { Type: '' }]] = ofType('AWS::CloudWatch::Dashboard');
    const body = JSON.stringify(dashboard.Properties?.DashboardBody);
    expect(FLOW_GAUGES).toEqual(['WaitingDispatches', 'SlotsHeldByUnknownRuns']);
    for (const metric of FLOW_GAUGES) {
      // The body is JSON inside the template's JSON: the namespace's quotes arrive escaped twice.
      expect(body).toMatch(new RegExp(`SELECT MAX\\(${metric}\\) FROM SCHEMA\\([\\\\"]+DispatchLedger[\\\\"]+, Target\\) GROUP BY Target`));
      expect(body).not.toContain(`SUM(${metric})`);
    }
  });
});

describe('DispatchLedger stack: the synthesized function bundles', () => {
  it('carry no fault injection: the census switch is compiled out of every asset cdk synth deploys (the package\'s prebuilt bundles)', () => {
    const bundles = readdirSync(synth.outdir)
      .filter((entry) => entry.startsWith('asset.') && existsSync(path.join(synth.outdir, entry, 'index.mjs')))
      .map((entry) => readFileSync(path.join(synth.outdir, entry, 'index.mjs'), 'utf8'));
    // Every ledger function is an asset (intake, api, monitor, publisher, retention, failures).
    expect(bundles.length).toBeGreaterThanOrEqual(5);
    for (const [index, text] of bundles.entries()) expect(/injected (crash|throttle|timeout)/.test(text), `bundle ${index} injects faults`).toBe(false);
    // Each is a ledger function that had the fault points in its source (the intake's crash text is
    // in the unbundled source, so the absence above is the define at work, not a missing file).
    expect(bundles.filter((text) => text.includes('dispatch-ledger')).length).toBeGreaterThanOrEqual(5);
  });
});

describe('DispatchLedger stack: the monitor knows its schedule', () => {
  it('tells the monitor its period, so a dispatch it failed on is tried again one tick later', () => {
    const { stack } = synth;
    const monitor = props(logicalId(stack, stack.ledger.functions.monitor.function)) as { Environment?: { Variables?: Record<string, unknown> } };
    expect(monitor.Environment?.Variables?.['MONITOR_PERIOD_SECONDS']).toBe('60');
  });
});

describe('DispatchLedger stack: the evidence bucket\'s backstop rule (CONTRACT §7)', () => {
  it('expires objects by age only past the configured retention plus the longest a dispatch may stay open (was: no age rule, so a spilled result body that retention did not plan was kept forever)', () => {
    for (const retentionDays of [1, 30, 365]) {
      // Only the bucket is under test.
      const app = new App();
      const stack = new DispatchLedgerStack(app, `Retention${retentionDays}`, { env: { account: '111122223333', region: 'eu-west-1' }, ledger: { retentionDays } });
      const template = Template.fromStack(stack).toJSON() as { Resources: Record<string, Resource> };
      const rules = (template.Resources[logicalId(stack, stack.ledger.storage.evidenceBucket)]?.Properties?.LifecycleConfiguration as { Rules: Array<{ ExpirationInDays?: number }> }).Rules;
      const expiry = rules.map((rule) => rule.ExpirationInDays).find((days) => days !== undefined);
      expect(expiry, `retentionDays ${retentionDays}`).toBe(objectBackstopDays(retentionDays));
      expect(expiry, `retentionDays ${retentionDays}`).toBeGreaterThan(retentionDays + longestOpenSeconds() / 86_400);
    }
  });
});
