/**
 * A function started by an EventBridge schedule (the harvester, the
 * rebalancer): the rule invokes its live alias (infra/rollout.ts), and a run
 * that fails is not run again. A missed run is made up by the next one, and
 * a retry would overlap it. Two settings say "no retry", because there are
 * two retries: EventBridge's delivery (the target's `retryAttempts`) and
 * Lambda's own for an asynchronous invocation (two by default, up to six
 * hours later; the alias's event-invoke config).
 */
import type { Duration } from 'aws-cdk-lib';
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
  alias.configureAsyncInvoke({ retryAttempts: 0 });
  return new Rule(scope, id, {
    description: props.description,
    schedule: Schedule.rate(props.every),
    targets: [new LambdaTarget(alias, { retryAttempts: 0 })],
  });
}
