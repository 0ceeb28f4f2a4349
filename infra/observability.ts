/**
 * The dashboard and the alarms of docs/runbook.md ("The alarms"), each alarm
 * named after its section there, and the SNS topic every alarm notifies (in
 * alarm and back to OK). Limiter metrics are the EMF metrics the consumers
 * emit (powertoolsObserver: namespace RateLimit, dimensions service + policy),
 * one series per policy that a deployed consumer checks — an alarm on a
 * policy nobody checks could never fire; store, function, API, WAF and queue
 * metrics are AWS's own for the resources deployed.
 */

import { OBSERVER_METRICS, REFUSAL_LOG } from '@platform/rate-limit/middleware';
import { ArnFormat, Aws, Duration, Stack } from 'aws-cdk-lib';
import {
  Alarm,
  CfnInsightRule,
  ComparisonOperator,
  ConcreteWidget,
  Dashboard,
  GraphWidget,
  type IMetric,
  MathExpression,
  Metric,
  TextWidget,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Key } from 'aws-cdk-lib/aws-kms';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { FilterPattern, type ILogGroup, MetricFilter } from 'aws-cdk-lib/aws-logs';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription, UrlSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { Route } from '../functions/route.ts';
import { PLATFORM_METRICS, UNHANDLED_ERROR } from '../functions/shared/metrics.ts';
import { scheduled } from '../functions/workers.ts';
import type { DurableStore, StoreMetric } from './durable-store.ts';

/** Where the consumers' metrics land: the names the functions' observer publishes under (functions/shared/metrics.ts). */
export const LIMITER_METRICS = PLATFORM_METRICS;

/** The observer's names (the layer's middleware): one count per verdict, and the check's latency. */
const { outcomes: OUTCOME, latency: CHECK_LATENCY } = OBSERVER_METRICS;

/**
 * The alarm thresholds of docs/runbook.md, in one place. `minutes` of `outOf`
 * minutes breaching raise the alarm (M of N): a single blip does not page.
 */
export const ALARMS = {
  degradedClosed: { atLeast: 1, minutes: 3, outOf: 5 },
  degradedOpen: { atLeast: 1, minutes: 3, outOf: 5 },
  redisMemoryPercent: { above: 80, minutes: 5, outOf: 5 },
  redisCpuPercent: { above: 80, minutes: 5, outOf: 5 },
  redisConnections: { above: 5000, minutes: 5, outOf: 5 },
  trafficManagement: { above: 0, minutes: 2, outOf: 3 },
  evictions: { above: 0, minutes: 1, outOf: 1 },
  checkLatencyP99Ms: { above: 20, minutes: 5, outOf: 5 },
  functionErrors: { above: 0, minutes: 3, outOf: 5 },
  unhandledErrors: { above: 0, minutes: 3, outOf: 5 },
  functionThrottles: { above: 0, minutes: 3, outOf: 5 },
  api5xx: { above: 0, minutes: 3, outOf: 5 },
  apiLatencyP99Ms: { above: 2000, minutes: 5, outOf: 5 },
  wafBlocked: { above: 1000, minutes: 5, outOf: 5 },
  deadLetters: { above: 0, minutes: 1, outOf: 1 },
  queueAgeSeconds: { above: 300, minutes: 5, outOf: 5 },
  /** A node of the store's list that reports nothing for 5 minutes (missing data breaches). */
  redisNodeSilent: { below: 1, minutes: 5, outOf: 5 },
} as const;

type Threshold =
  | { readonly atLeast: number; readonly minutes: number; readonly outOf: number }
  | { readonly above: number; readonly minutes: number; readonly outOf: number }
  /** Alarms on too little, and on no data at all (the metric's absence is the failure). */
  | { readonly below: number; readonly minutes: number; readonly outOf: number };

/** A policy a deployed consumer checks. */
export interface ObservedPolicy {
  readonly name: string;
  /**
   * How its verdicts report a limiter that cannot decide, when they name it
   * (it is the first policy of a check): DegradedOpen or DegradedClosed.
   * Undefined: a degraded verdict never names it, so no such alarm.
   */
  readonly degradedAs: 'open' | 'closed' | undefined;
}

