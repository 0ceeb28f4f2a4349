/**
 * The platform stack's hook for safe rollout and the attributable admin path:
 * each function's alias (infra/rollout.ts), one deployment group each, rolling
 * back on its alarms, and the admin function's IAM-authorized URL with its
 * notices (infra/admin-entry.ts).
 */
import { Validations } from 'aws-cdk-lib';
import type { IAlarm } from 'aws-cdk-lib/aws-cloudwatch';
import type { ILayerVersion, Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import type { Construct } from 'constructs';
import { checksOf, type Route } from '../functions/routes.ts';
import { operated, scheduled } from '../functions/workers.ts';
import { AdminEntry } from './admin-entry.ts';
import type { Observability } from './observability.ts';
import { type DeploymentConfigName, liveAlias, Rollout } from './rollout.ts';

export interface PlatformRolloutProps {
  readonly name: string;
  /** The prefix of the admin operator policy (infra/admin-entry.ts). */
  readonly accountWideName: string;
  readonly deploymentConfig: DeploymentConfigName;
  readonly layer: ILayerVersion;
  readonly routes: readonly Route[];
  /** Every deployed function by id (routes, operator functions, the harvester). */
  readonly functions: ReadonlyMap<string, LambdaFunction>;
  readonly observability: Observability;
}

/** The policies a function checks (its alarms' policies), by its id. */
export function policiesOf(routes: readonly Route[], id: string): string[] {
  const route = routes.find((r) => r.id === id);
  if (route) return [...new Set(checksOf(route).flat())];
  return [...(scheduled.find((w) => w.id === id)?.policies ?? [])];
}

const isScheduled = (id: string) => scheduled.some((w) => w.id === id);

export function platformRollout(
  scope: Construct,
  props: PlatformRolloutProps,
): { rollout: Rollout; admin: AdminEntry[] } {
  const functions = new Map(
    [...props.functions].map(([id, fn]) => [
      id,
      { alias: liveAlias(fn, [props.layer]), policies: policiesOf(props.routes, id) },
    ]),
  );
  const rollout = new Rollout(scope, 'Rollout', {
    name: props.name,
    deploymentConfig: props.deploymentConfig,
    // A canary shifts invocations: a function run on a schedule gets one every few minutes, so 10 % of five
    // minutes would most often run no new version at all, and promote it untried. All at once instead: its
    // next run is the new version, and its errors alarm (one failed run) pages (docs/runbook.md). Its
    // deployment watches no alarm: it is over before that run, so an alarm could never roll it back, and one
    // still in alarm from the release before would only stop the deploy that carries the fix.
    deploymentConfigOf: (id) => (isScheduled(id) ? 'AllAtOnce' : props.deploymentConfig),
    rollsBackOnAlarms: (id) => !isScheduled(id),
    functions,
    alarmOf: (id) => props.observability.node.tryFindChild(id) as IAlarm | undefined,
  });
  for (const group of rollout.groups.values()) {
    Validations.of(group.role).acknowledge({
      id: 'AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSCodeDeployRoleForLambdaLimited]',
      reason:
        "AWS's own narrowest policy for CodeDeploy shifting a Lambda alias (UpdateAlias/GetAlias, reading the alarms it watches).",
    });
  }
  const admin = operated.flatMap((op) => {
    const fn = props.functions.get(op.id);
    const alias = functions.get(op.id)?.alias;
    if (!fn || !alias) return [];
    const entry = new AdminEntry(scope, `Entry-${op.id}`, {
      name: props.name,
      accountWideName: props.accountWideName,
      fn,
      alias,
      topic: props.observability.topic,
    });
    props.observability.watchOperations(entry);
    return [entry];
  });
  return { rollout, admin };
}
