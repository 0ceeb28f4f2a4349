/**
 * The listener's own health metrics, one EMF line per catch-up (a reconnect
 * until every channel is caught up): how long its posts waited, how many it
 * fetched, how many requests it retried. The infra alarms on the lag by these
 * names (infra/consumer-health.ts).
 */
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { CatchUpReport } from './listener.ts';

export const LISTENER_METRICS = {
  namespace: 'RateLimit',
  service: 'mattermost-listener',
  lag: 'MattermostCatchUpLag',
  posts: 'MattermostCatchUpPosts',
  retries: 'MattermostCatchUpRetries',
} as const;

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
