import type { Logger } from '@aws-lambda-powertools/logger';
import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { RateLimitObserver, Verdict } from '../enforce.ts';
import { unitOf } from '../strategies/index.ts';

/** Remaining below this share of the quota counts as "near limit". */
const NEAR_LIMIT = 0.2;

const METRIC = {
  allowed: 'Allowed',
  limited: 'Limited',
  'shadow-limited': 'ShadowLimited',
  'degraded-open': 'DegradedOpen',
  'degraded-closed': 'DegradedClosed',
} as const satisfies Record<Verdict['outcome'], string>;

/**
 * Every metric the observer can publish, by the outcome it counts (one per
 * verdict) and the two it adds: what an alarm on the limiter may watch
 * (test/infra checks each alarm against it and against what the consumers
 * were seen to emit).
 */
export const OBSERVER_METRICS = { outcomes: METRIC, latency: 'CheckLatency', nearLimit: 'NearLimit' } as const;

/**
 * The structured refusal log: one line per refused (or shadow-refused)
 * check, `message` = REFUSAL_LOG.message, with the deciding policy and the key
 * as it is stored (an IP, or a hash of an API key or email: never a raw
 * secret). The CDK app's Contributor Insights rule and `npx ratelimit top`
 * both read these fields; nothing is written to the counters.
 */
export const REFUSAL_LOG = { message: 'rate limited', keyFields: ['policy', 'key'] } as const;

export interface RefusalRecord {
  readonly message: typeof REFUSAL_LOG.message;
  /** ISO 8601. */
  readonly time: string;
  readonly policy: string;
  /** The refused key as stored; '-' when the check named none the observer knows. */
  readonly key: string;
  readonly outcome: 'limited' | 'shadow-limited';
  readonly retryAfterMs: number;
}

/**
 * EMF metrics per policy through Powertools: one of Allowed, Limited,
 * ShadowLimited, DegradedOpen, DegradedClosed, plus NearLimit and
 * CheckLatency, with the deciding policy as dimension; one EMF line per
 * invocation and policy (`flush`; a handler that checks a second policy after
 * the middleware's starts a second line, since one line has one dimension
 * value). A refusal is one structured log line (REFUSAL_LOG) with the key as
 * stored, the input of "top offenders"; nothing else logs a key. Degraded checks
 * are already logged once by the limiter (`onDegraded`).
 */
export function powertoolsObserver(options: {
  metrics: Metrics;
  logger?: Logger;
  /** Also told about every refusal (a local run writes them to a file). */
  refusals?: (record: RefusalRecord) => void;
}): RateLimitObserver & { flush(): void } {
  const { metrics, logger, refusals } = options;
  let batchPolicy: string | undefined;
  return {
    observe(verdict) {
      if (batchPolicy !== verdict.policy) {
        if (batchPolicy !== undefined) metrics.publishStoredMetrics();
        metrics.addDimension('policy', verdict.policy);
        batchPolicy = verdict.policy;
      }
      metrics.addMetric(METRIC[verdict.outcome], MetricUnit.Count, 1);
      metrics.addMetric('CheckLatency', MetricUnit.Milliseconds, verdict.latencyMs);
      if (verdict.limits.some((l) => unitOf(l.strategy).quota && l.remaining < l.limit * NEAR_LIMIT)) {
        metrics.addMetric('NearLimit', MetricUnit.Count, 1);
      }
      if (verdict.outcome === 'limited' || verdict.outcome === 'shadow-limited') {
        const record: RefusalRecord = {
          message: REFUSAL_LOG.message,
          time: new Date().toISOString(),
          policy: verdict.policy,
          key: verdict.key ?? '-',
          outcome: verdict.outcome,
          retryAfterMs: verdict.retryAfterMs,
        };
        const { message, ...fields } = record;
        logger?.info(message, fields);
        refusals?.(record);
      }
    },
    flush() {
      // an invocation refused before any check (a 401) has nothing to publish: no empty-metrics warning
      if (batchPolicy === undefined) return;
      metrics.publishStoredMetrics();
      batchPolicy = undefined;
    },
  };
}
