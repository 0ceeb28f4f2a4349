/**
 * The deploy-time choices, read once from CDK context (`-c name=value` or
 * cdk.json) and validated here: a bad value stops the synth with its name and
 * the reason, before any construct exists.
 */
import { InvalidSettingError } from '@platform/rate-limit';
import * as v from 'valibot';
import { readHarvesterSettings } from '../functions/harvester/settings.ts';
import { readMattermostUrl } from '../functions/mattermost-listener/settings.ts';
import { DEPLOYMENT_CONFIGS, type DeploymentConfigName } from './rollout.ts';
import { HYGIENE_ENTRIES, type HygieneContext, objectOrJson } from './stage-hygiene.ts';

/** The durable Redis the limiter runs on (docs/design.md, "The durable Redis on AWS"): both keep every acknowledged write and never evict. */
export type DurableStoreKind = 'elasticache' | 'memorydb';

export interface DeployContext extends HygieneContext {
  /** Names resources and the parameter path (`/ratelimit/<stage>`). @default 'prod' */
  readonly stage: string;
  /** The AWS account the stage lives in (its stage file says; the stacks are synthesized for it). */
  readonly account: string;
  /** The AWS region the stage lives in. */
  readonly region: string;
  /** The region's availability zones the VPC spans (named, so a synth for an account needs no lookup). @default `<region>a,<region>b` */
  readonly availabilityZones: readonly string[];
  /**
   * Reserved concurrency by function id (route, worker or operator function):
   * each its share of the account's, and its Redis connection ceiling; the key
   * `default` gives every function not named its reservation (a new route is
   * reserved without an edit here: `reservedConcurrencyFor`). A function not
   * named, with no default, has none (it draws on the unreserved pool). @default {} (none)
   */
  readonly reservedConcurrency: Readonly<Record<string, number>>;
  /** An existing Cognito user pool the login verifies against; absent, the data stack creates one. */
  readonly userPoolId: string | undefined;
  /** @default 'elasticache' (ElastiCache for Valkey, durability sync) */
  readonly redis: DurableStoreKind;
  /** Durability needs R/M/C7gn-class (Graviton) nodes. @default 'cache.r7g.large' (ElastiCache), 'db.r7g.large' (MemoryDB) */
  readonly nodeType: string;
  /** @default 1 */
  readonly shards: number;
  /** Durability and Multi-AZ need at least one. @default 1 */
  readonly replicasPerShard: number;
  /** Where `npm run build` wrote the layer and the functions. @default 'dist' */
  readonly dist: string;
  /**
   * `nat`: private subnets with a NAT gateway beside the isolated ones, for
   * the consumers that call hosts outside AWS (the harvester's sources, a
   * Mattermost server). @default 'none' (isolated only, no NAT)
   */
  readonly egress: 'none' | 'nat';
  /** The harvester's source and sites; given, it is deployed (needs egress=nat). */
  readonly harvester: { readonly source: string; readonly sites: string } | undefined;
  /** The Mattermost server the listener connects to; given, it is deployed (needs egress=nat). */
  readonly mattermostUrl: string | undefined;
  /** Who the alarms e-mail (`-c alarmEmails=a@x.example,b@x.example`; each confirms the subscription). */
  readonly alarmEmails: readonly string[];
  /** HTTPS endpoints the alarms are posted to (`-c alarmUrls=https://…`): endpoints that speak SNS (a pager's SNS integration; a chat webhook is refused). */
  readonly alarmUrls: readonly string[];
  /** How CodeDeploy shifts a function's alias to a new version (infra/rollout.ts). @default 'Canary10Percent5Minutes' */
  readonly deploymentConfig: DeploymentConfigName;
}

const positiveInt = (min: number, max: number) =>
  v.pipe(
    v.union([v.number(), v.string()]),
    v.transform(Number),
    v.number(),
    v.integer(),
    v.minValue(min),
    v.maxValue(max),
  );

/** A comma-separated list of items (spaces and empty items ignored); absent: none. */
const commaList = <T extends v.GenericSchema<string>>(item: T) =>
  v.optional(
    v.pipe(
      v.string(),
      v.transform((text) =>
        text
          .split(',')
          .map((e) => e.trim())
          .filter(Boolean),
      ),
      v.array(item),
    ),
    '',
  );

/**
 * A stage names `ratelimit-<stage>` resources whose services are the
 * strictest: an ElastiCache replication group id and a MemoryDB cluster, ACL
 * or user name (1–40 characters, a letter first, letters, digits and single
 * hyphens, no hyphen last); Lambda function names (64) and the rest take more.
 * 20 characters leave room for every suffix the app adds (`-mattermost-listener`).
 */
