/**
 * The stateless stack: the layer, one function per route of
 * functions/routes.ts behind the REST API and its outer line, the queue
 * accepted webhook events go to, one SSM parameter per policy of the
 * catalogue (the defaults ops override without a deploy), the dashboard and
 * the alarms. Everything here can be destroyed and deployed again; the data
 * lives in the data stack.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compilePolicy, type FailureMode } from '@platform/rate-limit';
import { defaultParameter, folderPrefix, parameterPath } from '@platform/rate-limit/config';
import { combinedFailureMode } from '@platform/rate-limit/policy';
import { Duration, RemovalPolicy, Stack, type StackProps, Token, Validations } from 'aws-cdk-lib';
import { type ISecurityGroup, type IVpc, SubnetType } from 'aws-cdk-lib/aws-ec2';
import { Effect, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import {
  Architecture,
  type CfnFunction,
  Code,
  Function as LambdaFunction,
  LayerVersion,
  Runtime,
} from 'aws-cdk-lib/aws-lambda';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { StringParameter } from 'aws-cdk-lib/aws-ssm';
import type { Construct } from 'constructs';
import { inferenceProfileIdOf } from '../config/bedrock-profiles.ts';
import type { OuterLine } from '../config/outer-line.ts';
import type { RedisRole } from '../config/redis-roles.ts';
import { readPaths, type SecretName } from '../config/secrets.ts';
import { checksOf, type PlatformResource, type Route } from '../functions/routes.ts';
import { type OperatorFunction, operated, scheduled, services } from '../functions/workers.ts';
import { StageBudget } from './budget.ts';
import { acknowledgeTracing, consumerFunctionBase } from './consumer-function.ts';
import { ConsumerHealth } from './consumer-health.ts';
import { DEFAULT_RESERVATION, type DeployContext, InvalidContextError, reservedConcurrencyFor } from './context.ts';
import { checkDeployedEnvironment } from './deployed-environment.ts';
import type { DurableStore } from './durable-store.ts';
import { EventBus } from './event-bus.ts';
import { Observability, type ObservedPolicy } from './observability.ts';
import { platformRollout } from './platform-rollout.ts';
import { PublicApi } from './public-api.ts';
import { REBALANCER_ID, Rebalancer } from './rebalancer.ts';
import { liveAlias } from './rollout.ts';

/** What the layer asset leaves out of dist/layer: the V8 code caches and their stamps (layer/src/redis/code-cache.ts). */
export const LAYER_ASSET_EXCLUDES: readonly string[] = ['**/*.v8cache', '**/*.v8cache.json'];

import { StreamConsumers } from './stream-consumers.ts';
import { ApiSamplingRule } from './tracing.ts';
import type { UserDirectory } from './user-directory.ts';

export interface PlatformStackProps extends StackProps {
  readonly context: DeployContext;
  readonly vpc: IVpc;
  readonly functionsSecurityGroup: ISecurityGroup;
  readonly store: DurableStore;
  readonly dataKey: IKey;
  readonly userDirectory: UserDirectory;
  readonly routes: readonly Route[];
  /** The platform's policy catalogue (config/catalogue.ts): one SSM default per entry. */
  readonly policies: Readonly<Record<string, unknown>>;
  readonly outerLine: OuterLine;
  /** A two-region stage: this region's place in it (infra/regions.ts). @default a single-region stage */
  readonly multiRegion?: PlatformRegion;
}

/** What a region's functions are told of a two-region stage (the layer's settings, docs/multi-region.md). */
export interface PlatformRegion {
  /** RATE_LIMIT_REGION */
  readonly region: string;
  /** RATE_LIMIT_HOME_REGION */
  readonly homeRegion: string;
  /** RATE_LIMIT_REGIONS, anchor first */
  readonly regions: readonly string[];
  /** REDIS_HOME_CLUSTER_NODES: the home region's Global Datastore primary (a cross-region reference elsewhere). */
  readonly homeStore: { readonly endpointAddress: string; readonly endpointPort: string };
  /** REBALANCE_PERIOD_SECONDS, and the rebalancer's schedule. */
  readonly rebalancePeriodSeconds: number;
}

