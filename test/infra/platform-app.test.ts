/**
 * The CDK app, synthesized offline from the built artefacts: what the
 * templates must say for the limiter to hold (docs/design.md, "The outer line" and "The durable Redis on AWS"), for both durable
 * stores, and cdk-nag as a gate that an unacknowledged finding fails.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { RedisClient } from '@platform/rate-limit';
import { compilePolicy } from '@platform/rate-limit';
import { OBSERVER_METRICS } from '@platform/rate-limit/middleware';
import { Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { FilterPattern } from 'aws-cdk-lib/aws-logs';
import { Queue } from 'aws-cdk-lib/aws-sqs';
import { inferenceProfileIdOf } from '../../config/bedrock-profiles.ts';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { readOuterLine, routeThrottleOf } from '../../config/outer-line.ts';
import { KEY_FAMILIES, managedAccessString, REDIS_ROLES, type RedisRole } from '../../config/redis-roles.ts';
import { runHarvest } from '../../functions/harvester/job.ts';
import { MODELS, type ModelEntry, reservationOf } from '../../functions/llm/models.ts';
import { catchUpPublisher } from '../../functions/mattermost-listener/catch-up-metrics.ts';
import { MattermostListener } from '../../functions/mattermost-listener/listener.ts';
import { LISTENER_METRICS } from '../../functions/mattermost-listener/metrics.ts';
import { GATEWAY_TIMEOUT_MS } from '../../functions/route.ts';
import { routes } from '../../functions/routes.ts';
import { PLAIN_HEADERS, SECRET_HEADERS, secretHeadersOf } from '../../functions/secret-headers.ts';
import { UNHANDLED_ERROR } from '../../functions/shared/metrics.ts';
import { platform as sharedPlatform } from '../../functions/shared/platform.ts';
import { signSlackBody } from '../../functions/slack/signature.ts';
import { operated } from '../../functions/workers.ts';
import { createPlatformApp, type PlatformApp, readStageFile, STAGES_DIR } from '../../infra/app.ts';
import { InvalidContextError, reservedConcurrencyFor } from '../../infra/context.ts';
import { bedrockModelIds, DEFAULT_ROUTE_TIMEOUT_SECONDS } from '../../infra/platform-stack.ts';
import { API_SECURITY_POLICY, MANAGED_RULE_GROUPS } from '../../infra/public-api.ts';
import { buildAll } from '../../scripts/build.ts';
import { reservedConcurrencyOf } from '../../scripts/deploy.ts';
import { startHarvestSource } from '../../scripts/harvest-source.ts';
import { startMattermostServer } from '../../scripts/mattermost-server.ts';
import { startRedis } from '../../scripts/redis-process.ts';
import { createOnlyPropertiesOf, FIXED_NAME_PROPERTIES } from '../support/cfn-schemas.ts';
import { consumers } from '../support/consumers.ts';
import { call, loopbackAddress } from '../support/http.ts';
import { sampleRequest } from '../support/route-sample.ts';
import { scheduledRunRetries } from '../support/scheduled-runs.ts';
import { connected, targets } from '../support/targets.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

type Resources = Record<string, { Type: string; Properties?: Record<string, unknown>; DeletionPolicy?: string }>;

let work: string;
before(async () => {
  work = mkdtempSync(join(tmpdir(), 'rl-infra-'));
  await buildAll(join(work, 'dist'));
  // a stage file that names the place only: each store on the same stage name
  writeFileSync(join(work, 'prod.json'), JSON.stringify({ account: '222222222222', region: 'eu-west-1' }));
});
after(() => rmSync(work, { recursive: true, force: true }));

function synth(redis: 'elasticache' | 'memorydb'): { stacks: PlatformApp; data: Template; platform: Template } {
  const stacks = createPlatformApp({
    context: { redis, dist: join(work, 'dist') },
    outdir: mkdtempSync(join(work, `cdk-${redis}-`)),
    stagesDir: work, // a stage file naming the place only: each store on the same stage name
  });
  // Runs every validation plugin (cdk-nag): an unacknowledged finding throws here.
  stacks.app.synth();
  return { stacks, data: Template.fromStack(stacks.data), platform: Template.fromStack(stacks.platform) };
}

/** A resource's properties (an empty object when it has none). */
const props = (resource: { Properties?: Record<string, unknown> } | undefined): Record<string, unknown> =>
  resource?.Properties ?? {};
const getAttOf = (value: unknown): string => (value as { 'Fn::GetAtt': string[] })['Fn::GetAtt'][0] as string;

/** The full path of an API Gateway resource, from its PathPart and its parents. */
function resourcePath(resources: Resources, id: string): string {
  const resource = resources[id];
  if (resource?.Type !== 'AWS::ApiGateway::Resource') return '';
  const parent = (props(resource).ParentId as { Ref?: string } | undefined)?.Ref;
  return `${parent ? resourcePath(resources, parent) : ''}/${props(resource).PathPart as string}`;
}