export const STAGE_NAME_RULES = [
  [/^.{1,20}$/, 'at most 20 characters'],
  [/^[a-z]/, 'must start with a lowercase letter (ElastiCache and MemoryDB names do)'],
  [/^[a-z0-9-]*$/, 'lowercase letters, digits and hyphens only'],
  [/^(?!.*--)/, 'no two hyphens in a row (ElastiCache and MemoryDB refuse them)'],
  [/[^-]$/, 'must not end with a hyphen (ElastiCache and MemoryDB refuse it)'],
] as const satisfies readonly (readonly [RegExp, string])[];

const stageName = v.pipe(v.string(), ...STAGE_NAME_RULES.map(([rule, message]) => v.regex(rule, message)));

/**
 * The incoming webhooks of chat services: an SNS HTTPS subscription stays
 * pending until the endpoint follows the SubscribeURL SNS posts to it, which
 * these never do (and they would not read SNS's envelope either).
 */
const CHAT_WEBHOOK =
  /^https:\/\/(hooks\.slack\.com|[^/]*\.webhook\.office\.com|chat\.googleapis\.com|(?:[^/]*\.)?discord(?:app)?\.com\/api\/webhooks)(?:[/:?]|$)/i;

const Schema = v.object({
  stage: v.optional(stageName, 'prod'),
  account: v.pipe(
    v.union([v.string(), v.number()], 'the stage file names its AWS account'),
    v.transform(String),
    v.regex(/^\d{12}$/, 'a 12-digit AWS account id'),
  ),
  region: v.pipe(
    v.string('the stage file names its AWS region'),
    v.regex(/^[a-z]{2}(-[a-z]+)+-\d$/, 'an AWS region such as eu-west-1'),
  ),
  availabilityZones: v.optional(
    v.pipe(
      v.union([
        v.array(v.string()),
        v.pipe(
          v.string(),
          v.transform((text) => text.split(',')),
        ),
      ]),
      v.array(v.pipe(v.string(), v.regex(/^[a-z]{2}(-[a-z]+)+-\d[a-z]$/, 'availability zones such as eu-west-1a'))),
      v.minLength(2, 'at least two availability zones (Multi-AZ)'),
    ),
  ),
  reservedConcurrency: v.optional(
    v.pipe(
      objectOrJson,
      v.record(
        v.pipe(v.string(), v.regex(/^[a-z][a-z0-9-]*$/, 'function ids')),
        v.pipe(v.number('a whole number'), v.integer('a whole number'), v.minValue(1), v.maxValue(1000)),
      ),
    ),
    {},
  ),
  userPoolId: v.optional(v.pipe(v.string(), v.regex(/^[a-z]{2}(-[a-z]+)+-\d_[0-9A-Za-z]+$/, 'a Cognito user pool id'))),
  redis: v.optional(v.picklist(['elasticache', 'memorydb']), 'elasticache'),
  // Durability sync runs on R/M 6g–8g and C7gn/C8gn without data tiering (no `d`): docs/design.md, "The durable Redis on AWS"
  nodeType: v.optional(
    v.pipe(
      v.string(),
      v.regex(
        /^(cache|db)\.((r|m)[678]g|c[78]gn)\.[0-9]*x?large$/,
        'a node type durability runs on: r6g-r8g, m6g-m8g, c7gn or c8gn, without data tiering',
      ),
    ),
  ),
  shards: v.optional(positiveInt(1, 500), 1),
  replicasPerShard: v.optional(positiveInt(1, 5), 1),
  dist: v.optional(v.pipe(v.string(), v.minLength(1)), 'dist'),
  egress: v.optional(v.picklist(['none', 'nat']), 'none'),
  // https only: the workers' security group lets them out on 443 alone
  harvesterSource: v.optional(v.pipe(v.string(), v.url(), v.regex(/^https:/, 'an https URL'))),
  harvesterSites: v.optional(
    v.pipe(v.string(), v.regex(/^[A-Za-z0-9._-]{1,64}(,[A-Za-z0-9._-]{1,64})*$/, 'sites, comma-separated')),
  ),
  mattermostUrl: v.optional(v.pipe(v.string(), v.url(), v.regex(/^https:/, 'an https URL'))),
  alarmEmails: commaList(v.pipe(v.string(), v.email('an e-mail address'))),
  alarmUrls: commaList(
    v.pipe(
      v.string(),
      v.url(),
      v.regex(/^https:/, 'an https URL'),
      v.check(
        (url) => !CHAT_WEBHOOK.test(url),
        "an endpoint that speaks SNS: a chat's incoming webhook cannot confirm an SNS subscription, so it would never get an alarm (subscribe AWS Chatbot to the topic instead; docs/runbook.md)",
      ),
    ),
  ),
  deploymentConfig: v.optional(
    v.picklist(Object.keys(DEPLOYMENT_CONFIGS) as DeploymentConfigName[], 'a CodeDeploy Lambda deployment config'),
    'Canary10Percent5Minutes',
  ),
  // tags, budget, tracing, apiGatewayAccountRole (infra/stage-hygiene.ts)
  ...HYGIENE_ENTRIES,
});

