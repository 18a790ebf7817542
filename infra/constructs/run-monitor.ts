import { Duration } from 'aws-cdk-lib';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { Construct } from 'constructs';
import type { LedgerFunction } from './ledger-function.js';

export interface RunMonitorProps {
  readonly monitor: LedgerFunction;
  /** How often every due run is looked at: detection resolution is one period (CONTRACT §4). @default 1 minute */
  readonly period?: Duration;
}

/**
 * The monitor on an EventBridge schedule. A failed tick is not retried: the next tick reads the same
 * due index, and a retry would only overlap it.
 */
export class RunMonitor extends Construct {
  readonly rule: Rule;

  constructor(scope: Construct, id: string, props: RunMonitorProps) {
    super(scope, id);
    const period = props.period ?? Duration.minutes(1);
    if (period.toSeconds() < 60) throw new RangeError('an EventBridge schedule runs at most once a minute');
    this.rule = new Rule(this, 'Schedule', {
      description: 'Dispatch Ledger monitor tick: looks at every due run',
      schedule: Schedule.rate(period),
    });
    this.rule.addTarget(new LambdaFunction(props.monitor.function, { retryAttempts: 0, maxEventAge: Duration.minutes(1) }));
    // The monitor tries a dispatch it failed on again one period later: it must know the period.
    props.monitor.function.addEnvironment('MONITOR_PERIOD_SECONDS', String(period.toSeconds()));
  }
}
