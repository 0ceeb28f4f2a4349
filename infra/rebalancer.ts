/**
 * A two-region stage's rebalancer (issue 32; docs/multi-region.md): in every
 * region a function on an EventBridge schedule that moves the shares mode's
 * unused share toward the regions that use it, from the demand each region
 * reports. Beside the other functions (isolated subnets, the functions'
 * security group, the layer, the regional and home stores' settings), with
 * REBALANCE_PERIOD_SECONDS set to the period its schedule runs at.
 *
 * The handler is functions/rebalancer/handler.ts (registered in
 * functions/workers.ts). A placeholder of it (one that only throws, marked
 * REBALANCER_PLACEHOLDER) may stand in while the real one is built apart:
 * the synth then warns, the template says so in its metadata, and
 * `npm run deploy` refuses the assembly (scripts/deploy.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Annotations, Duration, Stack } from 'aws-cdk-lib';
import type { ISecurityGroup, IVpc, SubnetSelection } from 'aws-cdk-lib/aws-ec2';
import type { Rule } from 'aws-cdk-lib/aws-events';
import type { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { type ILayerVersion, Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import type { SecretName } from '../config/secrets.ts';
import { scheduled } from '../functions/workers.ts';
import { acknowledgeTracing, consumerFunctionBase } from './consumer-function.ts';
import { scheduledRun } from './scheduled-run.ts';
import type { TracingMode } from './stage-hygiene.ts';

/** The worker's id in functions/workers.ts (and its function's name suffix). */
export const REBALANCER_ID = 'rebalancer';

/** What a placeholder handler carries, and what marks a template that would deploy it. */
export const PLACEHOLDER_MARK = 'REBALANCER_PLACEHOLDER';

/** The template metadata key listing the placeholder functions a template holds (scripts/deploy.ts refuses them). */
export const PLACEHOLDER_METADATA = 'RateLimit::Placeholders';

export interface RebalancerProps {
  readonly name: string;
  readonly dist: string;
  readonly layer: ILayerVersion;
  readonly tracing: TracingMode;
  readonly network: {
    readonly vpc: IVpc;
    readonly vpcSubnets: SubnetSelection;
    readonly securityGroups: ISecurityGroup[];
  };
  /** What a consumer reading these secrets is told and allowed (the platform stack's limiterAccess). */
  readonly access: (secrets: readonly SecretName[]) => {
    readonly statements: readonly PolicyStatement[];
    readonly environment: Readonly<Record<string, string>>;
  };
  /** REBALANCE_PERIOD_SECONDS: a whole number of minutes (EventBridge's finest rate). */
  readonly periodSeconds: number;
  readonly reservedConcurrency: number | undefined;
}

export class Rebalancer extends Construct {
  readonly fn: LambdaFunction;
  readonly schedule: Rule;

  constructor(scope: Construct, id: string, props: RebalancerProps) {
    super(scope, id);
    const worker = scheduled.find((w) => w.id === REBALANCER_ID);
    if (!worker) throw new Error(`functions/workers.ts registers no scheduled worker "${REBALANCER_ID}"`);
    if (props.periodSeconds % 60 !== 0) throw new Error('the rebalancing period is a whole number of minutes');
    const { environment, statements } = props.access(worker.secrets);
    this.fn = new LambdaFunction(this, 'Function', {
      ...consumerFunctionBase(this, worker.id, { dist: props.dist, layer: props.layer, tracing: props.tracing }),
      functionName: `${props.name}-${worker.id}`,
      description: `${worker.id}: every ${props.periodSeconds} s, moves unused shares toward the regions that use them`,
      // a run ends before the next one starts: two at once are safe (each give decides atomically from the
      // stored state, its demand marked answered) but would only read the same pages twice
      timeout: Duration.seconds(Math.min(props.periodSeconds - 5, 300)),
      ...(props.reservedConcurrency === undefined ? {} : { reservedConcurrentExecutions: props.reservedConcurrency }),
      ...props.network,
      environment: { ...environment, REBALANCE_PERIOD_SECONDS: String(props.periodSeconds) },
    });
    for (const statement of statements) this.fn.addToRolePolicy(statement);
    acknowledgeTracing(this.fn);
    this.schedule = scheduledRun(this, 'Schedule', {
      fn: this.fn,
      layers: [props.layer],
      every: Duration.seconds(props.periodSeconds),
      description: `Starts the rebalancer every ${props.periodSeconds} s (REBALANCE_PERIOD_SECONDS)`,
    });
    if (isPlaceholder(join(props.dist, 'functions', worker.id, 'handler.mjs'))) markPlaceholder(this.fn, worker.id);
  }
}

/** Whether the built bundle is the placeholder handler (or missing: nothing real to deploy either). */
export function isPlaceholder(bundle: string): boolean {
  return !existsSync(bundle) || readFileSync(bundle, 'utf8').includes(PLACEHOLDER_MARK);
}

/** A warning at synth, and the template's metadata naming the function, for the deploy to refuse. */
function markPlaceholder(fn: LambdaFunction, id: string): void {
  Annotations.of(fn).addWarningV2(
    'ratelimit:placeholder',
    `${id} is the placeholder handler (functions/${id}/handler.ts): this template must not be deployed`,
  );
  const stack = Stack.of(fn);
  const listed = (stack.templateOptions.metadata?.[PLACEHOLDER_METADATA] as string[] | undefined) ?? [];
  stack.templateOptions.metadata = { ...stack.templateOptions.metadata, [PLACEHOLDER_METADATA]: [...listed, id] };
}