describe('The CDK app (ElastiCache for Valkey, the default)', () => {
  let app: ReturnType<typeof synth>;
  before(() => {
    app = synth('elasticache');
  });

  it('keeps the counters in a durable Valkey cluster that never evicts', () => {
    app.data.hasResourceProperties('AWS::ElastiCache::ReplicationGroup', {
      Engine: 'valkey',
      EngineVersion: Match.stringLikeRegexp('^9\\.'),
      ClusterMode: 'enabled',
      Durability: 'sync',
      MultiAZEnabled: true,
      AutomaticFailoverEnabled: true,
      ReplicasPerNodeGroup: 1,
      NumNodeGroups: 1,
      CacheNodeType: 'cache.r7g.large',
      TransitEncryptionEnabled: true,
      AtRestEncryptionEnabled: true,
      AuthToken: Match.absent(), // RBAC users instead (see "reaches ElastiCache by RBAC")
      UserGroupIds: [Match.anyValue()],
    });
    app.data.hasResourceProperties('AWS::ElastiCache::ParameterGroup', {
      CacheParameterGroupFamily: 'valkey9',
      Properties: { 'maxmemory-policy': 'noeviction', 'cluster-enabled': 'yes' },
    });
    app.data.hasResource('AWS::ElastiCache::ReplicationGroup', { DeletionPolicy: 'Snapshot' });
    assert.equal(app.stacks.data.terminationProtection, true);
  });

  it('lets only the functions reach Redis, on 6379, from isolated subnets without NAT', () => {
    const resources = app.data.toJSON().Resources as Resources;
    const group = Object.values(resources).find((r) => r.Type === 'AWS::ElastiCache::ReplicationGroup');
    const redisGroup = getAttOf((props(group).SecurityGroupIds as unknown[])[0]);
    assert.equal(resources[redisGroup]?.Properties?.SecurityGroupIngress, undefined, 'no inline ingress');
    const ingress = Object.values(resources).filter(
      (r) =>
        r.Type === 'AWS::EC2::SecurityGroupIngress' &&
        JSON.stringify(r.Properties?.GroupId) === JSON.stringify({ 'Fn::GetAtt': [redisGroup, 'GroupId'] }),
    );
    assert.equal(ingress.length, 1);
    assert.deepEqual(
      { from: ingress[0]?.Properties?.FromPort, to: ingress[0]?.Properties?.ToPort },
      { from: 6379, to: 6379 },
    );
    const source = getAttOf(props(ingress[0]).SourceSecurityGroupId);
    assert.match(String(source), /^Functions/);
    app.data.resourceCountIs('AWS::EC2::NatGateway', 0);
    app.data.resourceCountIs('AWS::EC2::InternetGateway', 0);
    app.data.resourceCountIs('AWS::EC2::Subnet', 2);
    for (const service of ['ssm', 'secretsmanager', 'sqs']) {
      app.data.hasResourceProperties('AWS::EC2::VPCEndpoint', {
        ServiceName: `com.amazonaws.eu-west-1.${service}`,
        VpcEndpointType: 'Interface',
        PrivateDnsEnabled: true,
      });
    }
  });

  it('gives login a path to Cognito and llm one to Bedrock: endpoints the functions reach on 443 (no NAT)', () => {
    const resources = app.data.toJSON().Resources as Resources;
    const egress = Object.values(resources).filter(
      (r) => r.Type === 'AWS::EC2::SecurityGroupEgress' && /^Functions/.test(String(getAttOf(r.Properties?.GroupId))),
    );
    for (const service of ['cognito-idp', 'bedrock-runtime']) {
      const endpoint = Object.values(resources).find(
        (r) => r.Type === 'AWS::EC2::VPCEndpoint' && r.Properties?.ServiceName === `com.amazonaws.eu-west-1.${service}`,
      );
      assert.ok(endpoint, `an interface endpoint for ${service}`);
      assert.equal(endpoint.Properties?.VpcEndpointType, 'Interface');
      assert.equal(endpoint.Properties?.PrivateDnsEnabled, true, `${service}: the SDK's host name resolves to it`);
      const groups = (props(endpoint).SecurityGroupIds as unknown[]).map(getAttOf);
      const ingress = Object.values(resources).filter(
        (r) =>
          r.Type === 'AWS::EC2::SecurityGroupIngress' &&
          groups.includes(getAttOf(r.Properties?.GroupId)) &&
          /^Functions/.test(String(getAttOf(r.Properties?.SourceSecurityGroupId))) &&
          r.Properties?.FromPort === 443,
      );
      assert.equal(ingress.length, 1, `${service}: HTTPS in from the functions`);
      assert.ok(
        egress.some(
          (r) => groups.includes(getAttOf(r.Properties?.DestinationSecurityGroupId)) && r.Properties?.FromPort === 443,
        ),
        `${service}: HTTPS out from the functions`,
      );
    }
  });

  it('serves every route of the route table with its method, integration and function on the layer', () => {
    const resources = app.platform.toJSON().Resources as Resources;
    const layer = Object.keys(resources).find((id) => resources[id]?.Type === 'AWS::Lambda::LayerVersion');
    const methods = Object.values(resources).filter((r) => r.Type === 'AWS::ApiGateway::Method');
    assert.equal(
      methods.length,
      routes.reduce((n, route) => n + route.methods.length, 0),
    );
    for (const route of routes) {
      const fnId = Object.keys(resources).find(
        (id) =>
          resources[id]?.Type === 'AWS::Lambda::Function' &&
          resources[id]?.Properties?.FunctionName === `ratelimit-prod-${route.id}`,
      ) as string;
      assert.ok(fnId, `a function for ${route.id}`);
      const fn = resources[fnId]?.Properties as Record<string, unknown>;
      const aliasOf = (id: string) =>
        Object.keys(resources).find(
          (a) =>
            resources[a]?.Type === 'AWS::Lambda::Alias' &&
            (props(resources[a]).FunctionName as { Ref?: string }).Ref === id,
        );
      assert.deepEqual(fn.Layers, [{ Ref: layer }]);
      assert.equal(fn.Runtime, 'nodejs24.x');
      assert.deepEqual(fn.Architectures, ['arm64']);
      assert.equal(fn.Handler, 'handler.handler');
      assert.ok(fn.VpcConfig, `${route.id} runs in the VPC`);
      const env = (fn.Environment as { Variables: Record<string, unknown> }).Variables;
      assert.equal(env.REDIS_TLS, 'true');
      assert.equal(env.RATE_LIMIT_PARAMETER_PATH, '/ratelimit/prod');
      assert.ok(env.REDIS_CLUSTER_NODES && env.REDIS_AUTH_SECRET_ARN);
      assert.equal(env.REDIS_URL, '', 'declared, so sam local --env-vars may set it');
      for (const method of route.methods) {
        const served = methods.find(
          (m) =>
            m.Properties?.HttpMethod === method &&
            resourcePath(resources, (props(m).ResourceId as { Ref: string }).Ref) === route.path &&
            // through the function's alias live (infra/rollout.ts)
            JSON.stringify(m.Properties?.Integration).includes(`"Ref":"${aliasOf(fnId)}"`),
        );
        assert.ok(served, `${method} ${route.path} integrates ${route.id}`);
        assert.equal((props(served).Integration as { Type: string }).Type, 'AWS_PROXY');
        // the timeout the handlers end their work before (the LLM route's provider call)
        assert.equal((props(served).Integration as { TimeoutInMillis?: number }).TimeoutInMillis, GATEWAY_TIMEOUT_MS);
      }
    }
  });

  it('puts the outer line of config/outer-line.json in front: stage throttle and a WAF rate rule on the stage', () => {
    const line = readOuterLine();
    app.platform.hasResourceProperties('AWS::ApiGateway::Stage', {
      MethodSettings: Match.arrayWith([
        Match.objectLike({
          ThrottlingRateLimit: line.stageThrottle.rateLimit,
          ThrottlingBurstLimit: line.stageThrottle.burstLimit,
        }),
      ]),
      AccessLogSetting: Match.objectLike({ DestinationArn: Match.anyValue() }),
    });
    app.platform.hasResourceProperties('AWS::WAFv2::WebACL', {
      Scope: 'REGIONAL',
      Rules: Match.arrayWith([
        Match.objectLike({
          Action: { Block: Match.anyValue() },
          Statement: {
            RateBasedStatement: {
              AggregateKeyType: 'IP',
              Limit: line.ipRateRule.limit,
              EvaluationWindowSec: line.ipRateRule.evaluationWindowSeconds,
            },
          },
        }),
      ]),
    });
    const resources = app.platform.toJSON().Resources as Resources;
    const stage = Object.keys(resources).find((id) => resources[id]?.Type === 'AWS::ApiGateway::Stage') as string;
    app.platform.hasResourceProperties('AWS::WAFv2::WebACLAssociation', {
      ResourceArn: Match.objectLike({ 'Fn::Join': Match.arrayWith([Match.arrayWith([{ Ref: stage }])]) }),
    });
  });

  it('writes one SSM parameter per policy, equal to config/policies.json', () => {
    const names = Object.keys(PLATFORM_POLICIES);
    // and the event bus's name (infra/event-bus.ts)
    app.platform.resourceCountIs('AWS::SSM::Parameter', names.length + 1);
    for (const name of names) {
      app.platform.hasResourceProperties('AWS::SSM::Parameter', {
        Name: `/ratelimit/prod/defaults/${name}`,
        Type: 'String',
        Value: JSON.stringify(PLATFORM_POLICIES[name]),
      });
    }
  });

  it('reads parameters on the limiter path only, decrypting through SSM only', () => {
    const policies = Object.values(app.platform.toJSON().Resources as Resources).filter(
      (r) => r.Type === 'AWS::IAM::Policy',
    );
    const statements = policies.flatMap(
      (p) => (props(p).PolicyDocument as { Statement: Record<string, unknown>[] }).Statement,
    );
    const byPath = statements.filter((s) => s.Action === 'ssm:GetParametersByPath');
    assert.equal(byPath.length, routes.length + operated.length);
    for (const statement of byPath) {
      assert.match(
        JSON.stringify(statement.Resource),
        /parameter\/ratelimit\/prod\/(defaults|overrides|secrets\/[a-z-]+)/,
      );
      assert.doesNotMatch(
        JSON.stringify(statement.Resource),
        /parameter\/ratelimit\/prod(\/\*)?"/,
        'not the whole path',
      );
    }
    assert.ok(!statements.some((s) => JSON.stringify(s.Action).includes('ssm:*')));
    for (const decrypt of statements.filter((s) => s.Action === 'kms:Decrypt')) {
      assert.ok(JSON.stringify(decrypt.Condition).includes('kms:ViaService'));
    }
  });

  it('throttles each route with its own budget from config/outer-line.json, behind AWS managed rules that count', () => {
    const line = readOuterLine();
    const stage = Object.values(app.platform.toJSON().Resources as Resources).find(
      (r) => r.Type === 'AWS::ApiGateway::Stage',
    );
    const settings = props(stage).MethodSettings as {
      ResourcePath: string;
      HttpMethod: string;
      ThrottlingRateLimit?: number;
      ThrottlingBurstLimit?: number;
    }[];
    for (const route of routes) {
      const throttle = routeThrottleOf(line, route.id);
      assert.ok(throttle, `${route.id} has a throttle of its own`);
      for (const method of route.methods) {
        const setting = settings.find(
          (s) => s.HttpMethod === method && s.ResourcePath === `/${route.path.replaceAll('/', '~1')}`,
        );
        assert.deepEqual(
          [setting?.ThrottlingRateLimit, setting?.ThrottlingBurstLimit],
          [throttle.rateLimit, throttle.burstLimit],
          `${method} ${route.path}`,
        );
      }
    }
    const acl = props(
      Object.values(app.platform.toJSON().Resources as Resources).find((r) => r.Type === 'AWS::WAFv2::WebACL'),
    );
    const managed = (acl.Rules as { Name: string; OverrideAction?: unknown }[]).filter((r) => r.Name !== 'per-ip-rate');
    assert.deepEqual(
      managed.map((r) => [r.Name, r.OverrideAction]),
      MANAGED_RULE_GROUPS.map((name) => [name, { Count: {} }]),
    );
    app.platform.hasResourceProperties('AWS::WAFv2::LoggingConfiguration', { ResourceArn: Match.anyValue() });
  });

  it('keeps every header a consumer treats as a secret out of every log the stack configures', () => {
    // Every header the code reads is classified: a new one fails here until it is listed secret or plain
    const sources = [
      ...readdirSync(join(ROOT, 'functions'), { recursive: true, encoding: 'utf8' }).map((f) => join('functions', f)),
      ...readdirSync(join(ROOT, 'layer/src'), { recursive: true, encoding: 'utf8' }).map((f) => join('layer/src', f)),
    ].filter((f) => f.endsWith('.ts'));
    const read = new Set<string>();
    for (const file of sources) {
      // the code, not its comments
      const text = readFileSync(join(ROOT, file), 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '')
        .replace(/^\s*\/\/.*$/gm, '');
      for (const m of text.matchAll(/\bheader\(\s*[\w.]+\s*,\s*'([^']+)'\s*\)/g))
        read.add((m[1] as string).toLowerCase());
      for (const m of text.matchAll(/apiKeyHash\(\s*\{\s*header:\s*'([^']+)'|\.header \?\? '([^']+)'/g))
        read.add((m[1] ?? (m[2] as string)).toLowerCase());
    }
    const secret = secretHeadersOf(routes);
    assert.ok(read.size >= 4, `found the headers the code reads (${[...read].join(', ')})`);
    const unclassified = [...read].filter(
      (name) => !secret.includes(name) && !(PLAIN_HEADERS as readonly string[]).includes(name),
    );
    assert.deepEqual(
      unclassified,
      [],
      'headers read by the code, neither secret nor plain (functions/secret-headers.ts)',
    );
    for (const name of ['x-api-key', 'authorization', 'x-telegram-bot-api-secret-token', 'x-slack-signature']) {
      assert.ok(secret.includes(name), `${name} is secret`);
    }
    const resources = Object.values(app.platform.toJSON().Resources as Resources);
    // WAF: every logging configuration redacts each secret header, and keeps only what a rule blocked or counted
    const wafLogging = resources.filter((r) => r.Type === 'AWS::WAFv2::LoggingConfiguration');
    assert.equal(wafLogging.length, 1);
    for (const logging of wafLogging) {
      const redacted = (props(logging).RedactedFields as { SingleHeader?: { Name: string } }[]).map(
        (field) => field.SingleHeader?.Name,
      );
      assert.deepEqual(redacted.sort(), secret);
      assert.deepEqual(props(logging).LoggingFilter, {
        DefaultBehavior: 'DROP',
        Filters: [
          {
            Behavior: 'KEEP',
            Requirement: 'MEETS_ANY',
            Conditions: [{ ActionCondition: { Action: 'BLOCK' } }, { ActionCondition: { Action: 'COUNT' } }],
          },
        ],
      });
    }
    // API Gateway: the access log names no header or key, and no method logs its data trace (the request itself)
    const stages = resources.filter((r) => r.Type === 'AWS::ApiGateway::Stage');
    for (const stage of stages) {
      const format = String((props(stage).AccessLogSetting as { Format?: string } | undefined)?.Format);
      assert.doesNotMatch(format, /header|apikey|\$input|requestoverride|authorizer/i, format);
      for (const setting of props(stage).MethodSettings as { DataTraceEnabled?: boolean }[]) {
        assert.equal(setting.DataTraceEnabled, false, JSON.stringify(setting));
      }
    }
    // Lambda: no function logs its event (Powertools' log-event switch), none logs at debug
    for (const fn of resources.filter((r) => r.Type === 'AWS::Lambda::Function')) {
      const env = (props(fn).Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {};
      assert.notEqual(String(env.POWERTOOLS_LOGGER_LOG_EVENT).toLowerCase(), 'true');
      assert.doesNotMatch(String(env.POWERTOOLS_LOG_LEVEL ?? env.LOG_LEVEL ?? ''), /debug|trace/i);
      const level = (props(fn).LoggingConfig as { ApplicationLogLevel?: string } | undefined)?.ApplicationLogLevel;
      assert.doesNotMatch(String(level ?? ''), /debug|trace/i);
    }
  });

  it("keeps the stage's logging and metrics on every method with a throttle of its own", () => {
    const stage = Object.values(app.platform.toJSON().Resources as Resources).find(
      (r) => r.Type === 'AWS::ApiGateway::Stage',
    );
    const settings = props(stage).MethodSettings as Record<string, unknown>[];
    assert.equal(settings.length, 1 + routes.reduce((n, r) => n + r.methods.length, 0));
    for (const setting of settings) {
      assert.deepEqual(
        [setting.LoggingLevel, setting.MetricsEnabled, setting.DataTraceEnabled],
        ['ERROR', true, false],
        `${String(setting.HttpMethod)} ${String(setting.ResourcePath)}`,
      );
    }
  });

  it('leaves the webhook paths out of the per-IP WAF rule (they have their per-source limits), nothing else', () => {
    const acl = props(
      Object.values(app.platform.toJSON().Resources as Resources).find((r) => r.Type === 'AWS::WAFv2::WebACL'),
    );
    type ScopedRule = {
      Name: string;
      Statement: {
        RateBasedStatement: {
          ScopeDownStatement: {
            NotStatement: { Statement: { RegexMatchStatement: { FieldToMatch: unknown; RegexString: string } } };
          };
        };
      };
    };
    const rule = (acl.Rules as ScopedRule[]).find((r) => r.Name === 'per-ip-rate');
    const match = rule?.Statement.RateBasedStatement.ScopeDownStatement.NotStatement.Statement.RegexMatchStatement;
    assert.deepEqual(match?.FieldToMatch, { UriPath: {} });
    const pattern = new RegExp(match?.RegexString ?? '^$never');
    const webhookPaths = [
      '/webhooks/slack',
      '/prod/webhooks/slack',
      '/webhooks/telegram/demo',
      '/prod/webhooks/telegram/7',
    ];
    const counted = [
      '/auth/login',
      '/prod/v1/whoami',
      '/v1/llm/complete',
      '/v1/x/webhooks/slack', // the public API's proxy, with a webhook's path inside
      '/prod/v1/webhooks/slack',
      '/webhooks/slack/x',
      '/webhooks/telegram/a/b',
      '/dev/webhooks/slack', // another stage's prefix
      '/webhooks/slackx',
    ];
    assert.deepEqual(
      webhookPaths.filter((p) => !pattern.test(p)),
      [],
    );
    assert.deepEqual(
      counted.filter((p) => pattern.test(p)),
      [],
    );
    assert.deepEqual(
      routes.filter((r) => r.rawBody).map((r) => r.id),
      ['slack', 'telegram'],
    );
  });

  it('acknowledges exactly the cfn-lint findings docs/deploy.md lists: E3002 (schema lag) on two resources', () => {
    const acknowledged = [app.data, app.platform].flatMap((t) =>
      Object.values(t.toJSON().Resources as Record<string, { Type: string; Metadata?: Record<string, unknown> }>)
        .filter((r) => r.Metadata?.['cfn-lint'] !== undefined)
        .map((r) => [r.Type, JSON.stringify(r.Metadata?.['cfn-lint'])]),
    );
    const e3002 = JSON.stringify({ config: { ignore_checks: ['E3002'] } });
    assert.deepEqual(acknowledged.sort(), [
      ['AWS::CloudWatch::Dashboard', e3002],
      ['AWS::ElastiCache::ReplicationGroup', e3002],
    ]);
    const docs = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8').replace(/\s+/g, ' ');
    assert.ok(docs.includes('its two acknowledged findings are both E3002'));
    assert.ok(docs.includes("the replication group's `Durability`") && docs.includes("the dashboard's `Tags`"));
    const lint = readFileSync(new URL('../../scripts/lint-templates.ts', import.meta.url), 'utf8');
    assert.match(lint.replace(/\s+\*\s+/g, ' '), /The two acknowledged findings are both E3002/);
  });

  it('gives every function of its own a log group with retention; docs/deploy.md names the log groups it does not own', () => {
    const unowned: string[] = [];
    for (const template of [app.data, app.platform]) {
      const resources = template.toJSON().Resources as Resources;
      for (const [id, r] of Object.entries(resources)) {
        if (r.Type === 'AWS::Logs::LogGroup') assert.ok(props(r).RetentionInDays, `${id}: a retention`);
        if (r.Type !== 'AWS::Lambda::Function') continue;
        const logging = props(r).LoggingConfig as { LogGroup?: unknown } | undefined;
        if (!logging?.LogGroup) unowned.push(id);
      }
    }
    // CDK's provider functions take no log group: Lambda makes /aws/lambda/<generated name>, kept forever
    assert.deepEqual(unowned, ['CustomVpcRestrictDefaultSGCustomResourceProviderHandlerDC833E5E']);
    // and API Gateway makes the execution logs of a stage that logs
    app.platform.hasResourceProperties('AWS::ApiGateway::Stage', {
      MethodSettings: Match.arrayWith([Match.objectLike({ LoggingLevel: 'ERROR' })]),
    });
    const docs = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8');
    assert.ok(docs.includes('**Log groups the stacks do not own, kept forever**'));
    assert.ok(
      docs.includes('`API-Gateway-Execution-Logs_<rest api') &&
        docs.includes('`Custom::VpcRestrictDefaultSG` provider'),
    );
    assert.ok(docs.includes('aws logs put-retention-policy'));
  });

  it('names the WAF log group after its stack, so one a failed create or a destroy leaves never blocks the next', () => {
    const resources = app.platform.toJSON().Resources as Resources;
    const logging = Object.values(resources).find((r) => r.Type === 'AWS::WAFv2::LoggingConfiguration');
    const groupId = JSON.stringify(props(logging).LogDestinationConfigs).match(/"Ref":"(\w+)"/)?.[1] as string;
    const group = resources[groupId];
    assert.equal(group?.Type, 'AWS::Logs::LogGroup');
    const name = JSON.stringify(props(group).LogGroupName);
    assert.match(name, /^\{"Fn::Join":\["",\["aws-waf-logs-ratelimit-prod-",/, 'WAF needs the prefix');
    assert.match(name, /"Ref":"AWS::StackId"/, 'unique per created stack');
    assert.equal(group?.DeletionPolicy, 'Retain', "prod keeps its WAF logs (under its stack's name)");
    const docs = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8');
    assert.doesNotMatch(docs, /aws-waf-logs-ratelimit-<stage>`/, 'docs/deploy.md names it with its <id>');
    writeFileSync(join(work, 'wafqa.json'), JSON.stringify({ account: '222222222222', region: 'eu-west-1' }));
    const qa = createPlatformApp({
      context: { stage: 'wafqa', dist: join(work, 'dist') },
      outdir: mkdtempSync(join(work, 'cdk-wafqa-')),
      stagesDir: work,
    });
    const qaGroups = Object.values(Template.fromStack(qa.platform).toJSON().Resources as Resources).filter(
      (r) => r.Type === 'AWS::Logs::LogGroup' && JSON.stringify(props(r).LogGroupName ?? '').includes('aws-waf-logs-'),
    );
    assert.deepEqual(
      qaGroups.map((r) => r.DeletionPolicy),
      ['Delete'],
      'another stage deletes them with the stack',
    );
  });

  it("keeps prod's queues through a destroy (accepted events, operator notices, their dead letters), not another stage's", () => {
    const queues = (resources: Resources) =>
      Object.entries(resources)
        .filter(([, r]) => r.Type === 'AWS::SQS::Queue')
        .map(([id, r]) => [id.replace(/[0-9A-F]{8}$/, ''), r.DeletionPolicy, r.Properties?.QueueName] as const);
    const prodQueues = queues(app.platform.toJSON().Resources as Resources);
    assert.ok(prodQueues.length >= 4, JSON.stringify(prodQueues));
    for (const [id, policy, name] of prodQueues) {
      assert.equal(policy, 'Retain', id);
      assert.equal(name, undefined, `${id}: a generated name, so a kept queue never blocks the next create`);
    }
    writeFileSync(join(work, 'queueqa.json'), JSON.stringify({ account: '222222222222', region: 'eu-west-1' }));
    const qa = createPlatformApp({
      context: { stage: 'queueqa', dist: join(work, 'dist') },
      outdir: mkdtempSync(join(work, 'cdk-queueqa-')),
      stagesDir: work,
    });
    const qaQueues = queues(Template.fromStack(qa.platform).toJSON().Resources as Resources);
    assert.deepEqual(new Set(qaQueues.map(([, policy]) => policy)), new Set(['Delete']));
  });

  it('reaches ElastiCache by RBAC: no AUTH token, the default user off, a user per role with its rules and its own secret', () => {
    const data = app.data.toJSON().Resources as Resources;
    const [, group] =
      Object.entries(data).find(([, r]) => r.Type === 'AWS::ElastiCache::ReplicationGroup') ?? assert.fail('no store');
    assert.equal(props(group).AuthToken, undefined, 'no AUTH token (the default user, with every command)');
    const [groupId, userGroup] =
      Object.entries(data).find(([, r]) => r.Type === 'AWS::ElastiCache::UserGroup') ?? assert.fail('no user group');
    assert.deepEqual(props(group).UserGroupIds, [{ Ref: groupId }]);
    assert.equal(props(userGroup).Engine, 'valkey');
    const users = new Map(
      Object.entries(data)
        .filter(([, r]) => r.Type === 'AWS::ElastiCache::User')
        .map(([id, r]) => [id, props(r)]),
    );
    const members = (props(userGroup).UserIds as { Ref: string }[]).map((ref) => users.get(ref.Ref));
    assert.equal(members.length, users.size, 'every user in the group');
    const byName = new Map(members.map((user) => [String(user?.UserName), user]));
    // the default user: off, no command, no key
    assert.equal(byName.get('default')?.AccessString, 'off -@all');
    assert.deepEqual(
      [...byName.keys()].sort(),
      ['default', ...Object.values(REDIS_ROLES).map((role) => role.username)].sort(),
    );
    const secretOf = (user: Record<string, unknown> | undefined) =>
      JSON.stringify((user?.AuthenticationMode as { Passwords?: unknown[] } | undefined)?.Passwords).match(
        /"Ref":"(\w+)"/,
      )?.[1];
    const secrets = new Set<string | undefined>();
    for (const [role, { username, rules }] of Object.entries(REDIS_ROLES)) {
      const user = byName.get(username);
      // the rule set of config/redis-roles.ts, as the local users have it (less resetchannels, which
      // ElastiCache's access strings do not take)
      assert.equal(user?.AccessString, managedAccessString(role as RedisRole));
      assert.deepEqual(
        String(user?.AccessString).split(' '),
        rules().filter((rule) => rule !== 'resetchannels'),
      );
      assert.equal((user?.AuthenticationMode as { Type?: string } | undefined)?.Type, 'password');
      const secret = secretOf(user);
      secrets.add(secret);
      const template = JSON.parse(
        String(
          (props(data[secret as string]).GenerateSecretString as { SecretStringTemplate: string }).SecretStringTemplate,
        ),
      );
      assert.equal(template.username, username, `${role}'s secret names its user`);
    }
    assert.equal(secrets.size, Object.keys(REDIS_ROLES).length, 'a secret per role');
    // each function reads its role's secret only: the admin function the operator's, every other the functions'
    const platformResources = app.platform.toJSON().Resources as Resources;
    const exported = (secretId: string) => new RegExp(`ExportsOutputRef${secretId}`);
    const [functionsSecret, operatorSecret] = [
      secretOf(byName.get(REDIS_ROLES.functions.username)),
      secretOf(byName.get(REDIS_ROLES.operator.username)),
    ] as [string, string];
    for (const [id, fn] of Object.entries(platformResources).filter(([, r]) => r.Type === 'AWS::Lambda::Function')) {
      const own = props(fn).FunctionName === 'ratelimit-prod-admin' ? operatorSecret : functionsSecret;
      const other = own === operatorSecret ? functionsSecret : operatorSecret;
      const env = JSON.stringify(
        (props(fn).Environment as { Variables: Record<string, unknown> }).Variables.REDIS_AUTH_SECRET_ARN,
      );
      assert.match(env, exported(own), `${id} is told its role's secret`);
      const role = JSON.stringify(props(fn).Role).match(/"(\w+ServiceRole\w*)"/)?.[1] as string;
      const granted = JSON.stringify(
        Object.values(platformResources).filter(
          (r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(props(r).Roles).includes(role),
        ),
      );
      assert.match(granted, exported(own), `${id} may read its role's secret`);
      assert.doesNotMatch(granted, exported(other), `${id} may not read the other role's secret`);
    }
  });

  it("gives the deployed users exactly the local production shape's ACL users' permissions", async () => {
    // the suite's production-shaped cluster (test/support/global-setup.ts): its ACL file is built from the
    // same rule set; what Redis enforces there, per user, is compared with the deployed access strings
    const admin = targets[1]?.admin() as RedisClient;
    try {
      await connected(admin);
      const data = app.data.toJSON().Resources as Resources;
      const deployed = new Map(
        Object.values(data)
          .filter((r) => r.Type === 'AWS::ElastiCache::User')
          .map((r) => [String(props(r).UserName), String(props(r).AccessString)]),
      );
      const permissions = (tokens: readonly string[]) => ({
        enabled: tokens.includes('on') && !tokens.includes('off'),
        keys: tokens.filter((t) => t.startsWith('~')).sort(),
        commands: tokens.filter((t) => /^[+-]/.test(t)).sort(),
      });
      for (const { username } of Object.values(REDIS_ROLES)) {
        const reply = (await admin.call('ACL', 'GETUSER', username)) as unknown[];
        const field = (name: string) => reply[reply.indexOf(name) + 1];
        const local = permissions([
          ...(field('flags') as string[]),
          ...String(field('keys')).split(' '),
          ...String(field('commands')).split(' '),
        ]);
        assert.ok(
          local.commands.length > 10 && local.keys.length === Object.keys(KEY_FAMILIES).length,
          JSON.stringify(local),
        );
        assert.deepEqual(permissions(String(deployed.get(username)).split(' ')), local, username);
      }
      // and the local default user is off, as the deployed one
      const localDefault = (await admin.call('ACL', 'GETUSER', 'default')) as unknown[];
      assert.ok((localDefault[localDefault.indexOf('flags') + 1] as string[]).includes('off'));
    } finally {
      admin.disconnect();
    }
  });

  it("watches every node of the store's shape, and alarms when one of them reports nothing (never silently green)", () => {
    /** The node ids the template's replication group will have, and the ids each Redis alarm reads. */
    const nodesOf = (stacks: { data: Template; platform: Template }) => {
      const group = Object.values(stacks.data.toJSON().Resources as Resources).find(
        (r) => r.Type === 'AWS::ElastiCache::ReplicationGroup',
      );
      const {
        ReplicationGroupId,
        NumNodeGroups = 1,
        ReplicasPerNodeGroup = 0,
      } = props(group) as Record<string, number>;
      const expected: string[] = [];
      for (let shard = 1; shard <= NumNodeGroups; shard++) {
        for (let node = 1; node <= 1 + ReplicasPerNodeGroup; node++) {
          expected.push(`${ReplicationGroupId}-${String(shard).padStart(4, '0')}-${String(node).padStart(3, '0')}`);
        }
      }
      const alarms = Object.values(stacks.platform.toJSON().Resources as Resources)
        .filter((r) => r.Type === 'AWS::CloudWatch::Alarm' && /ratelimit-\w+ Redis/.test(String(props(r).AlarmName)))
        .map((r) => props(r));
      const ids = (alarm: Record<string, unknown>) =>
        [...JSON.stringify(alarm).matchAll(/"CacheClusterId","Value":"([^"]+)"/g)].map((m) => m[1] as string).sort();
      return { expected: expected.sort(), alarms, ids };
    };
    const check = (stacks: { data: Template; platform: Template }, nodes: number) => {
      const { expected, alarms, ids } = nodesOf(stacks);
      assert.equal(expected.length, nodes);
      for (const alarm of alarms.filter((a) => !String(a.AlarmName).includes('RedisNodeSilent'))) {
        assert.deepEqual(ids(alarm), expected, `${String(alarm.AlarmName)} reads every node of the store`);
      }
      const silent = alarms.filter((a) => String(a.AlarmName).includes('RedisNodeSilent'));
      assert.deepEqual(silent.flatMap(ids).sort(), expected, 'a silent-node alarm per node');
      for (const alarm of silent) {
        assert.deepEqual(
          [alarm.TreatMissingData, alarm.ComparisonOperator, alarm.Threshold],
          ['breaching', 'LessThanThreshold', 1],
        );
        assert.match(JSON.stringify(alarm), /"Stat":"SampleCount"/, 'counts reports, whatever their value');
      }
    };
    check(app, 2);
    // another shape: the alarms follow it
    writeFileSync(join(work, 'wide.json'), JSON.stringify({ account: '222222222222', region: 'eu-west-1' }));
    const wider = createPlatformApp({
      context: { stage: 'wide', shards: 2, replicasPerShard: 2, dist: join(work, 'dist') },
      outdir: mkdtempSync(join(work, 'cdk-wide-')),
      stagesDir: work,
    });
    check({ data: Template.fromStack(wider.data), platform: Template.fromStack(wider.platform) }, 6);
  });

  it('gives the operator an admin function reachable through IAM only, writing overrides and nothing else', () => {
    const resources = app.platform.toJSON().Resources as Resources;
    const [adminId] =
      Object.entries(resources).find(
        ([, r]) => r.Type === 'AWS::Lambda::Function' && props(r).FunctionName === 'ratelimit-prod-admin',
      ) ?? assert.fail('no admin function');
    const invokable = Object.values(resources).filter(
      (r) => r.Type === 'AWS::Lambda::Permission' && JSON.stringify(r).includes(adminId.slice(0, 7)),
    );
    assert.deepEqual(invokable, [], 'no resource policy: only IAM principals of the account may call it');
    // its one entry: a function URL on its alias, SigV4-authenticated (test/infra/rollout.test.ts)
    const urls = Object.values(resources).filter((r) => r.Type === 'AWS::Lambda::Url');
    assert.deepEqual(
      urls.map((r) => [props(r).AuthType, getAttOf(props(r).TargetFunctionArn)]),
      [['AWS_IAM', adminId]],
    );
    const policy = Object.values(resources).find(
      (r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(props(r).Roles).includes('FnadminServiceRole'),
    );
    const writes = (
      props(policy).PolicyDocument as { Statement: { Action: unknown; Resource: unknown }[] }
    ).Statement.filter((st) => JSON.stringify(st.Action).includes('ssm:PutParameter'));
    assert.equal(writes.length, 1);
    assert.match(JSON.stringify(writes[0]?.Resource), /parameter\/ratelimit\/prod\/overrides\/\*/);
  });

  it('serves the API with an enhanced TLS security policy in strict access mode, not the legacy default', () => {
    app.platform.hasResourceProperties('AWS::ApiGateway::RestApi', {
      SecurityPolicy: API_SECURITY_POLICY,
      EndpointAccessMode: 'STRICT',
    });
    assert.match(API_SECURITY_POLICY, /^SecurityPolicy_TLS13_1_2_/, 'TLS 1.3, and 1.2 for the webhook senders');
  });

  it('reshards online (no replacement), and answers the WAF rate rule with 429 and Retry-After', () => {
    app.data.hasResource('AWS::ElastiCache::ReplicationGroup', { UpdatePolicy: { UseOnlineResharding: true } });
    app.platform.hasResourceProperties('AWS::WAFv2::WebACL', {
      Rules: Match.arrayWith([
        Match.objectLike({
          Name: 'per-ip-rate',
          Action: {
            Block: {
              CustomResponse: {
                ResponseCode: 429,
                ResponseHeaders: [
                  { Name: 'Retry-After', Value: String(readOuterLine().ipRateRule.evaluationWindowSeconds) },
                ],
              },
            },
          },
        }),
      ]),
    });
  });

  it("fixes ElastiCache's replica count at creation (create-only under a fixed id), as docs/deploy.md says", () => {
    const resources = app.data.toJSON().Resources as Resources;
    const group = props(Object.values(resources).find((r) => r.Type === 'AWS::ElastiCache::ReplicationGroup'));
    assert.equal(group.ReplicationGroupId, 'ratelimit-prod', 'a fixed id: a replacement fails the update');
    assert.equal(group.ReplicasPerNodeGroup, 1, "the stage file's replicasPerShard");
    const createOnly = createOnlyPropertiesOf(['AWS::ElastiCache::ReplicationGroup', 'AWS::MemoryDB::Cluster']);
    const elastiCache = createOnly['AWS::ElastiCache::ReplicationGroup'] ?? [];
    assert.ok(elastiCache.includes('ReplicasPerNodeGroup') && elastiCache.includes('ReplicationGroupId'));
    assert.ok(!elastiCache.includes('NumNodeGroups'), 'resharding updates in place');
    assert.ok(!createOnly['AWS::MemoryDB::Cluster']?.includes('NumReplicasPerShard'), "MemoryDB's replicas update");
    const docs = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8');
    assert.match(docs, /\*\*Replicas are fixed at creation on ElastiCache\*\*/);
    assert.match(docs, /aws elasticache increase-replica-count --replication-group-id\s+ratelimit-<stage>/);
  });

  it('has a Contributor Insights rule over the refusal log (top offenders per policy), in the dashboard', () => {
    const rules = Object.values(app.platform.toJSON().Resources as Resources).filter(
      (r) => r.Type === 'AWS::CloudWatch::InsightRule',
    );
    assert.equal(rules.length, 1);
    const body = JSON.stringify(rules[0]?.Properties?.RuleBody);
    for (const part of ['CloudWatchLogRule', '$.policy', '$.key', '$.message', 'rate limited', 'LogGroupNames']) {
      assert.ok(body.includes(part), `${part} in ${body}`);
    }
    const dashboard = JSON.stringify(
      Object.values(app.platform.toJSON().Resources as Resources).find((r) => r.Type === 'AWS::CloudWatch::Dashboard')
        ?.Properties?.DashboardBody,
    );
    assert.ok(dashboard.includes('insightRule'), 'the dashboard draws the top offenders');
  });

  it('has the queue with its dead-letter queue, and the alarms of the runbook', () => {
    app.platform.hasResourceProperties('AWS::SQS::Queue', {
      RedrivePolicy: Match.objectLike({ maxReceiveCount: 5 }),
    });
    const alarms = Object.values(app.platform.toJSON().Resources as Resources)
      .filter((r) => r.Type === 'AWS::CloudWatch::Alarm')
      .map((r) => String(r.Properties?.AlarmName));
    // without the workers deployed, none of their alarms: only policies a deployed consumer checks
    for (const name of ['login-ip', 'login-account', 'slack-channel', 'telegram-chat', 'llm-budget']) {
      assert.ok(alarms.includes(`ratelimit-prod CheckLatencyP99-${name}`), name);
    }
    // a degraded verdict names its check's first policy: the workspace, never the channel
    for (const name of ['login-ip', 'login-account', 'slack-workspace', 'telegram-bot', 'llm-in-flight']) {
      assert.ok(alarms.includes(`ratelimit-prod DegradedClosed-${name}`), name);
    }
    assert.ok(
      !alarms.includes('ratelimit-prod DegradedClosed-llm-budget'),
      'the budget is decided after its in-flight slot',
    );
    assert.ok(!alarms.includes('ratelimit-prod DegradedClosed-slack-channel'), 'an alarm that could never fire');
    assert.ok(!alarms.some((a) => /harvester-source|mattermost-channel/.test(a)), 'no alarm for a worker not deployed');
    assert.ok(alarms.includes('ratelimit-prod RedisMemory'));
    assert.ok(alarms.includes('ratelimit-prod RedisEvictions'));
    app.platform.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'ratelimit-prod RedisMemory',
      Threshold: 80,
      ComparisonOperator: 'GreaterThanThreshold',
    });
    app.platform.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'ratelimit-prod RedisEvictions',
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
    });
    app.platform.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
  });
});

describe('The CDK app with -c redis=memorydb', () => {
  it('keeps the counters in MemoryDB: Valkey, TLS, an ACL user, replicas, noeviction', () => {
    const app = synth('memorydb');
    app.data.resourceCountIs('AWS::ElastiCache::ReplicationGroup', 0);
    app.data.hasResourceProperties('AWS::MemoryDB::Cluster', {
      Engine: 'valkey',
      TLSEnabled: true,
      NumReplicasPerShard: 1,
      NodeType: 'db.r7g.large',
      ACLName: 'ratelimit-prod',
      ParameterGroupName: 'ratelimit-prod',
    });
    app.data.hasResourceProperties('AWS::MemoryDB::ParameterGroup', {
      Family: 'memorydb_valkey7',
      Parameters: { 'maxmemory-policy': 'noeviction' },
    });
    app.data.hasResourceProperties('AWS::MemoryDB::User', { UserName: 'ratelimit-prod' });
    app.data.hasResourceProperties('AWS::MemoryDB::ACL', { UserNames: ['ratelimit-prod'] });
    app.data.hasResourceProperties('AWS::SecretsManager::Secret', {
      GenerateSecretString: Match.objectLike({ SecretStringTemplate: '{"username":"ratelimit-prod"}' }),
    });
    // deleting the stack deletes the cluster after its final snapshot (a retained one would block the VPC's delete),
    // named per creation of the stack (its id's UUID): a second delete of the stage does not meet the first's
    app.data.hasResource('AWS::MemoryDB::Cluster', {
      DeletionPolicy: 'Delete',
      Properties: Match.objectLike({
        FinalSnapshotName: {
          'Fn::Join': [
            '-',
            ['ratelimit-prod-final', { 'Fn::Select': [2, { 'Fn::Split': ['/', { Ref: 'AWS::StackId' }] }] }],
          ],
        },
      }),
    });
    assert.equal(app.stacks.data.terminationProtection, true);
    app.platform.resourceCountIs('AWS::Lambda::Function', routes.length + operated.length);
  });

  it('keeps a stage as its file says: a deploy that omits -c redis cannot swap the store', () => {
    // infra/stages/prod.json says elasticache: asking for MemoryDB on prod is refused, omitting it keeps ElastiCache
    assert.throws(
      () => createPlatformApp({ context: { redis: 'memorydb', dist: join(work, 'dist') } }),
      (e: unknown) => e instanceof InvalidContextError && /stages\/prod\.json/.test((e as Error).message),
    );
    const kept = createPlatformApp({
      context: { dist: join(work, 'dist') },
      outdir: mkdtempSync(join(work, 'cdk-kept-')),
    });
    assert.equal(kept.context.redis, 'elasticache');
    assert.equal(
      createPlatformApp({ context: { shards: '1', dist: join(work, 'dist') } }).context.shards,
      1,
      'agreement',
    );
  });

  it('refuses context it cannot deploy, naming the value', () => {
    assert.throws(
      () => createPlatformApp({ context: { redis: 'serverless' }, stagesDir: work }),
      (e: unknown) => e instanceof InvalidContextError && /redis/.test((e as Error).message),
    );
    assert.throws(
      () => createPlatformApp({ context: { redis: 'memorydb', nodeType: 'cache.r7g.large' }, stagesDir: work }),
      InvalidContextError,
    );
    assert.throws(() => createPlatformApp({ context: { replicasPerShard: 0 }, stagesDir: work }), InvalidContextError);
  });
});

describe('The CDK app with the harvester and the Mattermost listener (-c egress=nat …)', () => {
  it('adds private subnets behind one NAT, the scheduled harvester and the listener on Fargate', () => {
    const stacks = createPlatformApp({
      context: {
        dist: join(work, 'dist'),
        egress: 'nat',
        harvesterSource: 'https://source.example.com',
        harvesterSites: 'site-a,site-b',
        mattermostUrl: 'https://chat.example.com',
      },
      outdir: mkdtempSync(join(work, 'cdk-egress-')),
    });
    stacks.app.synth();
    const data = Template.fromStack(stacks.data);
    const platform = Template.fromStack(stacks.platform);
    data.resourceCountIs('AWS::EC2::NatGateway', 1);
    data.hasResourceProperties('AWS::ElastiCache::ReplicationGroup', { Durability: 'sync' });
    platform.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'ratelimit-prod-harvester',
      Runtime: 'nodejs24.x',
      Environment: {
        Variables: Match.objectLike({
          HARVESTER_SOURCE_URL: 'https://source.example.com',
          HARVESTER_SITES: 'site-a,site-b',
        }),
      },
    });
    platform.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(5 minutes)',
      Targets: [Match.objectLike({ Arn: Match.anyValue() })],
    });
    // a failed harvest is not run again by EventBridge nor by Lambda: the next run takes up the cursor
    const harvester = platform.findResources('AWS::Lambda::Function', {
      Properties: { FunctionName: 'ratelimit-prod-harvester' },
    });
    assert.deepEqual(scheduledRunRetries(platform.toJSON() as Parameters<typeof scheduledRunRetries>[0]), [
      { function: Object.keys(harvester)[0], alias: 'live', delivery: 0, invocation: 0, maxEventAgeSeconds: 60 },
    ]);
    platform.hasResourceProperties('AWS::ECS::Service', {
      LaunchType: 'FARGATE',
      DesiredCount: 1,
      NetworkConfiguration: { AwsvpcConfiguration: Match.objectLike({ AssignPublicIp: 'DISABLED' }) },
    });
    platform.hasResourceProperties('AWS::ECS::TaskDefinition', {
      RuntimePlatform: { CpuArchitecture: 'ARM64', OperatingSystemFamily: 'LINUX' },
      ContainerDefinitions: [
        Match.objectLike({
          StopTimeout: 30,
          Environment: Match.arrayWith([{ Name: 'MATTERMOST_URL', Value: 'https://chat.example.com' }]),
        }),
      ],
    });
    // the listener's image is built for its task's architecture (ARM64), whatever the builder's
    const manifest = JSON.parse(
      readFileSync(join(stacks.app.outdir, `${stacks.platform.stackName}.assets.json`), 'utf8'),
    ) as { dockerImages: Record<string, { source: { platform?: string } }> };
    assert.deepEqual(
      Object.values(manifest.dockerImages).map((image) => image.source.platform),
      ['linux/arm64'],
    );
    // and both hand over as the webhooks do: on the events queue the pipe drains
    const resources = platform.toJSON().Resources as Resources;
    const [queueId] = Object.entries(resources).find(
      ([, r]) => r.Type === 'AWS::SQS::Queue' && r.Properties?.RedrivePolicy !== undefined,
    ) as [string, unknown];
    platform.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'ratelimit-prod-harvester',
      Environment: { Variables: Match.objectLike({ EVENT_QUEUE_URL: { Ref: queueId } }) },
    });
    platform.hasResourceProperties('AWS::ECS::TaskDefinition', {
      ContainerDefinitions: [
        Match.objectLike({ Environment: Match.arrayWith([{ Name: 'EVENT_QUEUE_URL', Value: { Ref: queueId } }]) }),
      ],
    });
  });
});