/** The key of `reservedConcurrency` that reserves every function the stage file does not name. */
export const DEFAULT_RESERVATION = 'default';

/** A function's reserved concurrency: its own entry, else the stage's default, else none. */
export function reservedConcurrencyFor(
  reserved: DeployContext['reservedConcurrency'],
  functionId: string,
): number | undefined {
  return reserved[functionId] ?? reserved[DEFAULT_RESERVATION];
}

/** Every context value the app reads (`-c <name>=<value>`). */
export const CONTEXT_NAMES = Object.keys(Schema.entries) as readonly (keyof typeof Schema.entries)[];

export class InvalidContextError extends Error {
  override readonly name = 'InvalidContextError';
}

/** The context values by name, as `App.node.tryGetContext` gives them. */
export function readDeployContext(get: (name: string) => unknown): DeployContext {
  const raw = Object.fromEntries(
    CONTEXT_NAMES.map((name) => [name, get(name)]).filter(([, value]) => value !== undefined),
  );
  for (const name of ['account', 'region'] as const) {
    if (raw[name] === undefined) {
      throw new InvalidContextError(
        `context ${name}: stage ${String(raw.stage ?? 'prod')} names no AWS ${name}: every stage file (infra/stages/<stage>.json) names the account and region it deploys to`,
      );
    }
  }
  const parsed = v.safeParse(Schema, raw);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const path = issue.path?.map((p) => p.key).join('.') ?? '';
    throw new InvalidContextError(`context ${path}: ${issue.message}`);
  }
  const {
    nodeType,
    harvesterSource,
    harvesterSites,
    mattermostUrl,
    alarmEmails,
    alarmUrls,
    availabilityZones,
    userPoolId,
    ...rest
  } = parsed.output;
  const zones = availabilityZones ?? [`${rest.region}a`, `${rest.region}b`];
  if (!zones.every((zone) => zone.startsWith(rest.region))) {
    throw new InvalidContextError(`context availabilityZones: zones of ${rest.region}`);
  }
  const prefix = rest.redis === 'memorydb' ? 'db.' : 'cache.';
  const resolvedNodeType = nodeType ?? `${prefix}r7g.large`;
  if (!resolvedNodeType.startsWith(prefix)) {
    throw new InvalidContextError(`context nodeType: ${rest.redis} takes ${prefix}* node types`);
  }
  if ((harvesterSource === undefined) !== (harvesterSites === undefined)) {
    throw new InvalidContextError('context harvesterSource: give it with harvesterSites, or neither');
  }
  const harvester = harvesterSource && harvesterSites ? { source: harvesterSource, sites: harvesterSites } : undefined;
  // what the deployed listener will read at its start, refused at synth by the same reader
  if (mattermostUrl !== undefined) {
    try {
      readMattermostUrl(mattermostUrl);
    } catch (error) {
      if (!(error instanceof InvalidSettingError)) throw error;
      throw new InvalidContextError(`context mattermostUrl: ${error.message}`);
    }
  }
  // what the deployed harvester will read at its start, refused at synth by the same reader
  if (harvester) {
    try {
      readHarvesterSettings({ HARVESTER_SOURCE_URL: harvester.source, HARVESTER_SITES: harvester.sites });
    } catch (error) {
      if (!(error instanceof InvalidSettingError)) throw error;
      throw new InvalidContextError(
        `context harvester${error.setting === 'HARVESTER_SITES' ? 'Sites' : 'Source'}: ${error.message}`,
      );
    }
  }
  if ((harvester || mattermostUrl) && rest.egress !== 'nat') {
    throw new InvalidContextError(
      'context egress: the harvester and the Mattermost listener call outside AWS: add -c egress=nat',
    );
  }
  const listed = (values: readonly string[]) => values.filter(Boolean);
  return {
    ...rest,
    availabilityZones: zones,
    userPoolId,
    nodeType: resolvedNodeType,
    harvester,
    mattermostUrl,
    alarmEmails: listed(alarmEmails),
    alarmUrls: listed(alarmUrls),
  };
}