export interface ObservabilityProps {
  readonly name: string;
  /**
   * The name of what IAM and CloudWatch name once per account, not per region
   * (the dashboard, the operator policy): `name`, or in a two-region stage
   * `<name>-<region>`, so the second region's stack does not collide.
   */
  readonly accountWideName: string;
  readonly store: DurableStore;
  /** The policies the deployed consumers check (and publish metrics for). */
  readonly policies: readonly ObservedPolicy[];
  /** Every deployed function, by its id (errors and throttles). */
  readonly functions: ReadonlyMap<string, IFunction>;
  /** The HTTP routes' log groups, by route id: where the house handler logs the 500s it answers (UNHANDLED_ERROR). */
  readonly routeLogGroups: ReadonlyMap<string, ILogGroup>;
  /** The log groups the consumers write their refusal lines to (REFUSAL_LOG): the top-offenders rule reads them. */
  readonly refusalLogGroups: readonly ILogGroup[];
  /** The REST API's name and stage (5XX, latency). */
  readonly api: { readonly name: string; readonly stage: string };
  /** The routes the API serves (each route's own latency alarm, per method: API Gateway's per-method metrics). */
  readonly routes: readonly Pick<Route, 'id' | 'path' | 'methods' | 'timeoutSeconds'>[];
  /** The WAF web ACL's metric name (blocked requests). */
  readonly webAclMetricName: string;
  readonly events: IQueue;
  readonly deadLetters: IQueue;
  /** Who is told: e-mail addresses and HTTPS endpoints that speak SNS (a pager) subscribed to the alarm topic. */
  readonly notify: { readonly emails: readonly string[]; readonly urls: readonly string[] };
}

/** A dashboard graph of a Contributor Insights rule's top contributors (no CDK construct draws one). */
class TopContributorsWidget extends ConcreteWidget {
  readonly #title: string;
  readonly #ruleName: string;
  constructor(props: { title: string; ruleName: string; width: number }) {
    super(props.width, 6);
    this.#title = props.title;
    this.#ruleName = props.ruleName;
  }

