/**
 * Safe rollout (docs/runbook.md, "Rolling out"): every function is published
 * as a version behind its alias `live`, and callers (the API's integrations,
 * the harvester's schedule, the admin URL) invoke the alias, never
 * `$LATEST`. A deploy that changes a function — its bundle, its settings or
 * the layer it runs — publishes a new version, and CodeDeploy shifts the
 * alias's traffic to it as the stage file says (`deploymentConfig`: prod a
 * 10 % canary for 5 minutes, AllAtOnce where nobody waits), rolling back on
 * the function's alarms: its errors, and the degraded and latency alarms of
 * the policies it checks (infra/observability.ts).
 *
 * The layer is pinned: a version is a snapshot of the function's
 * configuration including its layer version ARN, and the layer's content is
 * mixed into the version's hash here, so a new layer means a new version of
 * every function, each going through its own canary.
 */
import { Stack } from 'aws-cdk-lib';
import type { Alarm, IAlarm } from 'aws-cdk-lib/aws-cloudwatch';
import { LambdaApplication, LambdaDeploymentConfig, LambdaDeploymentGroup } from 'aws-cdk-lib/aws-codedeploy';
import {
  Alias,
  type CfnLayerVersion,
  type ILayerVersion,
  type Function as LambdaFunction,
} from 'aws-cdk-lib/aws-lambda';
import type { Construct } from 'constructs';

/** The traffic shifts a stage file may name (`deploymentConfig`), CodeDeploy's predefined ones. */
export const DEPLOYMENT_CONFIGS = {
  AllAtOnce: LambdaDeploymentConfig.ALL_AT_ONCE,
  Canary10Percent5Minutes: LambdaDeploymentConfig.CANARY_10PERCENT_5MINUTES,
  Canary10Percent10Minutes: LambdaDeploymentConfig.CANARY_10PERCENT_10MINUTES,
  Canary10Percent15Minutes: LambdaDeploymentConfig.CANARY_10PERCENT_15MINUTES,
  Canary10Percent30Minutes: LambdaDeploymentConfig.CANARY_10PERCENT_30MINUTES,
  Linear10PercentEvery1Minute: LambdaDeploymentConfig.LINEAR_10PERCENT_EVERY_1MINUTE,
  Linear10PercentEvery2Minutes: LambdaDeploymentConfig.LINEAR_10PERCENT_EVERY_2MINUTES,
  Linear10PercentEvery3Minutes: LambdaDeploymentConfig.LINEAR_10PERCENT_EVERY_3MINUTES,
  Linear10PercentEvery10Minutes: LambdaDeploymentConfig.LINEAR_10PERCENT_EVERY_10MINUTES,
} as const;

export type DeploymentConfigName = keyof typeof DEPLOYMENT_CONFIGS;

/** The alias callers invoke. */
export const LIVE_ALIAS = 'live';

/** CodeDeploy takes at most 10 alarms per deployment group. */
export const MAX_ROLLBACK_ALARMS = 10;

/**
 * The alias `live` of a function, on the version the current configuration
 * and layers publish (made once; later calls return it). Everything that
 * invokes the function takes this.
 */
export function liveAlias(fn: LambdaFunction, layers: readonly ILayerVersion[]): Alias {
  const existing = fn.node.tryFindChild('Live');
  if (existing) return existing as Alias;
  for (const layer of layers) {
    // the layer's asset (its S3 key is the content hash): a new layer, a new version of this function
    const content = (layer.node.defaultChild as CfnLayerVersion | undefined)?.content;
    if (content !== undefined) fn.invalidateVersionBasedOn(JSON.stringify(Stack.of(fn).resolve(content)));
  }
  return new Alias(fn, 'Live', {
    aliasName: LIVE_ALIAS,
    version: fn.currentVersion,
    description: 'What callers invoke: CodeDeploy shifts it between versions (infra/rollout.ts)',
  });
}

export interface RolloutProps {
  /** `ratelimit-<stage>`: the CodeDeploy application's name, and the groups' prefix. */
  readonly name: string;
  readonly deploymentConfig: DeploymentConfigName;
  /** A function's own traffic shift, when not `deploymentConfig` (a scheduled function's: AllAtOnce). */
  readonly deploymentConfigOf?: (functionId: string) => DeploymentConfigName;
  /** Whether a function's deployment watches its alarms (not a scheduled one's: see platform-rollout.ts). @default true */
  readonly rollsBackOnAlarms?: (functionId: string) => boolean;
  /** Each deployed function by id, with its alias and the policies it checks. */
  readonly functions: ReadonlyMap<string, { readonly alias: Alias; readonly policies: readonly string[] }>;
  /** The alarms by id (infra/observability.ts names them `FunctionErrors-<id>`, `DegradedOpen-<policy>`, …). */
  readonly alarmOf: (id: string) => IAlarm | undefined;
}

/** The alarms a function's rollout rolls back on, most telling first, at most CodeDeploy's 10. */
export function rollbackAlarmIds(
  functionId: string,
  policies: readonly string[],
  exists: (id: string) => boolean,
): string[] {
  const wanted = [
    `FunctionErrors-${functionId}`,
    `UnhandledErrors-${functionId}`,
    ...policies.flatMap((p) => [`DegradedClosed-${p}`, `DegradedOpen-${p}`]),
    ...policies.map((p) => `CheckLatencyP99-${p}`),
  ];
  return [...new Set(wanted)].filter(exists).slice(0, MAX_ROLLBACK_ALARMS);
}

/** One CodeDeploy application per stage, one deployment group per function. */
export class Rollout {
  readonly application: LambdaApplication;
  readonly groups = new Map<string, LambdaDeploymentGroup>();

  constructor(scope: Construct, id: string, props: RolloutProps) {
    this.application = new LambdaApplication(scope, id, { applicationName: props.name });
    for (const [functionId, { alias, policies }] of props.functions) {
      const config = DEPLOYMENT_CONFIGS[props.deploymentConfigOf?.(functionId) ?? props.deploymentConfig];
      const watched = props.rollsBackOnAlarms?.(functionId) ?? true;
      const alarms = watched
        ? rollbackAlarmIds(functionId, policies, (a) => props.alarmOf(a) !== undefined).map(
            (a) => props.alarmOf(a) as Alarm,
          )
        : [];
      this.groups.set(
        functionId,
        new LambdaDeploymentGroup(scope, `${id}-${functionId}`, {
          application: this.application,
          deploymentGroupName: `${props.name}-${functionId}`,
          alias,
          deploymentConfig: config,
          alarms,
          // back to the old version when the deployment fails, is stopped, or an alarm fires during it
          autoRollback: { failedDeployment: true, stoppedDeployment: true, deploymentInAlarm: alarms.length > 0 },
        }),
      );
    }
  }
}
