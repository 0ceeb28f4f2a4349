/**
 * The CDK app: `npm run synth` (offline, no credentials) and `npm run deploy`.
 * Two stacks, stateful apart from stateless, and cdk-nag's AWS Solutions
 * checks on both: a finding that is not acknowledged with a reason fails the
 * synth.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { PLATFORM_POLICIES } from '../config/catalogue.ts';
import { type OuterLine, readOuterLine } from '../config/outer-line.ts';
import { type Route, routes } from '../functions/routes.ts';
import { type DeployContext, InvalidContextError, readDeployContext } from './context.ts';
import { DataStack } from './data-stack.ts';
import { FEATURE_FLAGS } from './feature-flags.ts';
import { PlatformStack } from './platform-stack.ts';
import { tagStage } from './tags.ts';

export interface PlatformApp {
  readonly app: App;
  readonly data: DataStack;
  readonly platform: PlatformStack;
  readonly context: DeployContext;
}

export interface PlatformAppOptions {
  /** CDK context values (as `-c name=value` gives them). */
  readonly context?: Record<string, unknown>;
  /** Where the stages' files are (`<stage>.json`). @default infra/stages */
  readonly stagesDir?: string;
  readonly outdir?: string;
  readonly routes?: readonly Route[];
  readonly policies?: Readonly<Record<string, unknown>>;
  readonly outerLine?: OuterLine;
}

/** Where each stage's file is: its account, region, store and reserved concurrency. */
export const STAGES_DIR = new URL('./stages/', import.meta.url).pathname;

/** A stage's remembered context (`infra/stages/<stage>.json`), or nothing for a stage without one. */
export function readStageFile(dir: string, stage: string): Record<string, unknown> {
  const file = join(dir, `${stage}.json`);
  if (!existsSync(file)) return {};
  const { $comment: _, ...values } = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  return values;
}

export function createPlatformApp(options: PlatformAppOptions = {}): PlatformApp {
  const app = new App({
    ...(options.outdir ? { outdir: options.outdir } : {}),
    // Cross-stack references stay strong: the data stack cannot drop an export the platform stack uses.
    // CDK's recommended flags (infra/cdk.json, as the CLI passes them) under the app's own choices
    context: { ...FEATURE_FLAGS, '@aws-cdk/core:defaultCrossStackReferences': 'strong', ...options.context },
  });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  const stage = String(app.node.tryGetContext('stage') ?? 'prod');
  const remembered = readStageFile(options.stagesDir ?? STAGES_DIR, stage);
  const context = readDeployContext((name) => {
    const given = app.node.tryGetContext(name);
    const kept = remembered[name];
    if (kept === undefined) return given;
    // -c values arrive as strings: the same value either way is agreement
    if (given !== undefined && String(given) !== String(kept)) {
      throw new InvalidContextError(
        `context ${name}: stage ${stage} is deployed with ${name}=${String(kept)} (infra/stages/${stage}.json); change it there, on purpose, to change the stage`,
      );
    }
    return kept;
  });
  // Bound to the stage's account and region: a deploy with credentials for another is refused (scripts/deploy.ts)
  const env = { account: context.account, region: context.region };
  const data = new DataStack(app, `RateLimitData-${context.stage}`, {
    context,
    env,
    description: 'Rate limiter: network, durable Redis, its secret and data key (stateful)',
  });
  const platform = new PlatformStack(app, `RateLimitPlatform-${context.stage}`, {
    context,
    env,
    description: 'Rate limiter: layer, functions, REST API with the outer line, queue, parameters, alarms',
    vpc: data.vpc,
    functionsSecurityGroup: data.functionsSecurityGroup,
    store: data.store,
    dataKey: data.dataKey,
    userDirectory: data.userDirectory,
    routes: options.routes ?? routes,
    policies: options.policies ?? PLATFORM_POLICIES,
    outerLine: options.outerLine ?? readOuterLine(),
  });
  platform.addStackDependency(data);
  // stage, service, owner, cost centre on every taggable resource of both stacks (infra/tags.ts)
  tagStage(app, context);
  return { app, data, platform, context };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  createPlatformApp().app.synth();
}
