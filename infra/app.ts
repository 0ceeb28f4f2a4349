/**
 * The CDK app: `npm run synth` (offline, no credentials) and `npm run deploy`.
 * Two stacks, stateful apart from stateless, and cdk-nag's AWS Solutions
 * checks on both: a finding that is not acknowledged with a reason fails the
 * synth.
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { PLATFORM_POLICIES } from '../config/catalogue.ts';
import { type OuterLine, readOuterLine } from '../config/outer-line.ts';
import { type Route, routes } from '../functions/routes.ts';
import { type DeployContext, readDeployContext } from './context.ts';
import { DataStack } from './data-stack.ts';
import { PlatformStack } from './platform-stack.ts';

export interface PlatformApp {
  readonly app: App;
  readonly data: DataStack;
  readonly platform: PlatformStack;
  readonly context: DeployContext;
}

export interface PlatformAppOptions {
  /** CDK context values (as `-c name=value` gives them). */
  readonly context?: Record<string, unknown>;
  readonly outdir?: string;
  readonly routes?: readonly Route[];
  readonly policies?: Readonly<Record<string, unknown>>;
  readonly outerLine?: OuterLine;
}

export function createPlatformApp(options: PlatformAppOptions = {}): PlatformApp {
  const app = new App({
    ...(options.outdir ? { outdir: options.outdir } : {}),
    // Cross-stack references stay strong: the data stack cannot drop an export the platform stack uses.
    context: { '@aws-cdk/core:defaultCrossStackReferences': 'strong', ...options.context },
  });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  const context = readDeployContext((name) => app.node.tryGetContext(name));
  const data = new DataStack(app, `RateLimitData-${context.stage}`, {
    context,
    description: 'Rate limiter: network, durable Redis, its secret and data key (stateful)',
  });
  const platform = new PlatformStack(app, `RateLimitPlatform-${context.stage}`, {
    context,
    description: 'Rate limiter: layer, functions, REST API with the outer line, queue, parameters, alarms',
    vpc: data.vpc,
    functionsSecurityGroup: data.functionsSecurityGroup,
    store: data.store,
    dataKey: data.dataKey,
    routes: options.routes ?? routes,
    policies: options.policies ?? PLATFORM_POLICIES,
    outerLine: options.outerLine ?? readOuterLine(),
  });
  platform.addStackDependency(data);
  return { app, data, platform, context };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  createPlatformApp().app.synth();
}
