import { MetricUnit, type Metrics } from '@aws-lambda-powertools/metrics';

/**
 * Counts one occurrence of a contract metric (CONTRACT §7): namespace DispatchLedger, dimension
 * `Target` only — Powertools' default `service` dimension is cleared, and never a run or dispatch id.
 */
export function countForTarget(metrics: Metrics, name: string, target: string): void {
  const metric = metrics.singleMetric();
  metric.clearDefaultDimensions();
  metric.addDimension('Target', target);
  metric.addMetric(name, MetricUnit.Count, 1);
}
