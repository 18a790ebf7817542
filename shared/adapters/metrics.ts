import { MetricUnit, type Metrics } from '@aws-lambda-powertools/metrics';

/**
 * Counts occurrences (one by default) of a contract metric (CONTRACT §7): namespace DispatchLedger, dimension
 * `Target` only — Powertools' default `service` dimension is cleared, and never a run or dispatch id.
 */
export function countForTarget(metrics: Metrics, name: string, target: string, count = 1): void {
  countOnce(metrics, name, { Target: target }, count);
}

/** One occurrence (or `count` of them) of a metric with exactly these dimensions (none: a fact about the whole ledger). */
export function countOnce(metrics: Metrics, name: string, dimensions: Readonly<Record<string, string>> = {}, count = 1): void {
  const metric = metrics.singleMetric();
  metric.clearDefaultDimensions();
  for (const [dimension, value] of Object.entries(dimensions)) metric.addDimension(dimension, value);
  metric.addMetric(name, MetricUnit.Count, count);
}

export { PUBLISH_FAILURES_METRIC, RETENTION_FAILURES_METRIC } from '../metric-names.js';

/** A level at this moment (a gauge: the queue's length, slots held), dimension `Target` only. */
export function gaugeForTarget(metrics: Metrics, name: string, target: string, value: number): void {
  countOnce(metrics, name, { Target: target }, value);
}