  toJson(): unknown[] {
    return [
      {
        type: 'metric',
        width: this.width,
        height: this.height,
        x: this.x,
        y: this.y,
        properties: {
          title: this.#title,
          region: Aws.REGION,
          view: 'timeSeries',
          stacked: false,
          period: 60,
          insightRule: { maxContributorCount: 10, orderBy: 'Sum', ruleName: this.#ruleName },
          legend: { position: 'right' },
        },
      },
    ];
  }
}

const MINUTE = Duration.minutes(1);

/** A limiter metric of one policy, per minute (the dimensions the observer publishes). */
function limiterMetric(metricName: string, policy: string, statistic: string): Metric {
  return new Metric({
    namespace: LIMITER_METRICS.namespace,
    metricName,
    dimensionsMap: { service: LIMITER_METRICS.service, policy },
    statistic,
    period: MINUTE,
    label: policy,
  });
}

/** Creates one alarm, named after its runbook section, notifying the topic in alarm and back to OK. */
type AlarmMaker = (id: string, description: string, metric: IMetric, when: Threshold) => Alarm;

/** The ARNs of the stage's alarms in this stack's region and account: `<name> <id>`, as alarmMaker names them. */
export function alarmArnPattern(scope: Construct, name: string): string {
  return Stack.of(scope).formatArn({
    service: 'cloudwatch',
    resource: 'alarm',
    resourceName: `${name} *`,
    arnFormat: ArnFormat.COLON_RESOURCE_NAME,
  });
}

/** The topic every alarm notifies, encrypted by a key CloudWatch may use (not aws/sns), with its subscribers. */
function alarmTopic(scope: Construct, props: ObservabilityProps): Topic {
  const key = new Key(scope, 'AlarmTopicKey', {
    description: `${props.name}: the alarm topic`,
    enableKeyRotation: true,
  });
  key.grant(new ServicePrincipal('cloudwatch.amazonaws.com'), 'kms:Decrypt', 'kms:GenerateDataKey*');
  const topic = new Topic(scope, 'AlarmTopic', {
    topicName: `${props.name}-alarms`,
    masterKey: key,
    enforceSSL: true,
  });
  // The topic's policy (enforceSSL, the budget's grant) replaces SNS's default one, and the key grant alone
  // lets CloudWatch encrypt, not publish: without this no alarm notifies. This account's alarms of this
  // stage only (each is named `<name> <id>`, alarmMaker), the confused-deputy guard AWS documents.
  topic.addToResourcePolicy(
    new PolicyStatement({
      actions: ['sns:Publish'],
      principals: [new ServicePrincipal('cloudwatch.amazonaws.com')],
      resources: [topic.topicArn],
      conditions: {
        StringEquals: { 'aws:SourceAccount': Stack.of(scope).account },
        ArnLike: { 'aws:SourceArn': alarmArnPattern(scope, props.name) },
      },
    }),
  );
  for (const email of props.notify.emails) topic.addSubscription(new EmailSubscription(email));
  for (const url of props.notify.urls) topic.addSubscription(new UrlSubscription(url));
  return topic;
}

/** Contributor Insights over the structured refusal log: which keys each policy refused most. */
function topOffendersRule(scope: Construct, props: ObservabilityProps, ruleName: string): CfnInsightRule {
  return new CfnInsightRule(scope, 'TopOffenders', {
    ruleName,
    ruleState: 'ENABLED',
    ruleBody: Stack.of(scope).toJsonString({
      Schema: { Name: 'CloudWatchLogRule', Version: 1 },
      LogGroupNames: props.refusalLogGroups.map((group) => group.logGroupName),
      LogFormat: 'JSON',
      Contribution: {
        Keys: REFUSAL_LOG.keyFields.map((field) => `$.${field}`),
        Filters: [{ Match: '$.message', In: [REFUSAL_LOG.message] }],
      },
      AggregateOn: 'Count',
    }),
  });
}

/** The dashboard: every verdict and the check latency per policy, the top offenders, the store. */
function dashboard(scope: Construct, props: ObservabilityProps, topOffendersRuleName: string): Dashboard {
  const board = new Dashboard(scope, 'Dashboard', { dashboardName: props.accountWideName });
  board.addWidgets(
    new TextWidget({
      markdown: `# ${props.accountWideName}\nEach alarm is explained, with what to do, in docs/runbook.md ("The alarms").`,
      width: 24,
      height: 2,
    }),
  );
  for (const outcome of Object.values(OUTCOME)) {
    board.addWidgets(
      new GraphWidget({
        title: `${outcome} per policy (count / min)`,
        width: 24,
        left: props.policies.map((p) => limiterMetric(outcome, p.name, 'Sum')),
      }),
    );
  }
  const latency = (percentile: 'p50' | 'p99') =>
    new GraphWidget({
      title: `Check latency ${percentile} per policy (ms)`,
      width: 12,
      left: props.policies.map((p) => limiterMetric(CHECK_LATENCY, p.name, percentile)),
    });
  board.addWidgets(latency('p50'), latency('p99'));
  board.addWidgets(
    new TopContributorsWidget({
      title: 'Top offenders: the (policy, key) pairs refused most (docs/runbook.md, "Who is being limited")',
      ruleName: topOffendersRuleName,
      width: 24,
    }),
  );
  const storeGraph = (title: string, metric: StoreMetric) =>
    new GraphWidget({ title, width: 8, left: props.store.metrics(metric, MINUTE) });
  board.addWidgets(
    storeGraph('Redis engine CPU (%)', 'EngineCPUUtilization'),
    storeGraph('Redis memory (% of maxmemory)', 'DatabaseMemoryUsagePercentage'),
    storeGraph('Redis connections', 'CurrConnections'),
  );
  board.addWidgets(
    storeGraph('Redis evictions (must stay 0)', 'Evictions'),
    storeGraph('Replication lag (s)', 'ReplicationLag'),
  );
  return board;
}

/** The alarm maker of a scope: each alarm it makes notifies `action` and joins `alarms`. */
function alarmMaker(scope: Construct, name: string, action: SnsAction, alarms: Alarm[]): AlarmMaker {
  return (id, description, metric, when) => {
    const created = new Alarm(scope, id, {
      alarmName: `${name} ${id}`,
      alarmDescription: `${description} See docs/runbook.md.`,
      metric,
      threshold: 'above' in when ? when.above : 'below' in when ? when.below : when.atLeast,
      evaluationPeriods: when.outOf,
      datapointsToAlarm: when.minutes,
      comparisonOperator:
        'above' in when
          ? ComparisonOperator.GREATER_THAN_THRESHOLD
          : 'below' in when
            ? ComparisonOperator.LESS_THAN_THRESHOLD
            : ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: 'below' in when ? TreatMissingData.BREACHING : TreatMissingData.NOT_BREACHING,
    });
    created.addAlarmAction(action);
    created.addOkAction(action);
    alarms.push(created);
    return created;
  };
}

/** Per policy: its degraded verdicts (when a verdict names it, as its failure mode says) and its slow checks. */
function policyAlarms(alarm: AlarmMaker, policies: readonly ObservedPolicy[]): void {
  for (const policy of policies) {
    if (policy.degradedAs === 'closed') {
      const metric = OUTCOME['degraded-closed'];
      alarm(
        `${metric}-${policy.name}`,
        `"${metric} in 3 of 5 minutes": ${policy.name} refused callers because the limiter could not decide.`,
        limiterMetric(metric, policy.name, 'Sum'),
        ALARMS.degradedClosed,
      );
    } else if (policy.degradedAs === 'open') {
      const metric = OUTCOME['degraded-open'];
      alarm(
        `${metric}-${policy.name}`,
        `"${metric} in 3 of 5 minutes": ${policy.name} let callers through unchecked because the limiter could not decide.`,
        limiterMetric(metric, policy.name, 'Sum'),
        ALARMS.degradedOpen,
      );
    }
    alarm(
      `CheckLatencyP99-${policy.name}`,
      `"Check latency p99 > 20 ms": ${policy.name} checks are slow.`,
      limiterMetric(CHECK_LATENCY, policy.name, 'p99'),
      ALARMS.checkLatencyP99Ms,
    );
  }
}

/** The store: the worst node's memory, evictions, CPU and connections, each listed node seen reporting, its write throttle. */
function storeAlarms(alarm: AlarmMaker, store: DurableStore): void {
  const worstOf = (metric: StoreMetric, statistic: 'MAX' | 'SUM') => {
    const metrics = store.metrics(metric, MINUTE);
    const usingMetrics = Object.fromEntries(metrics.map((m, i) => [`m${i}`, m]));
    return new MathExpression({
      expression: `${statistic}([${Object.keys(usingMetrics).join(',')}])`,
      usingMetrics,
      period: MINUTE,
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
  alarm(
    'RedisEngineCpu',
    '"Redis engine CPU > 80 %": checks slow down, then time out past their budget.',
    worstOf('EngineCPUUtilization', 'MAX'),
    ALARMS.redisCpuPercent,
  );
  alarm(
    'RedisConnections',
    '"Redis connections > 5000": more containers than the route table plans for (reserved concurrency), or a leak.',
    worstOf('CurrConnections', 'MAX'),
    ALARMS.redisConnections,
  );
  // The worst-of alarms above read the nodes of the store's list and treat a missing node as fine: each
  // node of the list must also be seen reporting, or its own alarm goes off (a node gone, or node ids
  // that are not the list's: the worst-of alarms would otherwise stay green on metrics nobody reports).
  for (const [node, reports] of store.nodeMetrics?.('CurrConnections', MINUTE, 'SampleCount') ?? []) {
    alarm(
      `RedisNodeSilent-${node}`,
      `"Redis node silent": ${node} reported no metrics for 5 minutes: the node is gone, or its id is not the one the alarms watch (redeploy the data stack's shape).`,
      reports,
      ALARMS.redisNodeSilent,
    );
  }
  if (store.kind === 'elasticache') {
    alarm(
      'RedisTrafficManagement',
      '"TrafficManagementActive": a durable primary is throttling writes (past ~100 MiB/s); admits slow down.',
      worstOf('TrafficManagementActive', 'MAX'),
      ALARMS.trafficManagement,
    );
  }
}

/**
 * The errors alarm of a function run on a schedule every `everyMinutes`
 * (functions/workers.ts): "3 of 5 one-minute periods" needs three failed
 * runs within five minutes, which a function run every 5 minutes never has;
 * one period of its schedule, one failed run in it, alarms.
 */
export function scheduledErrorsAlarm(everyMinutes: number): { period: Duration; when: Threshold } {
  return { period: Duration.minutes(everyMinutes), when: { above: 0, minutes: 1, outOf: 1 } };
}

/** Per function: failed invocations and throttles. */
function functionAlarms(alarm: AlarmMaker, functions: ReadonlyMap<string, IFunction>): void {
  for (const [functionId, fn] of functions) {
    const every = scheduled.find((w) => w.id === functionId)?.everyMinutes;
    const errors =
      every !== undefined && every > 1 ? scheduledErrorsAlarm(every) : { period: MINUTE, when: ALARMS.functionErrors };
    alarm(
      `FunctionErrors-${functionId}`,
      `"Function errors": ${functionId} failed invocations (a crash, a timeout, a failed init; a 500 it answered is UnhandledErrors).`,
      fn.metricErrors({ period: errors.period, statistic: 'Sum' }),
      errors.when,
    );
    alarm(
      `FunctionThrottles-${functionId}`,
      `"Function throttles": ${functionId} hit its reserved concurrency or the account's.`,
      fn.metricThrottles({ period: MINUTE, statistic: 'Sum' }),
      ALARMS.functionThrottles,
    );
  }
}

/**
 * Per route: the 500s its handler answered for an error it did not expect.
 * Lambda's Errors count none of them (the invocation succeeded), so a
 * release that throws on every request would pass its canary on
 * FunctionErrors alone; a metric filter counts the line the house handler
 * logs for each (UNHANDLED_ERROR) instead.
 */
function unhandledErrorAlarms(scope: Construct, alarm: AlarmMaker, logGroups: ReadonlyMap<string, ILogGroup>): void {
  for (const [routeId, logGroup] of logGroups) {
    const filter = new MetricFilter(scope, `UnhandledErrorLines-${routeId}`, {
      logGroup,
      metricNamespace: PLATFORM_METRICS.namespace,
      metricName: UNHANDLED_ERROR.metric,
      filterPattern: FilterPattern.stringValue('$.message', '=', UNHANDLED_ERROR.message),
      metricValue: '1',
      dimensions: { route: '$.route' },
    });
    alarm(
      `UnhandledErrors-${routeId}`,
      `"Unhandled errors": ${routeId} answered 500 for an error its handler did not expect (its log says which).`,
      filter.metric({ dimensionsMap: { route: routeId }, statistic: 'Sum', period: MINUTE }),
      ALARMS.unhandledErrors,
    );
  }
}

/** The edge: the REST API's server errors and latency, the WAF's blocks. */
function edgeAlarms(alarm: AlarmMaker, region: string, props: ObservabilityProps): void {
  const apiMetric = (metricName: string, statistic: string) =>
    new Metric({
      namespace: 'AWS/ApiGateway',
      metricName,
      dimensionsMap: { ApiName: props.api.name, Stage: props.api.stage },
      statistic,
      period: MINUTE,
    });
  alarm('Api5xx', '"API 5XX": callers got server errors.', apiMetric('5XXError', 'Sum'), ALARMS.api5xx);
  // Per route, not the stage's: one route slow by design (the LLM's, waiting on its provider for up to the
  // gateway's 29 s) would hold a stage-wide p99 over 2 s and hide every other route's regression. A route with
  // a timeout of its own answers as slowly as its upstream does: no latency alarm (its checks' latency is
  // CheckLatencyP99's); every other route's p99 over 2 s, its slowest method's.
  for (const route of props.routes) {
    if (route.timeoutSeconds !== undefined) continue;
    const usingMetrics = Object.fromEntries(
      route.methods.map((method, i) => [
        `m${i}`,
        new Metric({
          namespace: 'AWS/ApiGateway',
          metricName: 'Latency',
          dimensionsMap: { ApiName: props.api.name, Stage: props.api.stage, Resource: route.path, Method: method },
          statistic: 'p99',
          period: MINUTE,
        }),
      ]),
    );
    alarm(
      `ApiLatencyP99-${route.id}`,
      `"API latency p99 > 2 s": ${route.id} (${route.methods.join(', ')} ${route.path}), its slowest method.`,
      new MathExpression({
        expression: `MAX([${Object.keys(usingMetrics).join(',')}])`,
        usingMetrics,
        period: MINUTE,
        label: `${route.id} latency p99`,
      }),
      ALARMS.apiLatencyP99Ms,
    );
  }
  alarm(
    'WafBlocked',
    '"WAF blocks > 1000 a minute": a flood at the outer line (or a rule blocking real callers).',
    new Metric({
      namespace: 'AWS/WAFV2',
      metricName: 'BlockedRequests',
      dimensionsMap: { WebACL: props.webAclMetricName, Region: region, Rule: 'ALL' },
      statistic: 'Sum',
      period: MINUTE,
    }),
    ALARMS.wafBlocked,
  );
}

/** The events queue: dead letters, and the oldest event waiting. */
function queueAlarms(alarm: AlarmMaker, props: ObservabilityProps): void {
  alarm(
    'DeadLetters',
    '"Dead letters > 0": accepted events the pipe could not put on the stage bus 5 times (infra/event-bus.ts).',
    props.deadLetters.metricApproximateNumberOfMessagesVisible({ period: MINUTE, statistic: 'Maximum' }),
    ALARMS.deadLetters,
  );
  alarm(
    'QueueAge',
    '"Oldest accepted event > 5 min": the pipe to the stage bus is not draining the events queue.',
    props.events.metricApproximateAgeOfOldestMessage({ period: MINUTE, statistic: 'Maximum' }),
    ALARMS.queueAgeSeconds,
  );
}

export class Observability extends Construct {
  readonly dashboard: Dashboard;
  /** The Contributor Insights rule of the refusal log (top offenders per policy). */
  readonly topOffenders: CfnInsightRule;
  readonly alarms: Alarm[] = [];
  /** Every alarm's action: the topic operators subscribe to. */
  readonly topic: Topic;
  readonly #alarm: AlarmMaker;

  constructor(scope: Construct, id: string, props: ObservabilityProps) {
    super(scope, id);
    this.topic = alarmTopic(this, props);
    const topOffendersName = `${props.name}-top-offenders`;
    this.dashboard = dashboard(this, props, topOffendersName);
    this.topOffenders = topOffendersRule(this, props, topOffendersName);
    const alarm = alarmMaker(this, props.name, new SnsAction(this.topic), this.alarms);
    this.#alarm = alarm;
    policyAlarms(alarm, props.policies);
    storeAlarms(alarm, props.store);
    functionAlarms(alarm, props.functions);
    unhandledErrorAlarms(this, alarm, props.routeLogGroups);
    edgeAlarms(alarm, Stack.of(this).region, props);
    queueAlarms(alarm, props);
  }

  /**
   * The admin function's notices (infra/admin-entry.ts): made after this
   * construct, since their pipe publishes to its topic. A notice the pipe
   * could not publish 5 times waits in the dead letters; without an alarm a
   * write's operators would never hear of it.
   */
  watchOperations(queues: { readonly operations: IQueue; readonly deadLetters: IQueue }): void {
    this.#alarm(
      'OperationsDeadLetters',
      '"Operations dead letters > 0": notices of admin writes the pipe could not publish to the alarm topic 5 times (infra/admin-entry.ts): read them off the queue.',
      queues.deadLetters.metricApproximateNumberOfMessagesVisible({ period: MINUTE, statistic: 'Maximum' }),
      ALARMS.deadLetters,
    );
    this.#alarm(
      'OperationsQueueAge',
      '"Oldest admin notice > 5 min": the pipe is not draining the operations queue (infra/admin-entry.ts).',
      queues.operations.metricApproximateAgeOfOldestMessage({ period: MINUTE, statistic: 'Maximum' }),
      ALARMS.queueAgeSeconds,
    );
  }
}
