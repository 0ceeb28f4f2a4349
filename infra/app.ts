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
import { PlatformStack, type PlatformStackProps } from './platform-stack.ts';
import { RegionLinkStack } from './region-link.ts';
import { type MultiRegionStage, readMultiRegionStage } from './regions.ts';
import { tagStage } from './tags.ts';

export interface PlatformApp {
  readonly app: App;
  /** The stage's data stack (a two-region stage: the anchor region's). */
  readonly data: DataStack;
  /** The stage's platform stack (a two-region stage: the anchor region's). */
  readonly platform: PlatformStack;
  /** The stage's deploy context (a two-region stage: the anchor region's). */
  readonly context: DeployContext;
  /** A two-region stage's stacks, anchor first (docs/deploy.md, "Two regions"); a single-region stage's one entry. */
  readonly regions: readonly RegionStacks[];
  /** A two-region stage's shape (infra/regions.ts); undefined for a single-region stage. */
  readonly multiRegion: MultiRegionStage | undefined;
}

/** One region's stacks. */
export interface RegionStacks {
  readonly region: string;
  readonly context: DeployContext;
  readonly data: DataStack;
  readonly platform: PlatformStack;
  /** The anchor's routes back to the other region's VPC (a two-region stage's anchor only). */
  readonly link?: RegionLinkStack;
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
  const given = (name: string): unknown => app.node.tryGetContext(name);
  const contextWith = (place: Readonly<Record<string, unknown>>) =>
    readDeployContext((name) => {
      const kept = place[name] ?? remembered[name];
      if (kept === undefined) return given(name);
      // -c values arrive as strings: the same value either way is agreement
      if (given(name) !== undefined && String(given(name)) !== String(kept)) {
        throw new InvalidContextError(
          `context ${name}: stage ${stage} is deployed with ${name}=${String(kept)} (infra/stages/${stage}.json); change it there, on purpose, to change the stage`,
        );
      }
      return kept;
    });
  const parts = { routes: options.routes ?? routes, policies: options.policies ?? PLATFORM_POLICIES };
  const outerLine = options.outerLine ?? readOuterLine();
  const multiRegion = readMultiRegionStage(remembered, given);
  if (multiRegion) return createMultiRegionApp(app, multiRegion, contextWith, { ...parts, outerLine });
  const context = contextWith({});
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
    ...fromData(data),
    ...parts,
    outerLine,
  });
  platform.addStackDependency(data);
  // stage, service, owner, cost centre on every taggable resource of both stacks (infra/tags.ts)
  tagStage(app, context);
  return { app, data, platform, context, regions: [{ region: context.region, context, data, platform }], multiRegion };
}

/** What a platform stack takes from its region's data stack. */
function fromData(data: DataStack) {
  return {
    vpc: data.vpc,
    functionsSecurityGroup: data.functionsSecurityGroup,
    store: data.store,
    dataKey: data.dataKey,
    userDirectory: data.userDirectory,
  };
}

/**
 * A two-region stage (infra/regions.ts): per region a data and a platform
 * stack (`RateLimitData-<stage>-<region>`, `RateLimitPlatform-<stage>-<region>`),
 * and the anchor's link stack (its routes back through the peering). Their
 * references across regions go through CDK's cross-region references (SSM
 * parameters written into the reading region), and order the deploy:
 * anchor data → other data → anchor link → both platforms (docs/deploy.md).
 */

function createMultiRegionApp(
  app: App,
  multiRegion: MultiRegionStage,
  contextWith: (place: Readonly<Record<string, unknown>>) => DeployContext,
  parts: Pick<PlatformStackProps, 'routes' | 'policies' | 'outerLine'>,
): PlatformApp {
  const [anchorPlace, otherPlace] = multiRegion.regions;
  const built: RegionStacks[] = [];
  const dataStacks: DataStack[] = [];
  for (const place of [anchorPlace, otherPlace]) {
    const context = contextWith({
      account: place.account,
      region: place.region,
      availabilityZones: place.availabilityZones,
    });
    if (context.redis !== 'elasticache') {
      throw new InvalidContextError(
        'context redis: a two-region stage keeps its home store on ElastiCache (Global Datastore) and its regional one on MemoryDB Multi-Region; redis names neither',
      );
    }
    const env = { account: place.account, region: place.region };
    const data = new DataStack(app, `RateLimitData-${context.stage}-${place.region}`, {
      context,
      env,
      crossRegionReferences: true,
      description: `Rate limiter (${place.region}): network, the home and regional stores, their secret and data key (stateful)`,
      multiRegion: { stage: multiRegion, place, ...(dataStacks[0] ? { anchor: dataStacks[0] } : {}) },
    });
    dataStacks.push(data);
    built.push({ region: place.region, context, data } as RegionStacks);
  }
  const [anchorData, otherData] = dataStacks as [DataStack, DataStack];
  const link = new RegionLinkStack(app, `RateLimitLink-${built[0]?.context.stage}-${anchorPlace.region}`, {
    env: { account: anchorPlace.account, region: anchorPlace.region },
    crossRegionReferences: true,
    description: `Rate limiter (${anchorPlace.region}): routes to ${otherPlace.region}'s VPC through the peering`,
    vpc: anchorData.vpc,
    peeringConnectionId: otherData.peering?.connection.ref as string,
    peerCidr: otherPlace.cidr,
  });
  const homeData = dataStacks.find((data) => data.region === multiRegion.homeRegion) as DataStack;
  const homeStore = homeData.homeStore as NonNullable<DataStack['homeStore']>;
  const regions = multiRegion.regions.map((place) => place.region);
  const stacks = built.map(({ region, context, data }, i): RegionStacks => {
    const platform = new PlatformStack(app, `RateLimitPlatform-${context.stage}-${region}`, {
      // one budget for the stage: the anchor's (Budgets are account-wide, a second would count the same costs)
      context: i === 0 ? context : { ...context, budget: undefined },
      env: { account: context.account, region },
      crossRegionReferences: true,
      description: `Rate limiter (${region}): layer, functions, REST API with the outer line, queue, parameters, alarms, rebalancer`,
      ...fromData(data),
      ...parts,
      multiRegion: {
        region,
        homeRegion: multiRegion.homeRegion,
        regions,
        homeStore: { endpointAddress: homeStore.endpointAddress, endpointPort: homeStore.endpointPort },
        rebalancePeriodSeconds: multiRegion.rebalancePeriodSeconds,
      },
    });
    platform.addStackDependency(data);
    // the functions reach the other region only once both sides route through the peering
    platform.addStackDependency(link);
    return { region, context, data, platform, ...(i === 0 ? { link } : {}) };
  });
  const anchor = stacks[0] as RegionStacks;
  tagStage(app, anchor.context);
  return {
    app,
    data: anchor.data,
    platform: anchor.platform,
    context: anchor.context,
    regions: stacks,
    multiRegion,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  createPlatformApp().app.synth();
}
