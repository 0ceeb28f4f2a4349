/**
 * A function started by an EventBridge schedule (the harvester, the
 * rebalancer): the rule invokes its live alias (infra/rollout.ts), and a run
 * that fails is not run again. A missed run is made up by the next one, and
 * a retry would overlap it. Three settings, because there are three ways a
 * run comes again: EventBridge's delivery (the target's `retryAttempts`),
 * Lambda's retries of a run that failed (two by default: the alias's
 * event-invoke config, `retryAttempts`), and Lambda's of a run it could not
 * start (throttled, or its own error: for up to six hours by default, so
 * `maxEventAge` at its least, a minute). A run can still start up to a
 * minute late, or twice (Lambda delivers an event at least once): both
 * workers take overlapping runs (docs/deploy.md).
 */
import { Duration } from 'aws-cdk-lib';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction as LambdaTarget } from 'aws-cdk-lib/aws-events-targets';
import type { ILayerVersion, Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import type { Construct } from 'constructs';
import { liveAlias } from './rollout.ts';

export interface ScheduledRunProps {
  readonly fn: LambdaFunction;
  /** The layers its versions are built on (a new layer, a new version: liveAlias). */
  readonly layers: readonly ILayerVersion[];
  readonly every: Duration;
  readonly description: string;
}

export function scheduledRun(scope: Construct, id: string, props: ScheduledRunProps): Rule {
  const alias = liveAlias(props.fn, props.layers);
  alias.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.minutes(1) });
  return new Rule(scope, id, {
    description: props.description,
    schedule: Schedule.rate(props.every),
    targets: [new LambdaTarget(alias, { retryAttempts: 0 })],
  });
}