describe('cdk-nag', () => {
  it('fails the synth on a finding nobody acknowledged', () => {
    const created = createPlatformApp({
      context: { dist: join(work, 'dist') },
      outdir: mkdtempSync(join(work, 'cdk-nag-')),
    });
    // A queue without a dead-letter queue or TLS enforcement: AwsSolutions-SQS3 and -SQS4.
    new Queue(new Stack(created.app, 'Careless'), 'Careless');
    assert.throws(() => created.app.synth(), /Validation failed/);
    const report = JSON.parse(readFileSync(join(created.app.outdir, 'validation-report.json'), 'utf8')) as {
      pluginReports: { violations: { ruleName: string; violatingConstructs: { constructPath: string }[] }[] }[];
    };
    const violations = report.pluginReports.flatMap((r) => r.violations);
    assert.deepEqual(violations.map((v) => v.ruleName).sort(), ['AwsSolutions-SQS3', 'AwsSolutions-SQS4']);
    const paths = violations.flatMap((v) => v.violatingConstructs.map((c) => c.constructPath));
    assert.ok(
      paths.every((path) => path.startsWith('Careless/')),
      'the platform itself has no unacknowledged finding',
    );
  });
});

/**
 * What the consumers print as EMF, run for real: every route over HTTP, the
 * harvester and the Mattermost listener, first with their Redis up, then with
 * it stopped (the verdicts a degraded limiter gives). By `namespace|service|policy`, the metric names.
 */
