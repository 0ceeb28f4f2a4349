/**
 * What the limiter's dashboard shows beside the limiter and the store (the
 * edge, the functions, the queue, the listener), and the Mattermost
 * listener's health alarms: its running tasks below the desired count (ECS
 * Container Insights, enabled on its cluster) and a slow catch-up after a
 * reconnect (the listener's own MattermostCatchUpLag,
 * functions/mattermost-listener/metrics.ts). Each alarm is in
 * docs/runbook.md ("The alarms") and notifies the alarm topic like the rest.
 */
import { type CfnResource, Duration, Stack } from 'aws-cdk-lib';
import {
  Alarm,
  ComparisonOperator,
  type Dashboard,
  GraphWidget,
  type IMetric,
  MathExpression,
  Metric,
  TextWidget,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { LISTENER_METRICS } from '../functions/mattermost-listener/metrics.ts';

/** The listener's alarm thresholds (docs/runbook.md). */
export const LISTENER_ALARMS = {
  /** Fewer tasks running than desired for 5 minutes (a restart overlaps for less). */
  tasksMissing: { above: 0, minutes: 5, outOf: 5 },
  /** A catch-up whose posts waited more than a minute. */
  catchUpLagMs: { above: 60_000, minutes: 1, outOf: 1 },
} as const;

export interface ConsumerHealthProps {
  readonly name: string;
  readonly dashboard: Dashboard;
  readonly topic: ITopic;
  /** The REST API's name and stage. */
  readonly api: { readonly name: string; readonly stage: string };
  readonly webAclMetricName: string;
  /** Every deployed function, by its id. */
  readonly functions: ReadonlyMap<string, IFunction>;
  readonly events: IQueue;
  readonly deadLetters: IQueue;
  /** The listener's ECS cluster and service names, when it is deployed. */
  readonly listener: { readonly clusterName: string; readonly serviceName: string } | undefined;
}

export class ConsumerHealth extends Construct {
  readonly alarms: Alarm[] = [];

  constructor(scope: Construct, id: string, props: ConsumerHealthProps) {
    super(scope, id);
    const minute = Duration.minutes(1);
    const metric = (namespace: string, metricName: string, dimensionsMap: Record<string, string>, statistic: string) =>
      new Metric({ namespace, metricName, dimensionsMap, statistic, period: minute, label: metricName });
    const api = (metricName: string, statistic: string) =>
      metric('AWS/ApiGateway', metricName, { ApiName: props.api.name, Stage: props.api.stage }, statistic);
    const waf = (metricName: string) =>
      metric(
        'AWS/WAFV2',
        metricName,
        { WebACL: props.webAclMetricName, Region: Stack.of(this).region, Rule: 'ALL' },
        'Sum',
      );
    const perFunction = (of: (fn: IFunction) => Metric) =>
      [...props.functions].map(([fnId, fn]) => of(fn).with({ label: fnId, period: minute }));
    const d = props.dashboard;
    // The stage's tags reach the dashboard (CloudFormation tags AWS::CloudWatch::Dashboard); cfn-lint 1.51's
    // schema predates its Tags property (E3002 is schema lag, as for the replication group's Durability)
    (d.node.defaultChild as CfnResource).addMetadata('cfn-lint', { config: { ignore_checks: ['E3002'] } });

    d.addWidgets(new TextWidget({ markdown: '## The edge: API Gateway and WAF', width: 24, height: 1 }));
    d.addWidgets(
      new GraphWidget({
        title: 'API requests, 4XX, 5XX (count / min)',
        width: 8,
        left: [api('Count', 'Sum'), api('4XXError', 'Sum'), api('5XXError', 'Sum')],
      }),
      new GraphWidget({
        title: 'API latency p50, p99 (ms)',
        width: 8,
        left: [api('Latency', 'p50').with({ label: 'p50' }), api('Latency', 'p99').with({ label: 'p99' })],
      }),
      new GraphWidget({
        title: 'WAF allowed, blocked (count / min)',
        width: 8,
        left: [waf('AllowedRequests'), waf('BlockedRequests')],
      }),
    );
    d.addWidgets(new TextWidget({ markdown: '## The functions', width: 24, height: 1 }));
    d.addWidgets(
      new GraphWidget({
        title: 'Errors (count / min)',
        width: 6,
        left: perFunction((fn) => fn.metricErrors({ statistic: 'Sum' })),
      }),
      new GraphWidget({
        title: 'Throttles (count / min)',
        width: 6,
        left: perFunction((fn) => fn.metricThrottles({ statistic: 'Sum' })),
      }),
      new GraphWidget({
        title: 'Duration p99 (ms)',
        width: 6,
        left: perFunction((fn) => fn.metricDuration({ statistic: 'p99' })),
      }),
      new GraphWidget({
        title: 'Concurrent executions (max)',
        width: 6,
        left: perFunction((fn) => fn.metric('ConcurrentExecutions', { statistic: 'Maximum' })),
      }),
    );
    d.addWidgets(new TextWidget({ markdown: '## The queue', width: 24, height: 1 }));
    d.addWidgets(
      new GraphWidget({
        title: 'Oldest accepted event (s)',
        width: 8,
        left: [props.events.metricApproximateAgeOfOldestMessage({ period: minute, statistic: 'Maximum' })],
      }),
      new GraphWidget({
        title: 'Events waiting (visible)',
        width: 8,
        left: [props.events.metricApproximateNumberOfMessagesVisible({ period: minute, statistic: 'Maximum' })],
      }),
      new GraphWidget({
        title: 'Dead letters (visible, must stay 0)',
        width: 8,
        left: [props.deadLetters.metricApproximateNumberOfMessagesVisible({ period: minute, statistic: 'Maximum' })],
      }),
    );

    if (!props.listener) return;
    const { clusterName, serviceName } = props.listener;
    const tasks = (metricName: string) =>
      metric('ECS/ContainerInsights', metricName, { ClusterName: clusterName, ServiceName: serviceName }, 'Minimum');
    const missing = new MathExpression({
      expression: 'desired - running',
      usingMetrics: { desired: tasks('DesiredTaskCount'), running: tasks('RunningTaskCount') },
      period: minute,
      label: 'tasks missing',
    });
    const lag = metric(
      LISTENER_METRICS.namespace,
      LISTENER_METRICS.lag,
      { service: LISTENER_METRICS.service },
      'Maximum',
    );
    d.addWidgets(new TextWidget({ markdown: '## The Mattermost listener', width: 24, height: 1 }));
    d.addWidgets(
      new GraphWidget({
        title: 'Listener tasks: desired, running',
        width: 12,
        left: [tasks('DesiredTaskCount'), tasks('RunningTaskCount')],
      }),
      new GraphWidget({ title: 'Catch-up lag after a reconnect (ms)', width: 12, left: [lag] }),
    );
    const action = new SnsAction(props.topic);
    const alarm = (
      alarmId: string,
      description: string,
      watched: IMetric,
      when: { above: number; minutes: number; outOf: number },
      missingData: TreatMissingData,
    ) => {
      const created = new Alarm(this, alarmId, {
        alarmName: `${props.name} ${alarmId}`,
        alarmDescription: `${description} See docs/runbook.md.`,
        metric: watched,
        threshold: when.above,
        evaluationPeriods: when.outOf,
        datapointsToAlarm: when.minutes,
        comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
        treatMissingData: missingData,
      });
      created.addAlarmAction(action);
      created.addOkAction(action);
      this.alarms.push(created);
    };
    // Missing is breaching: Container Insights reports a running service every minute; silence is not health
    alarm(
      'ListenerTasks',
      '"Listener tasks below desired": the Mattermost listener is not running (posts wait, then catch up on restart).',
      missing,
      LISTENER_ALARMS.tasksMissing,
      TreatMissingData.BREACHING,
    );
    // Missing is normal: a catch-up is published only after a reconnect
    alarm(
      'ListenerCatchUpLag',
      '"Listener catch-up lag > 60 s": after a reconnect, posts waited more than a minute to be decided.',
      lag,
      LISTENER_ALARMS.catchUpLagMs,
      TreatMissingData.NOT_BREACHING,
    );
  }
}
