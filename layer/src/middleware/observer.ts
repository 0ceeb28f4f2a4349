import type { Logger } from '@aws-lambda-powertools/logger';
import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { RateLimitObserver, Verdict } from '../core/enforce.ts';
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
 * How the observer folds checks into EMF lines. A line costs ~230 bytes of
 * fixed envelope (namespace, dimensions, metric names) whatever it counts: one
 * line per check made the metrics the limiter's largest cost (≈ 312 bytes per
 * check). A held batch per policy carries the outcome counts as sums and the
 * latencies as EMF's value array (at most 100 values per metric), so a busy
 * container writes ~6 bytes per check.
 */
export interface ObserverBatching {
  /** Checks a policy's line carries at most (EMF's 100 values per metric); a full batch is published at once. */
  readonly maxChecks: number;
  /** The age a held batch may reach before the next invocation's end (`flushIfDue`) publishes it. */
  readonly maxAgeMs: number;
}

/** 100 checks or 10 s per line: well inside a CloudWatch alarm's 1-minute period. */
export const OBSERVER_BATCHING: ObserverBatching = { maxChecks: 100, maxAgeMs: 10_000 };

/** Latency is recorded to 0.1 ms (explicit rounding: shorter values, and finer than any alarm threshold). */
const latencyValue = (ms: number) => Math.round(ms * 10) / 10;

interface PolicyBatch {
  /** Checks by metric name (an outcome's, NearLimit). */
  readonly counts: Map<string, number>;
  readonly latencies: number[];
}

export interface PowertoolsObserver extends RateLimitObserver {
  /** Publish every held check now (a worker's run ends, a listener's summary, shutdown). */
  flush(): void;
  /**
   * The end of an invocation: publish what is held if it is due (a degraded
   * check, since the degraded alarms must see it within their period, or the
   * oldest held check is `maxAgeMs` old); otherwise keep it for the next.
   */
  flushIfDue(): void;
}

/**
 * EMF metrics per policy through Powertools: the counts of Allowed, Limited,
 * ShadowLimited, DegradedOpen, DegradedClosed and NearLimit, and every
 * check's CheckLatency, with the deciding policy as dimension; one EMF line
 * per policy and batch (OBSERVER_BATCHING: checks are held across
 * invocations of a container, so a container reclaimed while idle loses what
 * it held, at most `maxChecks` per policy; a degraded check is published at the
 * invocation's end). A refusal is one structured log line (REFUSAL_LOG) with
 * the key as stored, written at once: the input of "top offenders"; nothing
 * else logs a key. Degraded checks are already logged once by the limiter
 * (`onDegraded`).
 */
export function powertoolsObserver(options: {
  metrics: Metrics;
  logger?: Logger;
  /** Also told about every refusal (a local run writes them to a file). */
  refusals?: (record: RefusalRecord) => void;
  batching?: ObserverBatching;
  /** Milliseconds since the epoch (a test's clock). */
  now?: () => number;
}): PowertoolsObserver {
  const { metrics, logger, refusals, batching = OBSERVER_BATCHING, now = Date.now } = options;
  const batches = new Map<string, PolicyBatch>();
  let heldSince: number | undefined;
  let urgent = false;

  const publish = (policy: string, batch: PolicyBatch) => {
    batches.delete(policy);
    metrics.addDimension('policy', policy);
    for (const [name, count] of batch.counts) metrics.addMetric(name, MetricUnit.Count, count);
    // Powertools publishes on its own when a metric reaches 100 values (the batch's cap)
    for (const ms of batch.latencies) metrics.addMetric(OBSERVER_METRICS.latency, MetricUnit.Milliseconds, ms);
    if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
  };
  const flush = () => {
    for (const [policy, batch] of batches) publish(policy, batch);
    heldSince = undefined;
    urgent = false;
  };
  const count = (batch: PolicyBatch, name: string) => batch.counts.set(name, (batch.counts.get(name) ?? 0) + 1);

  return {
    observe(verdict) {
      let batch = batches.get(verdict.policy);
      if (batch === undefined) {
        batch = { counts: new Map(), latencies: [] };
        batches.set(verdict.policy, batch);
      }
      heldSince ??= now();
      count(batch, METRIC[verdict.outcome]);
      batch.latencies.push(latencyValue(verdict.latencyMs));
      if (verdict.limits.some((l) => unitOf(l.strategy).quota && l.remaining < l.limit * NEAR_LIMIT)) {
        count(batch, OBSERVER_METRICS.nearLimit);
      }
      if (verdict.outcome === 'degraded-open' || verdict.outcome === 'degraded-closed') urgent = true;
      if (batch.latencies.length >= batching.maxChecks) publish(verdict.policy, batch);
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
    // an invocation refused before any check (a 401) holds nothing: no empty-metrics warning
    flush,
    flushIfDue() {
      if (heldSince === undefined) return;
      if (urgent || now() - heldSince >= batching.maxAgeMs) flush();
    },
  };
}