async function limiterMetricsEmittedByEveryConsumer(): Promise<{
  emitted: Map<string, Set<string>>;
  /** Everything else the consumers printed (their logs, as Lambda would ship them). */
  printed: string;
  /** The values of the secret headers the run sent. */
  secretsSent: Set<string>;
}> {
  const lines: string[] = [];
  const other: string[] = [];
  const secretsSent = new Set<string>();
  const write = process.stdout.write.bind(process.stdout);
  const writeError = process.stderr.write.bind(process.stderr);
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    const text = String(chunk);
    other.push(text);
    if (text.includes('"_aws"')) {
      lines.push(...text.split('\n').filter((l) => l.includes('"_aws"')));
      return true;
    }
    return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    other.push(String(chunk));
    return (writeError as (...args: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stderr.write;
  const redis = await startRedis();
  // the IP windows fail open here, so that with Redis stopped each request reaches the checks its
  // handler makes itself (as when only their shard cannot answer)
  const openAtTheDoor = Object.fromEntries(
    ['login-ip', 'login-ip48', 'slack-ip', 'telegram-ip'].map((policy) => [
      `/ratelimit/local/overrides/${policy}`,
      { failureMode: 'open' },
    ]),
  );
  // the partner's monthly quota nearly spent, so it is the binding limit of a partner's check (and reports)
  const monthlyCap = { '/ratelimit/local/overrides/api-partner-month': { limit: 3 } };
  // one /48 nearly spent, so login's /48 window is the binding limit of that address's check (and reports)
  const SPENT_48 = '127.0.0.48';
  const narrow48 = { [`/ratelimit/local/overrides/login-ip48/${SPENT_48}`]: { limit: 5 } };
  // globex's budget exactly one call's reservation, so the budget (not the slot) is the binding limit of
  // its LLM check (slot and budget are decided in one script; a verdict names the binding policy)
  const oneCall = {
    '/ratelimit/local/overrides/llm-budget/globex': {
      capacity: reservationOf(MODELS['nova-lite'] as ModelEntry, 'hello', 10),
    },
  };
  const platform = await consumers({
    metrics: true,
    redisUrl: redis.url,
    parameters: { ...openAtTheDoor, ...monthlyCap, ...narrow48, ...oneCall },
  });
  let deviceCookie = '';
  const [mattermost, source] = await Promise.all([startMattermostServer(), startHarvestSource()]);
  const everyConsumer = async (round: number) => {
    const from = loopbackAddress();
    const send = (path: string, init: { method?: string; body?: string; headers?: Record<string, string> } = {}) => {
      for (const [name, value] of Object.entries(init.headers ?? {})) {
        if ((SECRET_HEADERS as readonly string[]).includes(name.toLowerCase())) secretsSent.add(value);
      }
      return call(platform.base, { path, from, ...init });
    };
    await send('/auth/login', {
      method: 'POST',
      body: JSON.stringify({ email: 'metrics@example.com', password: 'no' }),
    });
    const login = (from: string, headers: Record<string, string> = {}) =>
      call(platform.base, {
        method: 'POST',
        path: '/auth/login',
        from,
        headers,
        body: JSON.stringify({ email: 'alice@example.com', password: 'correct horse battery staple' }),
      });
    // a returning device (its cookie from round 1's login) is checked against its own backoff
    if (!deviceCookie) deviceCookie = String((await login(SPENT_48)).headers['set-cookie']).split(';')[0] as string;
    await login(SPENT_48, { Cookie: deviceCookie });
    // a refusal in every run, so the logs hold a refusal line to read (the /48's window narrowed to 5 above)
    if (round === 1) for (let i = 0; i < 5; i++) await login(SPENT_48);
    for (const key of ['rk_localDemoStandardKeyNotASecret00', 'rk_localDemoPartnerKeyNotASecret000', 'not-a-key']) {
      await send('/v1/whoami', { headers: { 'x-api-key': key } });
    }
    await send('/v1/llm/complete', {
      method: 'POST',
      headers: { 'x-api-key': 'rk_localDemoPartnerKeyNotASecret000' },
      body: JSON.stringify({ model: 'nova-lite', prompt: 'hello', max_tokens: 10 }),
    });
    const slack = JSON.stringify({
      type: 'event_callback',
      team_id: 'TMETRIC',
      event_id: `Ev${round}`,
      event: { channel: 'C1' },
    });
    await send('/webhooks/slack', {
      method: 'POST',
      body: slack,
      headers: signSlackBody('local-only-slack-signing-secret', slack),
    });
    await send('/webhooks/telegram/demo', {
      method: 'POST',
      body: JSON.stringify({ update_id: round, message: { chat: { id: 7 } } }),
      headers: { 'X-Telegram-Bot-Api-Secret-Token': 'local-only-telegram-secret-token' },
    });
    // every route's middleware checks, from its declaration: a new route's are sent with no request written here
    for (const route of routes) {
      const { path, ...init } = sampleRequest(route);
      await send(path, init);
    }
    // the workers, as they run in AWS (the harvester's Lambda flushes at its end; the listener with its summaries)
    await runHarvest({ source: source.url, site: 'metrics', until: Date.now() + 200 });
    sharedPlatform().observer.flush();
    const parts = sharedPlatform();
    const publishCatchUp = catchUpPublisher();
    let caughtUp = false;
    const listener = new MattermostListener({
      url: mattermost.url,
      token: mattermost.token,
      limiter: parts.limiter,
      once: parts.acceptedOnce,
      sink: parts.sink,
      logger: { info: () => {}, warn: () => {} },
      observer: parts.observer,
      // the listener's own health metrics, as main.ts publishes them
      onCaughtUp: (report) => {
        publishCatchUp(report);
        caughtUp = true;
      },
      reconnectBaseMs: 10,
      holdMs: 300,
    });
    await listener.start();
    mattermost.post('metrics', `round ${round}`);
    const decided = () => {
      const c = listener.summary.get('metrics');
      return (c?.admitted ?? 0) + (c?.expired ?? 0) > 0;
    };
    for (let i = 0; i < 400 && !decided(); i++) await new Promise((resolve) => setTimeout(resolve, 10)); // polling
    // a network failure: the listener reconnects, catches up and publishes its lag
    mattermost.dropConnections();
    for (let i = 0; i < 400 && !caughtUp; i++) await new Promise((resolve) => setTimeout(resolve, 10)); // polling
    await listener.stop();
  };
  try {
    await everyConsumer(1);
    await redis.stop();
    await everyConsumer(2);
  } finally {
    process.stdout.write = write;
    process.stderr.write = writeError;
    await Promise.all([platform.close(), mattermost.close(), source.close(), redis.stop()]);
  }
  const emitted = new Map<string, Set<string>>();
  for (const line of lines) {
    const emf = JSON.parse(line) as Record<string, unknown> & {
      _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[] };
    };
    for (const directive of emf._aws.CloudWatchMetrics) {
      const id = `${directive.Namespace}|${String(emf.service)}|${String(emf.policy)}`;
      const names = emitted.get(id) ?? new Set<string>();
      for (const metric of directive.Metrics) names.add(metric.Name);
      emitted.set(id, names);
    }
  }
  return { emitted, printed: other.join(''), secretsSent };
}

type Dimension = { Name: string; Value: unknown };

/** The metrics an alarm watches: its own, or each of its metric math's (CDK renders a labelled metric as math). */
function metricsOf(alarm: AlarmResource): { namespace: string; metric: string; d: Record<string, unknown> }[] {
  const dims = (list: Dimension[] | undefined) => Object.fromEntries((list ?? []).map((x) => [x.Name, x.Value]));
  const { Namespace, MetricName, Dimensions, Metrics } = alarm.Properties;
  if (Namespace) return [{ namespace: Namespace, metric: String(MetricName), d: dims(Dimensions) }];
  return (Metrics ?? []).flatMap((m) =>
    m.MetricStat
      ? [
          {
            namespace: m.MetricStat.Metric.Namespace,
            metric: m.MetricStat.Metric.MetricName,
            d: dims(m.MetricStat.Metric.Dimensions),
          },
        ]
      : [],
  );
}

type AlarmResource = {
  Properties: {
    AlarmName: string;
    Namespace?: string;
    MetricName?: string;
    Dimensions?: Dimension[];
    Metrics?: { MetricStat?: { Metric: { Namespace: string; MetricName: string; Dimensions?: Dimension[] } } }[];
    AlarmActions?: unknown[];
    OKActions?: unknown[];
    EvaluationPeriods: number;
    DatapointsToAlarm?: number;
  };
};

describe('The alarms (all consumers deployed)', () => {
  let template: Template;
  let resources: Resources;
  let alarms: AlarmResource[];
  let emitted: Map<string, Set<string>>;
  let printed: string;
  let secretsSent: Set<string>;
  before(async () => {
    ({ emitted, printed, secretsSent } = await limiterMetricsEmittedByEveryConsumer());
    const stacks = createPlatformApp({
      context: {
        dist: join(work, 'dist'),
        egress: 'nat',
        harvesterSource: 'https://source.example.com',
        harvesterSites: 'site-a',
        mattermostUrl: 'https://chat.example.com',
        alarmEmails: 'oncall@example.com',
        alarmUrls: 'https://hooks.example.com/alarms',
      },
      outdir: mkdtempSync(join(work, 'cdk-alarms-')),
    });
    stacks.app.synth();
    template = Template.fromStack(stacks.platform);
    resources = template.toJSON().Resources as Resources;
    alarms = Object.values(resources).filter((r) => r.Type === 'AWS::CloudWatch::Alarm') as unknown as AlarmResource[];
  });

  it('each watch a metric the deployed code emits (run for real) or AWS reports for a deployed resource', () => {
    const catalogue = new Map(Object.entries(PLATFORM_POLICIES).map(([name, raw]) => [name, compilePolicy(name, raw)]));
    const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);
    const refs = (type: string) => new Set(ofType(type).map(([id]) => id));
    const refOf = (value: unknown) => (value as { Ref?: string }).Ref ?? getAttOf(value);
    const restApiName = props(ofType('AWS::ApiGateway::RestApi')[0]?.[1]).Name;
    const webAclMetric = (props(ofType('AWS::WAFv2::WebACL')[0]?.[1]).VisibilityConfig as { MetricName: string })
      .MetricName;
    const unwatchable: string[] = [];
    for (const alarm of alarms) {
      const name = alarm.Properties.AlarmName;
      for (const { namespace, metric, d } of metricsOf(alarm)) {
        switch (namespace) {
          case 'RateLimit': {
            if (metric === UNHANDLED_ERROR.metric) {
              // the line the house handler logs for a 500 it answers (test/integration/unhandled-error.test.ts),
              // counted by a metric filter on that route's own log group, by the route the line names
              const route = routes.find((r) => r.id === d.route);
              // the route's own log group (infra/consumer-function.ts: `Logs-<id>`, a logical id `Logs<id><hash>`)
              const logGroup =
                route &&
                [...refs('AWS::Logs::LogGroup')].find((id) => new RegExp(`^Logs${route.id}[0-9A-F]{8}$`).test(id));
              const pattern = FilterPattern.stringValue('$.message', '=', UNHANDLED_ERROR.message).logPatternString;
              const filtered = ofType('AWS::Logs::MetricFilter').some(([, r]) => {
                const f = props(r) as {
                  LogGroupName: unknown;
                  FilterPattern: string;
                  MetricTransformations: {
                    MetricNamespace: string;
                    MetricName: string;
                    MetricValue: string;
                    Dimensions?: unknown;
                  }[];
                };
                const [t] = f.MetricTransformations;
                return (
                  refOf(f.LogGroupName) === logGroup &&
                  f.FilterPattern === pattern &&
                  t?.MetricNamespace === namespace &&
                  t.MetricName === metric &&
                  t.MetricValue === '1' &&
                  JSON.stringify(t.Dimensions) === JSON.stringify([{ Key: 'route', Value: '$.route' }])
                );
              });
              if (!logGroup || !filtered) unwatchable.push(`${name} (no filter counts ${String(d.route)}'s line)`);
              break;
            }
            if (d.service === LISTENER_METRICS.service) {
              // the listener's own health metric, seen published by the running listener
              if (!emitted.get(`RateLimit|${LISTENER_METRICS.service}|undefined`)?.has(metric)) unwatchable.push(name);
              break;
            }
            // the series a consumer was seen to emit (its service and policy), and a metric the observer
            // publishes; a degraded one only if the running consumers were seen to report the policy
            // degraded, under the name its configured failure mode gives (the run opened the IP windows)
            const seen = emitted.get(`RateLimit|${String(d.service)}|${String(d.policy)}`);
            const { 'degraded-open': open, 'degraded-closed': closed } = OBSERVER_METRICS.outcomes;
            const observable = new Set<string>([...Object.values(OBSERVER_METRICS.outcomes), OBSERVER_METRICS.latency]);
            const configured = catalogue.get(String(d.policy))?.failureMode === 'open' ? open : closed;
            const ok =
              seen !== undefined &&
              observable.has(metric) &&
              (metric !== open && metric !== closed
                ? true
                : metric === configured && (seen.has(open) || seen.has(closed)));
            if (!ok) unwatchable.push(`${name} (${metric} of ${String(d.policy)})`);
            break;
          }
          case 'AWS/Lambda':
            if (!refs('AWS::Lambda::Function').has(refOf(d.FunctionName))) unwatchable.push(name);
            break;
          case 'AWS/ApiGateway': {
            // a per-method metric: a method the API has, on the resource whose path the metric names
            const method =
              d.Resource === undefined ||
              ofType('AWS::ApiGateway::Method').some(
                ([, m]) =>
                  props(m).HttpMethod === d.Method &&
                  resourcePath(resources, String(refOf(props(m).ResourceId))) === d.Resource,
              );
            if (d.ApiName !== restApiName || d.Stage !== 'prod' || !method) unwatchable.push(name);
            break;
          }
          case 'AWS/WAFV2':
            if (d.WebACL !== webAclMetric) unwatchable.push(name);
            break;
          case 'AWS/SQS':
            if (!refs('AWS::SQS::Queue').has(refOf(d.QueueName))) unwatchable.push(name);
            break;
          case 'ECS/ContainerInsights':
            // Container Insights (on the listener's cluster) for the deployed service
            if (
              !refs('AWS::ECS::Cluster').has(refOf(d.ClusterName)) ||
              !(typeof d.ServiceName === 'string'
                ? ofType('AWS::ECS::Service').some(([, r]) => props(r).ServiceName === d.ServiceName)
                : refs('AWS::ECS::Service').has(refOf(d.ServiceName)))
            )
              unwatchable.push(name);
            break;
          case 'AWS/ElastiCache':
            // per node of the replication group: <group>-<shard>-<node>
            if (!/^ratelimit-prod-\d{4}-\d{3}$/.test(String(d.CacheClusterId))) unwatchable.push(name);
            break;
          default:
            unwatchable.push(`${name} (${namespace})`);
        }
      }
    }
    assert.deepEqual(
      unwatchable,
      [],
      "alarms on a metric nobody emits: a route's middleware checks are sent from its declaration " +
        '(test/support/route-sample.ts); a check its handler makes itself needs a request it accepts, ' +
        'written in limiterMetricsEmittedByEveryConsumer (test/infra/platform-app.test.ts)',
    );
    // and every limiter series the consumers emitted has its alarms
    for (const id of emitted.keys()) {
      if (id.startsWith(`RateLimit|${LISTENER_METRICS.service}|`)) continue; // the listener's health, not a policy
      const policy = id.split('|')[2] as string;
      assert.ok(
        alarms.some((a) => a.Properties.AlarmName === `ratelimit-prod CheckLatencyP99-${policy}`),
        `no alarm for ${policy}`,
      );
    }
    assert.ok(
      emitted.has('RateLimit|platform|harvester-source') && emitted.has('RateLimit|platform|mattermost-channel'),
    );
  });

  it('logs no secret header: none of the values the run sent is in anything the consumers printed', () => {
    // the API keys, the Slack signatures and the Telegram secret token of both rounds
    assert.ok(secretsSent.size >= 5, `${secretsSent.size} secret values sent`);
    const leaked = [...secretsSent].filter((value) => printed.includes(value));
    assert.deepEqual(leaked, [], 'secret header values in the logs');
    assert.ok(printed.includes('rate limited'), 'the run printed its logs (and was read)');
  });

  it("lets each function read the policies and its own secrets' folder, and no other consumer's secret", () => {
    const all = Object.entries(resources);
    /** The parameter paths a function's (or the listener task's) role may read by path, and whether it may decrypt. */
    const grants = (roleMatch: RegExp) => {
      const policies = all.filter(
        ([, r]) => r.Type === 'AWS::IAM::Policy' && roleMatch.test(JSON.stringify(props(r).Roles)),
      );
      const statements = policies.flatMap(
        ([, p]) =>
          (props(p).PolicyDocument as { Statement: { Action: unknown; Resource: unknown; Condition?: unknown }[] })
            .Statement,
      );
      const paths = statements
        .filter((st) => st.Action === 'ssm:GetParametersByPath')
        .flatMap((st) => JSON.stringify(st.Resource).match(/parameter\/ratelimit\/prod\/[a-z-/]+[a-z]/g) ?? []);
      const decrypts = statements.some(
        (st) => st.Action === 'kms:Decrypt' && JSON.stringify(st.Condition).includes('ssm.'),
      );
      return { secrets: [...new Set(paths.filter((p) => p.includes('/secrets/')))].sort(), decrypts, paths };
    };
    const expected: [RegExp, string[]][] = [
      [/FnloginServiceRole/, ['parameter/ratelimit/prod/secrets/login']],
      [/FnslackServiceRole/, ['parameter/ratelimit/prod/secrets/slack']],
      [/FntelegramServiceRole/, ['parameter/ratelimit/prod/secrets/telegram']],
      [/FnapiServiceRole/, ['parameter/ratelimit/prod/secrets/api']],
      [/FnllmServiceRole/, ['parameter/ratelimit/prod/secrets/api']],
      [/FnadminServiceRole/, ['parameter/ratelimit/prod/secrets/api', 'parameter/ratelimit/prod/secrets/login']],
      [/HarvesterServiceRole/, []],
      [/ListenerTaskTaskRole/, ['parameter/ratelimit/prod/secrets/mattermost-listener']],
    ];
    for (const [role, secrets] of expected) {
      const granted = grants(role);
      assert.deepEqual(granted.secrets, secrets, String(role));
      assert.equal(granted.decrypts, secrets.length > 0, `${String(role)} decrypts only with secrets`);
      for (const policyPath of ['defaults', 'overrides']) {
        assert.ok(
          granted.paths.includes(`parameter/ratelimit/prod/${policyPath}`),
          `${String(role)} reads ${policyPath}`,
        );
      }
    }
    // docs/deploy.md says who holds which folder, as the template grants it
    const docs = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8').replace(/\s+/g, ' ');
    const holdsApi = expected.filter(([role]) => grants(role).secrets.includes('parameter/ratelimit/prod/secrets/api'));
    assert.deepEqual(
      holdsApi.map(([role]) => String(role)),
      ['/FnapiServiceRole/', '/FnllmServiceRole/', '/FnadminServiceRole/'],
    );
    assert.ok(docs.includes('the API and LLM functions hold the API key pepper (`secrets/api/`, `api-key-pepper`'));
    assert.ok(docs.includes("the admin function reads login's and the API's folders"));
    assert.ok(docs.includes('the harvester holds no secret and may not decrypt'));
    // and each is told what to read, which the layer's store fetches (RATE_LIMIT_READ_PATHS)
    template.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'ratelimit-prod-login',
      Environment: { Variables: Match.objectLike({ RATE_LIMIT_READ_PATHS: 'defaults,overrides,secrets/login' }) },
    });
  });

  it('gives each function the reserved concurrency the stage file names (infra/stages/prod.json), else its default', () => {
    const reserved = (readStageFile(STAGES_DIR, 'prod').reservedConcurrency ?? {}) as Record<string, number>;
    for (const route of routes) {
      template.hasResourceProperties('AWS::Lambda::Function', {
        FunctionName: `ratelimit-prod-${route.id}`,
        ReservedConcurrentExecutions: reservedConcurrencyFor(reserved, route.id),
      });
    }
    template.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'ratelimit-prod-harvester',
      ReservedConcurrentExecutions: 5,
    });
  });

  it('each notify the alarm topic, in alarm and back to OK; subscriptions from the context', () => {
    const topics = Object.entries(resources).filter(([, r]) => r.Type === 'AWS::SNS::Topic');
    assert.equal(topics.length, 1);
    const [topicId] = topics[0] as [string, unknown];
    for (const alarm of alarms) {
      assert.deepEqual(alarm.Properties.AlarmActions, [{ Ref: topicId }], alarm.Properties.AlarmName);
      assert.deepEqual(alarm.Properties.OKActions, [{ Ref: topicId }], alarm.Properties.AlarmName);
    }
    template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'oncall@example.com' });
    template.hasResourceProperties('AWS::SNS::Subscription', {
      Protocol: 'https',
      Endpoint: 'https://hooks.example.com/alarms',
    });
    template.hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: Match.anyValue() });
  });

  it("lets CloudWatch publish to the alarm topic, for this account's alarms of the stage only", () => {
    const policies = Object.values(resources).filter((r) => r.Type === 'AWS::SNS::TopicPolicy');
    assert.equal(policies.length, 1, "an explicit topic policy replaces SNS's default one");
    const topicId = Object.entries(resources).find(([, r]) => r.Type === 'AWS::SNS::Topic')?.[0];
    const policy = props(policies[0]);
    assert.deepEqual(policy.Topics, [{ Ref: topicId }]);
    const statements = (policy.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement;
    const fromCloudWatch = statements.filter(
      (s) => JSON.stringify(s.Principal) === JSON.stringify({ Service: 'cloudwatch.amazonaws.com' }),
    );
    assert.equal(fromCloudWatch.length, 1, 'a statement for cloudwatch.amazonaws.com');
    const [statement] = fromCloudWatch as [Record<string, unknown>];
    assert.equal(statement.Effect, 'Allow');
    assert.equal(statement.Action, 'sns:Publish');
    assert.deepEqual(statement.Resource, { Ref: topicId });
    const condition = statement.Condition as Record<string, Record<string, unknown>>;
    assert.deepEqual(condition.StringEquals, { 'aws:SourceAccount': '222222222222' });
    // the stack's region is known, so CDK writes its partition
    assert.deepEqual(condition.ArnLike, {
      'aws:SourceArn': 'arn:aws:cloudwatch:eu-west-1:222222222222:alarm:ratelimit-prod *',
    });
    // the pattern covers every alarm that notifies the topic
    for (const alarm of alarms) assert.match(alarm.Properties.AlarmName, /^ratelimit-prod /);
  });

  it('pages on a degraded limiter in 3 of 5 minutes, not on one blip; fail-open policies too', () => {
    const byName = new Map(alarms.map((a) => [a.Properties.AlarmName, a.Properties]));
    const closed = byName.get('ratelimit-prod DegradedClosed-login-ip');
    assert.equal(closed?.EvaluationPeriods, 5);
    assert.equal(closed?.DatapointsToAlarm, 3);
    assert.ok(byName.has('ratelimit-prod DegradedOpen-api-key'), 'the API key limits failing open are watched');
    // each route's latency on its own (a slow-by-design route would hide the others' in a stage-wide p99),
    // but the route that waits on its upstream (its own timeout): not against the others' 2 s
    for (const route of routes) {
      const latency = byName.get(`ratelimit-prod ApiLatencyP99-${route.id}`);
      assert.equal(latency !== undefined, route.timeoutSeconds === undefined, route.id);
      if (!latency) continue;
      const watched = metricsOf({ Properties: latency } as AlarmResource).map((m) => `${m.d.Method} ${m.d.Resource}`);
      assert.deepEqual(
        watched,
        route.methods.map((m) => `${m} ${route.path}`),
        route.id,
      );
    }
    assert.ok(!byName.has('ratelimit-prod ApiLatencyP99'), 'no stage-wide p99: the LLM route held it over 2 s');
    for (const name of [
      'FunctionErrors-login',
      'FunctionThrottles-slack',
      'FunctionErrors-harvester',
      'Api5xx',
      'ApiLatencyP99-login',
      'ApiLatencyP99-slack',
      'WafBlocked',
      'DeadLetters',
      'QueueAge',
      // the admin function's notices: one the pipe cannot publish must not wait unseen
      'OperationsDeadLetters',
      'OperationsQueueAge',
      'RedisEngineCpu',
      'RedisConnections',
      'RedisTrafficManagement',
    ]) {
      assert.ok(byName.has(`ratelimit-prod ${name}`), name);
    }
  });
});