/**
 * The policies the deployed consumers check, each once: a route's middleware
 * limits (an API key's role: every role's policy, config/api-roles.json), the
 * checks its handler makes itself, and the deployed workers'. Only these
 * publish metrics, so only these get alarms. A verdict names its binding
 * policy, or, when the limiter cannot decide, its check's first policy: only
 * a check's first policy can ever report DegradedOpen/DegradedClosed, by the
 * check's combined failure mode.
 */
export function observedPolicies(
  routes: readonly Route[],
  workers: readonly { readonly policies: readonly string[] }[],
  catalogue: Readonly<Record<string, unknown>>,
): ObservedPolicy[] {
  const checks: (readonly string[])[] = [];
  for (const route of routes) checks.push(...checksOf(route));
  for (const worker of workers) checks.push(worker.policies);
  const observed = new Map<string, { degradedAs: FailureMode | undefined }>();
  for (const check of checks) {
    const modes = check.map((policy) => {
      if (!Object.hasOwn(catalogue, policy))
        throw new Error(`a deployed consumer checks "${policy}", which the catalogue lacks`);
      return compilePolicy(policy, catalogue[policy]).failureMode;
    });
    check.forEach((policy, i) => {
      const seen = observed.get(policy) ?? { degradedAs: undefined };
      if (i === 0) seen.degradedAs = combinedFailureMode(modes);
      observed.set(policy, seen);
    });
  }
  return [...observed].map(([name, { degradedAs }]) => ({ name, degradedAs }));
}

/**
 * The layer's view of a two-region stage (layer/src/settings.ts reads it):
 * REDIS_CLUSTER_NODES stays the regional store (the MemoryDB Multi-Region
 * member), REDIS_HOME_CLUSTER_NODES is the home store, with the same TLS and
 * the same user (one secret: REDIS_AUTH_SECRET_ARN).
 */
export function regionEnvironment(region: PlatformRegion): Record<string, string> {
  return {
    RATE_LIMIT_REGION: region.region,
    RATE_LIMIT_HOME_REGION: region.homeRegion,
    RATE_LIMIT_REGIONS: region.regions.join(','),
    REDIS_HOME_CLUSTER_NODES: `${region.homeStore.endpointAddress}:${region.homeStore.endpointPort}`,
  };
}

/** A route's timeout unless it names its own (`Route.timeoutSeconds`). */
export const DEFAULT_ROUTE_TIMEOUT_SECONDS = 10;

const LLM_MODELS = new URL('../config/llm-models.json', import.meta.url);

/**
 * The Bedrock model ids of config/llm-models.json (each model's
 * `bedrockModelId`): what the LLM function may invoke, and nothing else. A
 * model without one fails the synth (the route would call a model its role
 * may not invoke).
 */
export function bedrockModelIds(file: URL = LLM_MODELS): string[] {
  const models = JSON.parse(readFileSync(file, 'utf8')) as Record<string, { bedrockModelId?: unknown }>;
  return Object.entries(models).map(([model, entry]) => {
    const id = entry.bedrockModelId;
    if (typeof id !== 'string' || !/^[a-z0-9-]+\.[A-Za-z0-9.:-]+$/.test(id)) {
      throw new Error(`config/llm-models.json: model ${model} names no bedrockModelId (a Bedrock foundation model id)`);
    }
    return id;
  });
}

/** What a consumer reading these secrets is told and allowed, as a Redis user of its role (default: functions). */
type LimiterAccess = (
  secrets: readonly SecretName[],
  role?: RedisRole,
) => {
  statements: PolicyStatement[];
  environment: Record<string, string>;
};

export class PlatformStack extends Stack {
  readonly #props: PlatformStackProps;
  readonly functions = new Map<string, LambdaFunction>();
  readonly layer: LayerVersion;
  readonly events: Queue;
  /** The stage's event bus the events queue is drained into (EventBridge Pipes). */
  readonly bus: EventBus;
  readonly api: PublicApi;
  readonly observability: Observability;
  /** The harvester and the Mattermost listener, when the context deploys them. */
  streamConsumers: StreamConsumers | undefined;
  /** A two-region stage's rebalancer (infra/rebalancer.ts). */
  readonly rebalancer: Rebalancer | undefined;

