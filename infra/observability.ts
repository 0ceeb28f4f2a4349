/**
 * The dashboard and the alarms of docs/runbook.md ("The alarms"), each alarm
 * named after its section there. Limiter metrics are the EMF metrics every
 * consumer emits (powertoolsObserver: namespace RateLimit, dimensions
 * service + policy), one series per policy of the catalogue; store metrics
 * come from ElastiCache or MemoryDB.
 */
import { Duration } from 'aws-cdk-lib';
import {
  Alarm,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  type IMetric,
  MathExpression,
  Metric,
  TextWidget,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { Construct } from 'constructs';
import type { DurableStore, StoreMetric } from './durable-store.ts';

/** Where the consumers' metrics land (functions/shared/platform.ts). */
export const LIMITER_METRICS = { namespace: 'RateLimit', service: 'platform' } as const;

/** The alarm thresholds of docs/runbook.md, in one place. */
export const ALARMS = {
  degradedClosed: { atLeast: 1, minutes: 1 },
  redisMemoryPercent: { above: 80, minutes: 5 },
  evictions: { above: 0, minutes: 1 },
  checkLatencyP99Ms: { above: 20, minutes: 5 },
} as const;

type Threshold =
  | { readonly atLeast: number; readonly minutes: number }
  | { readonly above: number; readonly minutes: number };

export interface ObservabilityProps {
  readonly name: string;
  readonly store: DurableStore;
  /** Every policy name, and whether it fails closed (only those can be DegradedClosed). */
  readonly policies: ReadonlyArray<{ readonly name: string; readonly failsClosed: boolean }>;
}

export class Observability extends Construct {
  readonly dashboard: Dashboard;
  readonly alarms: Alarm[] = [];

  constructor(scope: Construct, id: string, props: ObservabilityProps) {
    super(scope, id);
    const minute = Duration.minutes(1);
    const limiterMetric = (metricName: string, policy: string, statistic: string) =>
      new Metric({
        namespace: LIMITER_METRICS.namespace,
        metricName,
        dimensionsMap: { service: LIMITER_METRICS.service, policy },
        statistic,
        period: minute,
        label: policy,
      });

    this.dashboard = new Dashboard(this, 'Dashboard', { dashboardName: props.name });
    this.dashboard.addWidgets(
      new TextWidget({
        markdown: `# ${props.name}\nEach alarm is explained, with what to do, in docs/runbook.md ("The alarms").`,
        width: 24,
        height: 2,
      }),
    );
    const outcomes = ['Allowed', 'Limited', 'ShadowLimited', 'DegradedOpen', 'DegradedClosed'] as const;
    for (const outcome of outcomes) {
      this.dashboard.addWidgets(
        new GraphWidget({
          title: `${outcome} per policy (count / min)`,
          width: 24,
          left: props.policies.map((p) => limiterMetric(outcome, p.name, 'Sum')),
        }),
      );
    }
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Check latency p50 per policy (ms)',
        width: 12,
        left: props.policies.map((p) => limiterMetric('CheckLatency', p.name, 'p50')),
      }),
      new GraphWidget({
        title: 'Check latency p99 per policy (ms)',
        width: 12,
        left: props.policies.map((p) => limiterMetric('CheckLatency', p.name, 'p99')),
      }),
    );
    const storeGraph = (title: string, metric: StoreMetric) =>
      new GraphWidget({ title, width: 8, left: props.store.metrics(metric, minute) });
    this.dashboard.addWidgets(
      storeGraph('Redis engine CPU (%)', 'EngineCPUUtilization'),
      storeGraph('Redis memory (% of maxmemory)', 'DatabaseMemoryUsagePercentage'),
      storeGraph('Redis connections', 'CurrConnections'),
    );
    this.dashboard.addWidgets(
      storeGraph('Redis evictions (must stay 0)', 'Evictions'),
      storeGraph('Replication lag (s)', 'ReplicationLag'),
    );

    const alarm = (id: string, description: string, metric: IMetric, when: Threshold) => {
      const created = new Alarm(this, id, {
        alarmName: `${props.name} ${id}`,
        alarmDescription: `${description} See docs/runbook.md.`,
        metric,
        threshold: 'above' in when ? when.above : when.atLeast,
        evaluationPeriods: when.minutes,
        comparisonOperator:
          'above' in when
            ? ComparisonOperator.GREATER_THAN_THRESHOLD
            : ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
      });
      this.alarms.push(created);
      return created;
    };
    for (const policy of props.policies) {
      if (policy.failsClosed) {
        alarm(
          `DegradedClosed-${policy.name}`,
          `"DegradedClosed ≥ 1 for a minute": ${policy.name} refused callers because the limiter could not decide.`,
          limiterMetric('DegradedClosed', policy.name, 'Sum'),
          ALARMS.degradedClosed,
        );
      }
      alarm(
        `CheckLatencyP99-${policy.name}`,
        `"Check latency p99 > 20 ms": ${policy.name} checks are slow.`,
        limiterMetric('CheckLatency', policy.name, 'p99'),
        ALARMS.checkLatencyP99Ms,
      );
    }
    const worstOf = (metric: StoreMetric, statistic: 'MAX' | 'SUM') => {
      const metrics = props.store.metrics(metric, minute);
      const usingMetrics = Object.fromEntries(metrics.map((m, i) => [`m${i}`, m]));
      return new MathExpression({
        expression: `${statistic}([${Object.keys(usingMetrics).join(',')}])`,
        usingMetrics,
        period: minute,
        label: metric,
      });
    };
    alarm(
      'RedisMemory',
      '"Redis memory > 80 %": at 100 % every admit fails (noeviction by design).',
      worstOf('DatabaseMemoryUsagePercentage', 'MAX'),
      ALARMS.redisMemoryPercent,
    );
    alarm(
      'RedisEvictions',
      '"Evictions > 0": counters are being dropped, limits silently reset. Must stay 0.',
      worstOf('Evictions', 'SUM'),
      ALARMS.evictions,
    );
  }
}