/**
 * A name that carries the stack's id (`Ref: AWS::StackId`) is new with every
 * created stack, so one a failed create or a destroy leaves never collides
 * (the WAF log group: WAF needs its `aws-waf-logs-` prefix, so CloudFormation
 * cannot generate the name).
 */
const uniquePerStack = (value: unknown): boolean => JSON.stringify(value).includes('"Ref":"AWS::StackId"');

type FullResources = Record<
  string,
  { Type: string; Properties?: Record<string, unknown>; DeletionPolicy?: string; UpdateReplacePolicy?: string }
>;

/** The literal fixed names of a template's resources, by `<type> <property>`. */
function fixedNames(resources: FullResources): Map<string, string> {
  const names = new Map<string, string>();
  for (const [id, r] of Object.entries(resources)) {
    // an alias's name is unique within its function only (every function's is `live`)
    if (r.Type === 'AWS::Lambda::Alias') continue;
    for (const property of FIXED_NAME_PROPERTIES) {
      const value = r.Properties?.[property];
      if (typeof value === 'string') names.set(`${r.Type} ${property} ${value}`, id);
    }
  }
  return names;
}

type Statement = { Action: unknown; Resource: unknown; Condition?: unknown };
const envOf = (r: { Properties?: Record<string, unknown> } | undefined) =>
  ((r?.Properties?.Environment ?? { Variables: {} }) as { Variables: Record<string, unknown> }).Variables;