  constructor(scope: Construct, id: string, props: PlatformStackProps) {
    super(scope, id, props);
    this.#props = props;
    const { context } = props;
    const name = `ratelimit-${context.stage}`;
    // IAM and dashboard names are account-wide: a two-region stage's regions (one account) each need their own
    const accountWideName = props.multiRegion ? `${name}-${props.multiRegion.region}` : name;
    const prefix = parameterPath(context.stage);
    this.layer = this.#layerVersion(name);
    this.#checkReservedConcurrency();
    const queues = this.#eventQueues();
    this.events = queues.events;
    this.bus = new EventBus(this, 'Bus', {
      name,
      queue: queues.events,
      deadLetters: queues.deadLetters,
      busNameParameter: `${prefix}/platform/event-bus-name`,
    });
    this.#shipPolicyDefaults(prefix);
    const access = this.#limiterAccess(prefix);
    const apiKeysPath = `/platform/${context.stage}/api-keys`;
    for (const route of props.routes)
      this.functions.set(route.id, this.#routeFunction(route, name, access, apiKeysPath));
    for (const admin of operated) this.functions.set(admin.id, this.#adminFunction(admin, name, access, prefix));
    this.api = new PublicApi(this, 'Public', {
      name,
      stage: context.stage,
      outerLine: props.outerLine,
      routes: props.routes,
      // the alias `live`, never $LATEST: CodeDeploy shifts what the API invokes (infra/rollout.ts)
      functionOf: (route) => liveAlias(this.functions.get(route.id) as LambdaFunction, [this.layer]),
      tracing: context.tracing,
      accountRole: context.apiGatewayAccountRole,
    });
    if (context.harvester || context.mattermostUrl) this.streamConsumers = this.#streamConsumers(name, access);
    // a two-region stage's rebalancer, one per region on its schedule (infra/rebalancer.ts)
    this.rebalancer = props.multiRegion
      ? new Rebalancer(this, 'Rebalancer', {
          name,
          dist: context.dist,
          layer: this.layer,
          tracing: context.tracing,
          network: this.#inVpc(),
          access,
          periodSeconds: props.multiRegion.rebalancePeriodSeconds,
          reservedConcurrency: context.reservedConcurrency[REBALANCER_ID],
        })
      : undefined;
    if (this.rebalancer) this.functions.set(REBALANCER_ID, this.rebalancer.fn);
    this.observability = this.#observability(name, accountWideName, queues.deadLetters);
    const functions = new Map([
      ...this.functions,
      ...(this.streamConsumers?.harvester ? [['harvester', this.streamConsumers.harvester] as const] : []),
    ]);
    // the edge, functions, queue and listener on the dashboard; the listener's health alarms (infra/consumer-health.ts)
    const health = new ConsumerHealth(this, 'ConsumerHealth', {
      name,
      dashboard: this.observability.dashboard,
      topic: this.observability.topic,
      api: { name, stage: context.stage },
      webAclMetricName: name,
      functions,
      events: this.events,
      deadLetters: queues.deadLetters,
      listener: this.streamConsumers?.listener && {
        clusterName: this.streamConsumers.listener.cluster.clusterName,
        serviceName: this.streamConsumers.listener.serviceName,
      },
    });
    this.observability.alarms.push(...health.alarms);
    platformRollout(this, {
      name,
      accountWideName,
      deploymentConfig: context.deploymentConfig,
      layer: this.layer,
      routes: props.routes,
      functions,
      observability: this.observability,
    });
    this.#acknowledge(prefix, access.pathsInUse, apiKeysPath);
    // every queue holds what was accepted and not yet handed on (events answered 200 to their sender, operator
    // notices, their dead letters): prod keeps them through a destroy, to drain by hand (docs/deploy.md,
    // "Deleting a stage"); generated names, so a kept queue never blocks the next create
    for (const queue of this.node.findAll().filter((c): c is Queue => c instanceof Queue)) {
      queue.applyRemovalPolicy(context.stage === 'prod' ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY);
    }
    // the stage file's hygiene: X-Ray sampling, the monthly budget (infra/tracing.ts, infra/budget.ts)
    if (context.tracing === 'sampled') new ApiSamplingRule(this, 'Sampling', { apiName: name, stage: context.stage });
    if (context.budget)
      new StageBudget(this, 'Budget', {
        name,
        stage: context.stage,
        ...context.budget,
        topic: this.observability.topic,
      });
    // a deployed function whose environment would make it read a local file (or serve a stub) fails the synth
    const usesOf = new Map<string, readonly PlatformResource[]>([
      ...props.routes.map((route) => [route.id, route.uses] as const),
      ['harvester', ['eventQueue']],
    ]);
    this.node.addValidation({
      validate: () =>
        [...functions].flatMap(([id, fn]) =>
          checkDeployedEnvironment(
            id,
            usesOf.get(id) ?? [],
            this.resolve((fn.node.defaultChild as CfnFunction).environment),
          ),
        ),
    });
  }

  /** The stage file names functions that exist: a typo would silently leave one unreserved. */
  #checkReservedConcurrency(): void {
    const { context, routes } = this.#props;
    const known = new Set([...routes.map((r) => r.id), ...operated.map((o) => o.id), ...scheduled.map((w) => w.id)]);
    for (const id of Object.keys(context.reservedConcurrency)) {
      if (!known.has(id) && id !== DEFAULT_RESERVATION) {
        throw new InvalidContextError(
          `context reservedConcurrency: "${id}" is no function of the platform (${[...known].join(', ')}; or ${DEFAULT_RESERVATION}, for every function not named)`,
        );
      }
    }
  }

  /** A function's reserved concurrency from the stage file: its own, else the file's default, else none. */
  #reserved(id: string): { reservedConcurrentExecutions?: number } {
    const reserved = reservedConcurrencyFor(this.#props.context.reservedConcurrency, id);
    return reserved === undefined ? {} : { reservedConcurrentExecutions: reserved };
  }

  /** The layer: the limiter, its client, config and middleware, one asset for every function. */
  #layerVersion(name: string): LayerVersion {
    const { context } = this.#props;
    return new LayerVersion(this, 'RateLimitLayer', {
      layerVersionName: `${name}-layer`,
      description: '@platform/rate-limit: the Lua limiter, its client, config and Middy middleware',
      // without the V8 code caches: V8 does not make them byte for byte again, so they would change the
      // asset (a new layer version, every function updated) on every build, and made on the build's
      // Node and architecture they are not read on Lambda's arm64 anyway (docs/deploy.md, "Cold start")
      code: Code.fromAsset(join(context.dist, 'layer'), { exclude: [...LAYER_ASSET_EXCLUDES] }),
      compatibleRuntimes: [Runtime.NODEJS_24_X],
      compatibleArchitectures: [Architecture.ARM_64],
    });
  }

