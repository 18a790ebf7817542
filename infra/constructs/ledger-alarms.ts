import { PUBLISH_FAILURES_METRIC, RETENTION_FAILURES_METRIC } from '../../shared/metric-names.js';
import { Duration, Stack } from 'aws-cdk-lib';
import {
  Alarm,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  MathExpression,
  Metric,
  TextWidget,
  TreatMissingData,
  type IMetric,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Topic, type ITopic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';

/** CloudWatch namespace of the contract's metrics (CONTRACT §7). */
export const METRIC_NAMESPACE = 'DispatchLedger';

/** The contract's metrics, each emitted with the single dimension `Target`. */
export const CONTRACT_METRICS = [
  'OrphanedDispatches',
  'StalledRuns',
  'UnobservableRuns',
  'ApprovalWaitsExpired',
  'BlockedDispatches',
  'RejectedMessages',
  'RecoveredRuns',
  'SubmissionRetries',
  'DroppedResults',
] as const;
export type ContractMetric = (typeof CONTRACT_METRICS)[number];

/**
 * The contract's levels (CONTRACT §7, §11): the monitor emits each one every tick for every target with
 * a `maxConcurrentRuns`, so a period's datapoints are the same level seen again — graphed by their
 * maximum, never summed.
 */
export const FLOW_GAUGES = ['WaitingDispatches', 'SlotsHeldByUnknownRuns'] as const;
export type FlowGauge = (typeof FLOW_GAUGES)[number];

/** Emitted without dimensions: by the publisher when events could not be put on the bus, by retention when objects could not be deleted. */
export { PUBLISH_FAILURES_METRIC, RETENTION_FAILURES_METRIC };
/** Emitted by the retention function, without dimensions: objects deleted with their expired records. */
export const EXPIRED_OBJECTS_METRIC = 'ExpiredObjectsDeleted';

/**
 * A contract metric summed over every target — the ones registered after deployment too — by a
 * CloudWatch Metrics Insights query (an alarm cannot sum a dimension otherwise).
 */
export function acrossTargets(metric: ContractMetric, period = Duration.minutes(1)): IMetric {
  return new MathExpression({
    expression: `SELECT SUM(${metric}) FROM SCHEMA("${METRIC_NAMESPACE}", Target)`,
    usingMetrics: {},
    period,
    label: `${metric} (all targets)`,
  });
}

/** A metric per target (Metrics Insights), aggregated over `minutes`. */
const perTarget = (aggregate: 'SUM' | 'MAX', metric: ContractMetric | FlowGauge, minutes: number): IMetric =>
  new MathExpression({
    expression: `SELECT ${aggregate}(${metric}) FROM SCHEMA("${METRIC_NAMESPACE}", Target) GROUP BY Target`,
    usingMetrics: {},
    period: Duration.minutes(minutes),
    label: metric,
  });

const byTarget = (metric: ContractMetric): IMetric => perTarget('SUM', metric, 5);
const gaugeByTarget = (metric: FlowGauge): IMetric => perTarget('MAX', metric, 1);

const GAUGE_TITLES: Readonly<Record<FlowGauge, string>> = {
  WaitingDispatches: 'WaitingDispatches (waiting for a slot, by target)',
  SlotsHeldByUnknownRuns: 'SlotsHeldByUnknownRuns (slots held by runs whose status is unknown)',
};

/**
 * The command that moves a DLQ's messages back to the queue it feeds, as an operator (`addOperator`):
 * `--stack` finds the dispatch queue's pair alone, so the others are named by URL, with the region (the
 * CLI signs for it, not the URL's) and the ledger table (which tells an operator's earlier redrive apart).
 * Tokens: CloudFormation writes them into the alarm's description.
 */
export function redriveCommand(scope: Construct, deadLetterQueue: IQueue, queue: IQueue | undefined, ledgerTableName: string | undefined): string {
  if (!queue) return '`ledger dlq redrive --dlq-url URL --queue-url URL --table LedgerTableName --region R`';
  return `\`ledger dlq redrive --dlq-url ${deadLetterQueue.queueUrl} --queue-url ${queue.queueUrl} --table ${ledgerTableName ?? 'LedgerTableName'} --region ${Stack.of(scope).region}\``;
}

export interface LedgerAlarmsProps {
  /** Where alarms go. @default a new SNS topic (subscribe to it after deploying) */
  readonly alarmTopic?: ITopic;
  readonly dispatchQueue: IQueue;
  readonly deadLetterQueue: IQueue;
  /** The DLQ of Lambda's on-failure records of lambda targets (CONTRACT §12). */
  readonly failuresDeadLetterQueue?: IQueue;
  /** The failures queue its DLQ's messages go back to: the alarm names the command with both URLs. @default the alarm names no URL */
  readonly failuresQueue?: IQueue;
  /** The ledger table's name, for the redrive commands the alarms name. @default a placeholder */
  readonly ledgerTableName?: string;
  readonly functions: Readonly<Record<string, IFunction>>;
  readonly publisher: IFunction;
  /** The function deleting expired records' objects (graphed; its errors alarm is among `functions`). */
  readonly retention: IFunction;
  /** Oldest unpublished stream record before the publisher is paged. @default 5 minutes */
  readonly maxIteratorAge?: Duration;
}

/**
 * The alarms a person is paged by, all into one SNS topic (alarm and OK), and a dashboard of the
 * contract's metrics. Every alarm treats missing data as "not breaching": the metrics it watches
 * are only emitted when something happens, and an alarm stuck in INSUFFICIENT_DATA pages nobody.
 */
export class LedgerAlarms extends Construct {
  readonly topic: ITopic;
  readonly alarms: Readonly<Record<string, Alarm>>;
  readonly dashboard: Dashboard;

  constructor(scope: Construct, id: string, props: LedgerAlarmsProps) {
    super(scope, id);
    this.topic = props.alarmTopic ?? new Topic(this, 'Topic', { displayName: 'Dispatch Ledger alarms', enforceSSL: true });
    const action = new SnsAction(this.topic);
    const alarms: Record<string, Alarm> = {};
    const alarm = (name: string, metric: IMetric, description: string, threshold = 1): Alarm => {
      const created = new Alarm(this, name, {
        metric,
        threshold,
        evaluationPeriods: 1,
        datapointsToAlarm: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
        alarmDescription: description,
      });
      created.addAlarmAction(action);
      created.addOkAction(action);
      alarms[name] = created;
      return created;
    };

    alarm(
      'OrphanedDispatches',
      acrossTargets('OrphanedDispatches'),
      'A run completed but its expected evidence is missing after the delivery grace: `ledger attention --kind orphan_no_delivery`, then fix delivery or redispatch.',
    );
    alarm(
      'DroppedResults',
      acrossTargets('DroppedResults'),
      'A result will never reach its origin (too many delivery attempts, or older than the origin\'s result TTL): `ledger attention --kind result_dropped`; the payload is kept (`ledger inbox list --state dropped`).',
    );
    alarm('StalledRuns', acrossTargets('StalledRuns'), 'A run went quiet while its target says it is still active: `ledger attention --kind unknown`; look at the run at its target.');
    alarm('UnobservableRuns', acrossTargets('UnobservableRuns'), 'A run cannot be looked up at its target (unreachable or 404): `ledger attention --kind unknown`; check the target.');
    // Messages land in the DLQ without being "sent" to it (NumberOfMessagesSent stays 0), and an idle
    // queue's metrics go quiet: watch the visible count, and read silence as an empty DLQ.
    alarm(
      'DeadLetterQueue',
      props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', period: Duration.minutes(1) }),
      // --stack: a bare `ledger dlq redrive` acts on the local platform (a review).
      `Intake could not take messages at all (e.g. the table was unavailable): fix the cause, then, as an operator: \`ledger dlq redrive --stack ${Stack.of(this).stackName} --region ${Stack.of(this).region}\`.`,
    );
    if (props.failuresDeadLetterQueue) {
      alarm(
        'LambdaFailuresDeadLetterQueue',
        props.failuresDeadLetterQueue.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', period: Duration.minutes(1) }),
        `A lambda target's failure record could not be taken in: its run stays unknown until looked up. Read the failures function's logs, then move the DLQ's messages back to the failures queue as an operator: ${redriveCommand(this, props.failuresDeadLetterQueue, props.failuresQueue, props.ledgerTableName)}.`,
      );
    }
    alarm(
      'PublishFailures',
      new Metric({ namespace: METRIC_NAMESPACE, metricName: PUBLISH_FAILURES_METRIC, statistic: 'Sum', period: Duration.minutes(1) }),
      'Events could not be put on the bus; the stream retries them, then parks them in the failure bucket: `ledger stream replay` once the bus is back.',
    );
    alarm(
      'RetentionFailures',
      new Metric({ namespace: METRIC_NAMESPACE, metricName: RETENTION_FAILURES_METRIC, statistic: 'Sum', period: Duration.minutes(5) }),
      "Objects of expired records could not be deleted; the stream retries them, then parks the batch in the failure bucket. Read the retention function's logs: the objects stay until a person deletes them or the bucket's backstop rule ages them out.",
    );
    alarm(
      'PublisherIteratorAge',
      props.publisher.metric('IteratorAge', { statistic: 'Maximum', period: Duration.minutes(1) }),
      'Events are published late: the publisher is failing or throttled. Check its logs and errors.',
      (props.maxIteratorAge ?? Duration.minutes(5)).toMilliseconds(),
    );
    for (const [name, fn] of Object.entries(props.functions)) {
      alarm(`${name}Errors`, fn.metricErrors({ statistic: 'Sum', period: Duration.minutes(5) }), `The ${name} function failed (error, timeout or crash): read its log group.`);
    }
    this.alarms = alarms;

    this.dashboard = new Dashboard(this, 'Dashboard', { defaultInterval: Duration.hours(24) });
    this.dashboard.addWidgets(
      new TextWidget({ markdown: '# Dispatch Ledger\nContract metrics by target; a spike in Orphaned, Stalled or Unobservable needs `ledger attention`.', width: 24, height: 2 }),
    );
    this.dashboard.addWidgets(...CONTRACT_METRICS.map((metric) => new GraphWidget({ title: metric, left: [byTarget(metric)], width: 6, height: 6 })));
    // Flow control (CONTRACT §11): a queue that only grows, or slots held by unknown runs, is a target
    // to look at: `ledger attention --kind at_capacity`, then `ledger slots release` for a run it lost.
    this.dashboard.addWidgets(...FLOW_GAUGES.map((metric) => new GraphWidget({ title: GAUGE_TITLES[metric], left: [gaugeByTarget(metric)], width: 12, height: 6 })));
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Dispatch queue and DLQ',
        left: [
          props.dispatchQueue.metricApproximateNumberOfMessagesVisible({ label: 'queued' }),
          props.dispatchQueue.metricApproximateAgeOfOldestMessage({ label: 'oldest (s)' }),
          props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ label: 'DLQ' }),
        ],
        width: 8,
      }),
      new GraphWidget({ title: 'Function errors', left: Object.entries(props.functions).map(([name, fn]) => fn.metricErrors({ label: name })), width: 8 }),
      new GraphWidget({
        title: 'Publisher',
        left: [props.publisher.metric('IteratorAge', { statistic: 'Maximum', label: 'iterator age (ms)' })],
        right: [new Metric({ namespace: METRIC_NAMESPACE, metricName: PUBLISH_FAILURES_METRIC, statistic: 'Sum', label: 'publish failures' })],
        width: 8,
      }),
      new GraphWidget({
        title: 'Retention (objects of expired records)',
        left: [new Metric({ namespace: METRIC_NAMESPACE, metricName: EXPIRED_OBJECTS_METRIC, statistic: 'Sum', label: 'objects deleted' })],
        right: [props.retention.metric('IteratorAge', { statistic: 'Maximum', label: 'iterator age (ms)' }), props.retention.metricErrors({ label: 'errors' })],
        width: 8,
      }),
    );
  }
}