const statementsIn = (r: { Properties?: Record<string, unknown> }) =>
  ((r.Properties?.PolicyDocument ?? { Statement: [] }) as { Statement: Statement[] }).Statement;

describe('A first deploy into a fresh account (issue 27)', () => {
  const synthStage = (stage: string, stagesDir?: string, context: Record<string, unknown> = {}) => {
    const stacks = createPlatformApp({
      context: { stage, dist: join(work, 'dist'), ...context },
      outdir: mkdtempSync(join(work, `cdk-${stage}-`)),
      ...(stagesDir ? { stagesDir } : {}),
    });
    const assembly = stacks.app.synth();
    return {
      stacks,
      assembly,
      data: Template.fromStack(stacks.data).toJSON().Resources as FullResources,
      platform: Template.fromStack(stacks.platform).toJSON().Resources as FullResources,
    };
  };
  let prod: ReturnType<typeof synthStage>;
  let dev: ReturnType<typeof synthStage>;
  let qa: ReturnType<typeof synthStage>;
  before(() => {
    prod = synthStage('prod');
    dev = synthStage('dev');
    // a second MemoryDB stage on an existing user pool, beside prod's MemoryDB
    writeFileSync(
      join(work, 'qa.json'),
      JSON.stringify({
        account: '222222222222',
        region: 'eu-west-1',
        redis: 'memorydb',
        userPoolId: 'eu-west-1_AbCdEf123',
        reservedConcurrency: { default: 3, login: 5 },
      }),
    );
    qa = synthStage('qa', work);
  });

  it('reserves concurrency as the stage file says: prod its list, dev nothing (a quota of 10 deploys it), a default for the rest', () => {
    const reservedOf = (resources: FullResources) =>
      Object.values(resources)
        .filter((r) => r.Type === 'AWS::Lambda::Function' && r.Properties?.ReservedConcurrentExecutions !== undefined)
        .map((r) => [String(r.Properties?.FunctionName), r.Properties?.ReservedConcurrentExecutions]);
    const file = readStageFile(STAGES_DIR, 'prod').reservedConcurrency as Record<string, number>;
    assert.deepEqual(
      Object.fromEntries(reservedOf(prod.platform)),
      Object.fromEntries(
        [...routes, ...operated].map((f) => [`ratelimit-prod-${f.id}`, reservedConcurrencyFor(file, f.id)]),
      ),
    );
    assert.deepEqual(reservedOf(dev.platform), [], 'dev reserves none');
    assert.deepEqual(
      Object.fromEntries(reservedOf(qa.platform)),
      Object.fromEntries([...routes, ...operated].map((f) => [`ratelimit-qa-${f.id}`, f.id === 'login' ? 5 : 3])),
      'the default reserves every function the file does not name (a new route needs no entry)',
    );
    // what the pre-flight sums is the template's
    const templates = prod.assembly.stacks.map((s) => s.template);
    assert.equal(
      reservedConcurrencyOf(templates).total,
      [...routes, ...operated].reduce((sum, f) => sum + (reservedConcurrencyFor(file, f.id) ?? 0), 0),
    );
    assert.throws(
      () =>
        createPlatformApp({
          context: { dist: join(work, 'dist'), reservedConcurrency: '{"lgoin":5}' },
          stagesDir: work,
        }),
      (e: unknown) =>
        e instanceof InvalidContextError && /"lgoin" is no function of the platform/.test((e as Error).message),
    );
  });

  it("synthesizes each stage for its file's account and region, offline (no lookup left to make)", () => {
    for (const [stage, account] of [
      [prod, '222222222222'],
      [dev, '111111111111'],
    ] as const) {
      for (const stack of [stage.stacks.data, stage.stacks.platform]) {
        assert.deepEqual([stack.account, stack.region], [account, 'eu-west-1'], stack.stackName);
      }
      assert.equal(stage.assembly.manifest.missing, undefined, 'nothing to look up');
      assert.deepEqual(
        Object.values(stage.data)
          .filter((r) => r.Type === 'AWS::EC2::Subnet')
          .map((r) => r.Properties?.AvailabilityZone),
        ['eu-west-1a', 'eu-west-1b'],
      );
    }
    assert.notEqual(dev.stacks.data.account, prod.stacks.data.account, 'dev and prod live apart');
  });

  it('keeps no resource with a fixed name past a failed create or a destroy (generated names, or deleted)', () => {
    for (const stage of [prod, dev, qa]) {
      for (const resources of [stage.data, stage.platform]) {
        for (const [id, r] of Object.entries(resources)) {
          const kept = [r.DeletionPolicy, r.UpdateReplacePolicy].some(
            (p) => p === 'Retain' || p === 'RetainExceptOnCreate',
          );
          if (!kept) continue;
          for (const property of FIXED_NAME_PROPERTIES) {
            const value = r.Properties?.[property];
            if (value === undefined) continue;
            assert.ok(
              uniquePerStack(value),
              `${id} (${r.Type}) is kept with the fixed ${property} ${JSON.stringify(value)}`,
            );
          }
        }
      }
    }
    // the ones kept on purpose, named by the service: data (a key, the two Redis users' secrets, the users), logs
    const kept = Object.values(prod.data)
      .filter((r) => r.DeletionPolicy === 'Retain')
      .map((r) => r.Type)
      .sort();
    assert.deepEqual(kept, [
      'AWS::Cognito::UserPool',
      'AWS::KMS::Key',
      'AWS::SecretsManager::Secret',
      'AWS::SecretsManager::Secret',
    ]);
    const pool = Object.values(prod.data).find((r) => r.Type === 'AWS::Cognito::UserPool');
    assert.equal(pool?.Properties?.DeletionProtection, 'ACTIVE');
  });

  it('names every fixed-name resource by its stage: two MemoryDB stages in one account share no name', () => {
    const prodMemoryDb = synthStage('prod', work, { redis: 'memorydb' });
    const names = (stage: ReturnType<typeof synthStage>) =>
      new Set([...fixedNames(stage.data).keys(), ...fixedNames(stage.platform).keys()]);
    const shared = [...names(prodMemoryDb)].filter((name) => names(qa).has(name));
    assert.deepEqual(shared, []);
    assert.ok(names(qa).has('AWS::MemoryDB::User UserName ratelimit-qa'));
    assert.ok(names(qa).has('AWS::MemoryDB::Cluster ClusterName ratelimit-qa'));
  });

  it('verifies login passwords with Cognito: its pool, an ADMIN_USER_PASSWORD_AUTH client without secret, one grant', () => {
    const template = Template.fromStack(prod.stacks.data);
    template.hasResourceProperties('AWS::Cognito::UserPoolClient', {
      ExplicitAuthFlows: Match.arrayWith(['ALLOW_ADMIN_USER_PASSWORD_AUTH']),
      GenerateSecret: false,
      PreventUserExistenceErrors: 'ENABLED',
    });
    const login = Object.values(prod.platform).find((r) => r.Properties?.FunctionName === 'ratelimit-prod-login');
    const env = envOf(login);
    assert.match(JSON.stringify(env.LOGIN_USER_POOL_ID), /ExportsOutputRefUsersPool/);
    assert.match(JSON.stringify(env.LOGIN_USER_POOL_CLIENT_ID), /ExportsOutputRefUsersPoolLoginClient/);
    const grants = Object.entries(prod.platform).flatMap(([, r]) =>
      r.Type === 'AWS::IAM::Policy'
        ? statementsIn(r)
            .filter((st) => JSON.stringify(st.Action).includes('cognito-idp'))
            .map((st) => ({
              roles: JSON.stringify(r.Properties?.Roles),
              st,
            }))
        : [],
    );
    assert.equal(grants.length, 1, 'one function may ask Cognito');
    assert.match(grants[0]?.roles ?? '', /FnloginServiceRole/);
    assert.equal(grants[0]?.st.Action, 'cognito-idp:AdminInitiateAuth');
    assert.match(JSON.stringify(grants[0]?.st.Resource), /ExportsOutputFnGetAttUsersPool.*Arn/);
    // a stage on an existing pool: no pool of its own, the client and the grant on the one named
    assert.equal(Object.values(qa.data).filter((r) => r.Type === 'AWS::Cognito::UserPool').length, 0);
    Template.fromStack(qa.stacks.data).hasResourceProperties('AWS::Cognito::UserPoolClient', {
      UserPoolId: 'eu-west-1_AbCdEf123',
    });
    assert.ok(JSON.stringify(qa.platform).includes('userpool/eu-west-1_AbCdEf123'));
  });

  it('lets the LLM function call Bedrock on the models of config/llm-models.json and nothing else', () => {
    const llm = Object.entries(prod.platform).find(([, r]) => r.Properties?.FunctionName === 'ratelimit-prod-llm');
    const props = llm?.[1].Properties as Record<string, unknown>;
    assert.equal((props.Environment as { Variables: Record<string, unknown> }).Variables.LLM_PROVIDER, 'bedrock');
    const route = routes.find((r) => r.id === 'llm');
    assert.equal(props.Timeout, route?.timeoutSeconds ?? DEFAULT_ROUTE_TIMEOUT_SECONDS);
    const statements = Object.values(prod.platform)
      .filter((r) => r.Type === 'AWS::IAM::Policy')
      .flatMap((r) =>
        statementsIn(r).map((st) => ({
          roles: JSON.stringify(r.Properties?.Roles),
          st,
        })),
      )
      .filter(({ st }) => JSON.stringify(st.Action).includes('bedrock:'));
    // the region's inference profile of each model, and each model only through one of them
    assert.equal(statements.length, 2);
    for (const { roles, st } of statements) {
      assert.match(roles, /FnllmServiceRole/);
      assert.deepEqual(st.Action, ['bedrock:InvokeModel', 'bedrock:InvokeModelWithResponseStream']);
    }
    const profiles = bedrockModelIds().map(
      (id) => `arn:aws:bedrock:eu-west-1:222222222222:inference-profile/${inferenceProfileIdOf(id, 'eu-west-1')}`,
    );
    assert.ok(profiles.every((arn) => arn.includes('inference-profile/eu.amazon.')));
    // …and, for the release that brings them, each model in the region directly: the version before, still
    // serving over the canary, calls it so
    const direct = bedrockModelIds().map((id) => `arn:aws:bedrock:eu-west-1::foundation-model/${id}`);
    assert.deepEqual(statements[0]?.st.Resource, [...profiles, ...direct]);
    assert.equal(statements[0]?.st.Condition, undefined);
    assert.deepEqual(
      statements[1]?.st.Resource,
      bedrockModelIds().map((id) => `arn:aws:bedrock:*::foundation-model/${id}`),
    );
    assert.deepEqual(statements[1]?.st.Condition, { StringEquals: { 'bedrock:InferenceProfileArn': profiles } });
  });

  it('drains the events queue into the stage bus with a pipe, publishes the bus name, and alarms on what is left', () => {
    const [queueId] = Object.entries(prod.platform).find(
      ([, r]) => r.Type === 'AWS::SQS::Queue' && r.Properties?.RedrivePolicy !== undefined,
    ) as [string, unknown];
    const [busId] = Object.entries(prod.platform).find(([, r]) => r.Type === 'AWS::Events::EventBus') as [
      string,
      unknown,
    ];
    const template = Template.fromStack(prod.stacks.platform);
    template.hasResourceProperties('AWS::Events::EventBus', { Name: 'ratelimit-prod' });
    template.hasResourceProperties('AWS::Pipes::Pipe', {
      Source: { 'Fn::GetAtt': [queueId, 'Arn'] },
      Target: { 'Fn::GetAtt': [busId, 'Arn'] },
      TargetParameters: Match.objectLike({ InputTemplate: '<$.body>' }),
    });
    template.hasResourceProperties('AWS::SSM::Parameter', {
      Name: '/ratelimit/prod/platform/event-bus-name',
      Value: { Ref: busId },
    });
    // the queue's dead letters are the pipe's: what the bus kept refusing (maxReceiveCount), alarmed on at once
    template.hasResourceProperties('AWS::SQS::Queue', { RedrivePolicy: Match.objectLike({ maxReceiveCount: 5 }) });
    for (const alarm of ['ratelimit-prod DeadLetters', 'ratelimit-prod QueueAge']) {
      template.hasResourceProperties('AWS::CloudWatch::Alarm', { AlarmName: alarm });
    }
    const slack = Object.values(prod.platform).find((r) => r.Properties?.FunctionName === 'ratelimit-prod-slack');
    assert.deepEqual(envOf(slack).EVENT_QUEUE_URL, { Ref: queueId }, 'the webhooks put on the queue the pipe drains');
  });

  it('docs/deploy.md prices what the templates deploy (alarms, WAF rules, KMS keys, endpoints)', () => {
    const all = [...Object.values(prod.data), ...Object.values(prod.platform)];
    const count = (type: string) => all.filter((r) => r.Type === type).length;
    const wafRules = all
      .filter((r) => r.Type === 'AWS::WAFv2::WebACL')
      .reduce((n, r) => n + ((r.Properties?.Rules ?? []) as unknown[]).length, 0);
    // alarms per function, per policy and for the stage: counts a new route or policy leaves true
    const alarmNames = all
      .filter((r) => r.Type === 'AWS::CloudWatch::Alarm')
      .map((r) => String(r.Properties?.AlarmName).replace(/^ratelimit-prod /, ''));
    const named = (prefix: string) => alarmNames.filter((n) => n.startsWith(prefix)).map((n) => n.slice(prefix.length));
    const functions = named('FunctionErrors-');
    assert.deepEqual(named('FunctionThrottles-'), functions, 'each function: its errors and its throttles');
    const policies = named('CheckLatencyP99-');
    const degraded = [...named('DegradedOpen-'), ...named('DegradedClosed-')];
    assert.equal(new Set(degraded).size, degraded.length, 'at most one degraded alarm a policy');
    assert.ok(degraded.every((p) => policies.includes(p)) && degraded.length < policies.length);
    const routeAlarms = named('UnhandledErrors-');
    assert.deepEqual(routeAlarms.sort(), routes.map((r) => r.id).sort(), 'each route: the 500s it answers');
    const latency = named('ApiLatencyP99-');
    assert.ok(latency.every((id) => routeAlarms.includes(id)) && latency.length < routeAlarms.length);
    const stage =
      alarmNames.length -
      2 * functions.length -
      routeAlarms.length -
      latency.length -
      policies.length -
      degraded.length;
    const docs = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8');
    for (const line of [
      `CloudWatch dashboard, ${count('AWS::CloudWatch::InsightRule')} Contributor Insights rule, alarms: 2 a function, 1–2 more a route, 1–2 a policy, ${stage} for the stage`,
      `WAF web ACL + ${wafRules} rules`,
      `${count('AWS::KMS::Key')} KMS keys`,
      `${count('AWS::SecretsManager::Secret')} Secrets Manager secret`,
      `${count('AWS::EC2::VPCEndpoint')} interface endpoints × 2 AZs`,
    ]) {
      assert.ok(docs.includes(line), `docs/deploy.md's cost table must say "${line}" (what the templates deploy)`);
    }
  });

  it('fails the synth when a deployed function would use a local stand-in (a file, the fake model)', () => {
    const careless = createPlatformApp({
      context: { dist: join(work, 'dist') },
      outdir: mkdtempSync(join(work, 'cdk-careless-')),
      stagesDir: work,
    });
    careless.platform.functions.get('login')?.addEnvironment('LOGIN_USERS_FILE', 'config/local-users.json');
    careless.platform.functions.get('llm')?.addEnvironment('LLM_PROVIDER', 'local');
    assert.throws(
      () => careless.app.synth(),
      (e: unknown) =>
        /function login: LOGIN_USERS_FILE is set: a deployed function would use a local stand-in/.test(String(e)) &&
        /function llm: LLM_PROVIDER=local: a deployed function calls bedrock/.test(String(e)),
    );
  });
});
