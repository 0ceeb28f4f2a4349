/** Publishes the listener's health metrics (their names: metrics.ts, which the deployment alarms on). */
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { CatchUpReport } from './listener.ts';
import { LISTENER_METRICS } from './metrics.ts';

/** An `onCaughtUp` that publishes each catch-up's report. */
export function catchUpPublisher(): (report: CatchUpReport) => void {
  const metrics = new Metrics({ namespace: LISTENER_METRICS.namespace, serviceName: LISTENER_METRICS.service });
  return (report) => {
    metrics.addMetric(LISTENER_METRICS.lag, MetricUnit.Milliseconds, report.lagMs);
    metrics.addMetric(LISTENER_METRICS.posts, MetricUnit.Count, report.posts);
    metrics.addMetric(LISTENER_METRICS.retries, MetricUnit.Count, report.retries);
    metrics.publishStoredMetrics();
  };
}