  /** The queue accepted webhook events go to, and its dead letters. */
  #eventQueues(): { events: Queue; deadLetters: Queue } {
    const deadLetters = new Queue(this, 'EventsDeadLetters', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    const events = new Queue(this, 'Events', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: Duration.minutes(5),
      deadLetterQueue: { queue: deadLetters, maxReceiveCount: 5 },
    });

    return { events, deadLetters };
  }

  /** One SSM parameter per policy of the catalogue, as shipped: the store reads them under defaults/. */
  #shipPolicyDefaults(prefix: string): void {
    const props = this.#props;
    for (const [policy, config] of Object.entries(props.policies)) {
      new StringParameter(this, `Default-${policy}`, {
        parameterName: defaultParameter(prefix, policy),
        description: `Rate limit policy ${policy} as shipped (config/policies.json); override under ${folderPrefix(prefix, 'overrides')}`,
        stringValue: JSON.stringify(config),
      });
    }
  }

  /**
   * What each consumer is told and allowed (by the secrets it reads), and
   * every parameter path some consumer reads (for the cdk-nag acknowledgements).
   */
  #limiterAccess(prefix: string): LimiterAccess & { pathsInUse: ReadonlySet<string> } {
    const props = this.#props;
    const { store } = props;
    // Granted on the functions' side only: a grant through the key or secret policy would tie the data stack to this one.
    // each role reads its own Redis user's secret, and no other (ElastiCache RBAC: config/redis-roles.ts REDIS_ROLES)
    const redisSecret = (role: RedisRole) => (role === 'operator' ? store.operatorSecret : store.authSecret);
    const readRedisAuth = (role: RedisRole) =>
      new PolicyStatement({
        actions: ['secretsmanager:GetSecretValue'],
        resources: [redisSecret(role).secretArn],
      });
    const decryptRedisAuth = new PolicyStatement({
      actions: ['kms:Decrypt'],
      resources: [props.dataKey.keyArn],
      conditions: { StringEquals: { 'kms:ViaService': `secretsmanager.${this.region}.amazonaws.com` } },
    });
    /** What every consumer is told and allowed, HTTP or not. */
    const limiterEnvironment = {
      REDIS_CLUSTER_NODES: `${store.endpointAddress}:${store.endpointPort}`,
      REDIS_TLS: 'true',
      RATE_LIMIT_PARAMETER_PATH: prefix,
      POWERTOOLS_SERVICE_NAME: 'platform',
      POWERTOOLS_METRICS_NAMESPACE: 'RateLimit',
      ...(props.multiRegion ? regionEnvironment(props.multiRegion) : {}),
    };
    const parameterArn = (path: string) =>
      this.formatArn({ service: 'ssm', resource: 'parameter', resourceName: `${prefix.slice(1)}/${path}` });
    const readPathsInUse = new Set<string>();
    /**
     * What a consumer reading these secrets is told and allowed: the policies
     * (defaults/, overrides/) and its secrets' own folders under the parameter
     * path (config/secrets.ts), nothing else; the Redis credentials; decrypting
     * SecureStrings (the data key, through SSM only) when it has secrets.
     */
    const limiterAccess = (secrets: readonly SecretName[], role: RedisRole = 'functions') => {
      const paths = readPaths(secrets);
      for (const path of paths) readPathsInUse.add(path);
      const statements = [
        new PolicyStatement({
          effect: Effect.ALLOW,
          actions: ['ssm:GetParametersByPath'],
          resources: paths.flatMap((path) => [parameterArn(path), parameterArn(`${path}/*`)]),
        }),
        ...(secrets.length > 0
          ? [
              new PolicyStatement({
                effect: Effect.ALLOW,
                actions: ['kms:Decrypt'],
                resources: [props.dataKey.keyArn],
                conditions: { StringEquals: { 'kms:ViaService': `ssm.${this.region}.amazonaws.com` } },
              }),
            ]
          : []),
        readRedisAuth(role),
        decryptRedisAuth,
      ];
      return {
        statements,
        environment: {
          ...limiterEnvironment,
          REDIS_AUTH_SECRET_ARN: redisSecret(role).secretArn,
          RATE_LIMIT_READ_PATHS: paths.join(','),
        },
      };
    };
    return Object.assign(limiterAccess, { pathsInUse: readPathsInUse });
  }

  /** Where every function runs: the isolated subnets, beside Redis, behind the functions' security group. */
  #inVpc() {
    const props = this.#props;
    return {
      vpc: props.vpc,
      vpcSubnets: { subnetType: SubnetType.PRIVATE_ISOLATED },
      securityGroups: [props.functionsSecurityGroup],
    };
  }

  /** The function of one route, with exactly what the route says it uses. */
  #routeFunction(route: Route, name: string, limiterAccess: LimiterAccess, apiKeysPath: string): LambdaFunction {
    const props = this.#props;
    const { context } = props;
    const fn = new LambdaFunction(this, `Fn-${route.id}`, {
      ...consumerFunctionBase(this, route.id, { dist: context.dist, layer: this.layer, tracing: context.tracing }),
      functionName: `${name}-${route.id}`,
      description: `${route.methods.join(',')} ${route.path}`,
      timeout: Duration.seconds(route.timeoutSeconds ?? DEFAULT_ROUTE_TIMEOUT_SECONDS),
      ...this.#reserved(route.id),
      ...this.#inVpc(),
      environment: {
        ...limiterAccess(route.secrets).environment,
        ...(route.uses.includes('userDirectory')
          ? {
              LOGIN_USER_POOL_ID: props.userDirectory.userPool.userPoolId,
              LOGIN_USER_POOL_CLIENT_ID: props.userDirectory.client.userPoolClientId,
            }
          : {}),
        ...(route.uses.includes('llmProvider') ? { LLM_PROVIDER: 'bedrock' } : {}),
        ...(route.uses.includes('eventQueue') ? { EVENT_QUEUE_URL: this.events.queueUrl } : {}),
        ...(route.uses.includes('apiKeyRegistry') ? { API_KEYS_PARAMETER_PATH: apiKeysPath } : {}),
        // Declared empty so `sam local start-api --env-vars` may set them (it overrides declared variables only).
        REDIS_URL: '',
        RATE_LIMIT_PARAMETERS_FILE: '',
      },
    });
    for (const statement of limiterAccess(route.secrets).statements) fn.addToRolePolicy(statement);
    acknowledgeTracing(fn);
    if (route.uses.includes('eventQueue')) this.events.grantSendMessages(fn);
    if (route.uses.includes('userDirectory')) {
      // verifying a password server-side, on this pool only (no other Cognito action, no other pool)
      fn.addToRolePolicy(
        new PolicyStatement({
          actions: ['cognito-idp:AdminInitiateAuth'],
          resources: [props.userDirectory.userPool.userPoolArn],
        }),
      );
    }
    if (route.uses.includes('llmProvider')) {
      // the route invokes its region's cross-region inference profile of each model (config/bedrock-profiles.ts),
      // which Bedrock serves from any region of the geography: the profile here, and the model itself only
      // through it (any region: the geography's destinations are Bedrock's to choose and to extend)
      if (Token.isUnresolved(this.region))
        throw new InvalidContextError('the LLM route needs a stage bound to a region');
      const models = bedrockModelIds();
      const profiles = models.map((model) =>
        this.formatArn({
          service: 'bedrock',
          resource: 'inference-profile',
          resourceName: inferenceProfileIdOf(model, this.region),
        }),
      );
      const actions = ['bedrock:InvokeModel', 'bedrock:InvokeModelWithResponseStream'];
      // and each model in this region directly, as before the profiles: the role changes before the alias moves,
      // so over a canary the previous version, which calls the model itself, still runs (one release; then drop)
      const direct = models.map((model) =>
        this.formatArn({ service: 'bedrock', account: '', resource: 'foundation-model', resourceName: model }),
      );
      fn.addToRolePolicy(new PolicyStatement({ actions, resources: [...profiles, ...direct] }));
      fn.addToRolePolicy(
        new PolicyStatement({
          actions,
          resources: models.map((model) =>
            this.formatArn({
              service: 'bedrock',
              region: '*',
              account: '',
              resource: 'foundation-model',
              resourceName: model,
            }),
          ),
          conditions: { StringEquals: { 'bedrock:InferenceProfileArn': profiles } },
        }),
      );
    }
    if (route.uses.includes('apiKeyRegistry')) {
      fn.addToRolePolicy(
        new PolicyStatement({
          actions: ['ssm:GetParameter'],
          resources: [
            this.formatArn({
              service: 'ssm',
              resource: 'parameter',
              resourceName: `${apiKeysPath.slice(1)}/*`,
            }),
          ],
        }),
      );
    }
    return fn;
  }

  /** The operator's path to Redis (docs/runbook.md, "Reaching a deployed stage"): its IAM-authorized URL (infra/admin-entry.ts). */
  #adminFunction(admin: OperatorFunction, name: string, limiterAccess: LimiterAccess, prefix: string): LambdaFunction {
    const props = this.#props;
    const { context } = props;
    const fn = new LambdaFunction(this, `Fn-${admin.id}`, {
      ...consumerFunctionBase(this, admin.id, { dist: context.dist, layer: this.layer, tracing: context.tracing }),
      functionName: `${name}-${admin.id}`,
      description:
        'npx ratelimit against this stage: POST {"argv": [...]} to its function URL, SigV4 (AWS_IAM), no route',
      timeout: Duration.seconds(30),
      ...this.#reserved(admin.id),
      ...this.#inVpc(),
      // the operator's Redis user (adds PTTL for `inspect`), not the functions'
      environment: { ...limiterAccess(admin.secrets, 'operator').environment, POWERTOOLS_SERVICE_NAME: 'admin' },
    });
    for (const statement of limiterAccess(admin.secrets, 'operator').statements) fn.addToRolePolicy(statement);
    // `override` writes where the store reads overrides, and nowhere else
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ['ssm:GetParameter', 'ssm:PutParameter'],
        resources: [
          this.formatArn({
            service: 'ssm',
            resource: 'parameter',
            resourceName: `${folderPrefix(prefix, 'overrides').slice(1)}*`,
          }),
        ],
      }),
    );
    acknowledgeTracing(fn);
    return fn;
  }

  /** The harvester and the Mattermost listener, when the context deploys them. */
  #streamConsumers(name: string, limiterAccess: LimiterAccess): StreamConsumers {
    const props = this.#props;
    const { context } = props;
    const harvester = scheduled.find((w) => w.id === 'harvester');
    const listener = services.find((w) => w.id === 'mattermost-listener');
    return new StreamConsumers(this, 'StreamConsumers', {
      name,
      dist: context.dist,
      vpc: props.vpc,
      functionsSecurityGroup: props.functionsSecurityGroup,
      layer: this.layer,
      tracing: context.tracing,
      events: this.events,
      access: limiterAccess,
      ...(context.harvester && harvester
        ? {
            harvester: {
              worker: harvester,
              ...context.harvester,
              reservedConcurrency: reservedConcurrencyFor(context.reservedConcurrency, harvester.id),
            },
          }
        : {}),
      ...(context.mattermostUrl && listener
        ? { listener: { service: listener, mattermostUrl: context.mattermostUrl } }
        : {}),
    });
  }

  /** Alarms and the dashboard over what the deployed consumers publish. */
  #observability(name: string, accountWideName: string, deadLetters: Queue): Observability {
    const props = this.#props;
    const { context, store } = props;
    const workers = [
      ...(context.harvester ? scheduled.filter((w) => w.id === 'harvester') : []),
      ...(context.mattermostUrl ? services.filter((w) => w.id === 'mattermost-listener') : []),
    ];
    return new Observability(this, 'Observability', {
      name,
      accountWideName,
      store,
      policies: observedPolicies(props.routes, workers, props.policies),
      functions: new Map([
        ...this.functions,
        ...(this.streamConsumers?.harvester ? [['harvester', this.streamConsumers.harvester] as const] : []),
      ]),
      routeLogGroups: new Map(
        props.routes.flatMap((route) => {
          const fn = this.functions.get(route.id);
          return fn ? [[route.id, fn.logGroup] as const] : [];
        }),
      ),
      refusalLogGroups: [
        ...[...this.functions.values()].map((fn) => fn.logGroup),
        // every stream consumer's log group: each writes its refusals (the harvester's, the listener's)
        ...(this.streamConsumers?.logGroups ?? []),
      ],
      api: { name, stage: context.stage },
      routes: props.routes,
      webAclMetricName: name,
      events: this.events,
      deadLetters,
      notify: { emails: context.alarmEmails, urls: context.alarmUrls },
    });
  }

  /** cdk-nag: what is granted wider than one resource, and why. */
  #acknowledge(prefix: string, readPathsInUse: ReadonlySet<string>, apiKeysPath: string): void {
    const partition = 'arn:<AWS::Partition>';
    // cdk-nag names the stage's account and region as the template has them: literals, the stacks being bound
    const where = Token.isUnresolved(this.region) ? '<AWS::Region>:<AWS::AccountId>' : `${this.region}:${this.account}`;
    // and the partition too, in the ARNs the stack builds, once it is bound to a region (enablePartitionLiterals)
    const built = Token.isUnresolved(this.partition) ? partition : `arn:${this.partition}`;
    Validations.of(this).acknowledge(
      ...['AWSLambdaBasicExecutionRole', 'AWSLambdaVPCAccessExecutionRole', 'AmazonAPIGatewayPushToCloudWatchLogs'].map(
        (policy) => ({
          id: `AwsSolutions::AwsSolutions-IAM4[Policy::${partition}:iam::aws:policy/service-role/${policy}]`,
          reason:
            "AWS's own narrowest managed policy for the need: the functions' logs, their VPC network interfaces, the API's execution logs.",
        }),
      ),
      // each path a consumer reads by path (the policies, a consumer's secrets folder): every parameter under it
      ...[...readPathsInUse].map((path) => ({
        id: `AwsSolutions::AwsSolutions-IAM5[Resource::${built}:ssm:${where}:parameter${prefix}/${path}/*]`,
        reason:
          path === 'overrides'
            ? 'The policy overrides, read by path (any policy, any key); the admin function also writes them, nothing else.'
            : path === 'defaults'
              ? 'The policy defaults, read by path (one parameter per policy of the catalogue).'
              : `A consumer's own secrets folder (config/secrets.ts), read by path: its secrets and no other consumer's.`,
      })),
      {
        id: `AwsSolutions::AwsSolutions-IAM5[Resource::${built}:ssm:${where}:parameter${apiKeysPath}/*]`,
        reason: 'The API key registry: one parameter per key hash, looked up by name, so any name under the path.',
      },
      ...bedrockModelIds().map((model) => ({
        id: `AwsSolutions::AwsSolutions-IAM5[Resource::${built}:bedrock:*::foundation-model/${model}]`,
        reason:
          "A model of config/llm-models.json in any region, only through this region's inference profile of it (the condition): the geography's destination regions are Bedrock's.",
      })),
    );
  }
}
