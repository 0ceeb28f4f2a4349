/**
 * The names of the listener's own health metrics (data only: the deployment
 * alarms on them, infra/consumer-health.ts, and reads no handler). One EMF
 * line per catch-up (a reconnect until every channel is caught up): how long
 * its posts waited, how many it fetched, how many requests it retried
 * (catch-up-metrics.ts publishes them).
 */
export const LISTENER_METRICS = {
  namespace: 'RateLimit',
  service: 'mattermost-listener',
  lag: 'MattermostCatchUpLag',
  posts: 'MattermostCatchUpPosts',
  retries: 'MattermostCatchUpRetries',
} as const;
