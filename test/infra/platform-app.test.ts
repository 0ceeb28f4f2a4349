/**
 * The CDK app, synthesized offline from the built artefacts: what the
 * templates must say for the limiter to hold (docs/design.md, "The outer line" and "The durable Redis on AWS"), for both durable
 * stores, and cdk-nag as a gate that an unacknowledged finding fails.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { Queue } from 'aws-cdk-lib/aws-sqs';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { readOuterLine } from '../../config/outer-line.ts';
import { runHarvest } from '../../functions/harvester/job.ts';
import { catchUpPublisher, LISTENER_METRICS } from '../../functions/mattermost-listener/catch-up-metrics.ts';
import { MattermostListener } from '../../functions/mattermost-listener/listener.ts';
import { routes } from '../../functions/routes.ts';
import { platform as sharedPlatform } from '../../functions/shared/platform.ts';
import { signSlackBody } from '../../functions/slack/signature.ts';
import { operated } from '../../functions/workers.ts';
import { createPlatformApp, type PlatformApp } from '../../infra/app.ts';
import { InvalidContextError } from '../../infra/context.ts';
import { API_SECURITY_POLICY, MANAGED_RULE_GROUPS } from '../../infra/public-api.ts';
import { compilePolicy } from '../../layer/src/index.ts';
import { OBSERVER_METRICS } from '../../layer/src/middleware/index.ts';
import { buildAll } from '../../scripts/build.ts';
import { startHarvestSource } from '../../scripts/harvest-source.ts';
import { startMattermostServer } from '../../scripts/mattermost-server.ts';
import { startRedis } from '../../scripts/redis-process.ts';
import { consumers } from '../support/consumers.ts';
import { call, loopbackAddress } from '../support/http.ts';

type Resources = Record<string, { Type: string; Properties?: Record<string, unknown>; DeletionPolicy?: string }>;

let work: string;
before(async () => {
  work = mkdtempSync(join(tmpdir(), 'rl-infra-'));
  await buildAll(join(work, 'dist'));
});
after(() => rmSync(work, { recursive: true, force: true }));

function synth(redis: 'elasticache' | 'memorydb'): { stacks: PlatformApp; data: Template; platform: Template } {
  const stacks = createPlatformApp({
    context: { redis, dist: join(work, 'dist') },
    outdir: mkdtempSync(join(work, `cdk-${redis}-`)),
    stagesDir: work, // no stage file: each store on the same stage name
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
      AuthToken: Match.anyValue(),
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
        ServiceName: Match.objectLike({ 'Fn::Join': Match.arrayWith([Match.arrayWith([`.${service}`])]) }),
        VpcEndpointType: 'Interface',
        PrivateDnsEnabled: true,
      });
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
            JSON.stringify(m.Properties?.Integration).includes(fnId),
        );
        assert.ok(served, `${method} ${route.path} integrates ${route.id}`);
        assert.equal((props(served).Integration as { Type: string }).Type, 'AWS_PROXY');
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
    app.platform.resourceCountIs('AWS::SSM::Parameter', names.length);
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
      const throttle = line.routeThrottles?.[route.id];
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

  it('gives the operator an admin function reachable through IAM only, writing overrides and nothing else', () => {
    const resources = app.platform.toJSON().Resources as Resources;
    const [adminId] =
      Object.entries(resources).find(
        ([, r]) => r.Type === 'AWS::Lambda::Function' && props(r).FunctionName === 'ratelimit-prod-admin',
      ) ?? assert.fail('no admin function');
    const invokable = Object.values(resources).filter(
      (r) =>
        (r.Type === 'AWS::Lambda::Permission' || r.Type === 'AWS::Lambda::Url') && JSON.stringify(r).includes(adminId),
    );
    assert.deepEqual(
      invokable,
      [],
      'no resource policy: only IAM principals allowed lambda:InvokeFunction may call it',
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
    app.data.hasResourceProperties('AWS::MemoryDB::User', { UserName: 'ratelimit' });
    // deleting the stack deletes the cluster after its final snapshot (a retained one would block the VPC's delete)
    app.data.hasResource('AWS::MemoryDB::Cluster', {
      DeletionPolicy: 'Delete',
      Properties: Match.objectLike({ FinalSnapshotName: 'ratelimit-prod-final' }),
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
async function limiterMetricsEmittedByEveryConsumer(): Promise<Map<string, Set<string>>> {
  const lines: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    const text = String(chunk);
    if (text.includes('"_aws"')) {
      lines.push(...text.split('\n').filter((l) => l.includes('"_aws"')));
      return true;
    }
    return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stdout.write;
  const redis = await startRedis();
  // the IP windows fail open here, so that with Redis stopped each request reaches the checks its
  // handler makes itself (as when only their shard cannot answer)
  const openAtTheDoor = Object.fromEntries(
    ['login-ip', 'slack-ip', 'telegram-ip'].map((policy) => [
      `/ratelimit/local/overrides/${policy}`,
      { failureMode: 'open' },
    ]),
  );
  // the partner's monthly quota nearly spent, so it is the binding limit of a partner's check (and reports)
  const monthlyCap = { '/ratelimit/local/overrides/api-partner-month': { limit: 3 } };
  const platform = await consumers({
    metrics: true,
    redisUrl: redis.url,
    parameters: { ...openAtTheDoor, ...monthlyCap },
  });
  const [mattermost, source] = await Promise.all([startMattermostServer(), startHarvestSource()]);
  const everyConsumer = async (round: number) => {
    const from = loopbackAddress();
    const send = (path: string, init: { method?: string; body?: string; headers?: Record<string, string> } = {}) =>
      call(platform.base, { path, from, ...init });
    await send('/auth/login', {
      method: 'POST',
      body: JSON.stringify({ email: 'metrics@example.com', password: 'no' }),
    });
    for (const key of ['demo-standard-key', 'demo-partner-key', 'not-a-key']) {
      await send('/v1/whoami', { headers: { 'x-api-key': key } });
    }
    await send('/v1/llm/complete', {
      method: 'POST',
      headers: { 'x-api-key': 'demo-partner-key' },
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
  return emitted;
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
  before(async () => {
    emitted = await limiterMetricsEmittedByEveryConsumer();
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
          case 'AWS/ApiGateway':
            if (d.ApiName !== restApiName || d.Stage !== 'prod') unwatchable.push(name);
            break;
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
    assert.deepEqual(unwatchable, [], 'alarms on a metric nobody emits');
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
      [/FnapiServiceRole/, []],
      [/FnllmServiceRole/, []],
      [/FnadminServiceRole/, ['parameter/ratelimit/prod/secrets/login']],
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
    // and each is told what to read, which the layer's store fetches (RATE_LIMIT_READ_PATHS)
    template.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'ratelimit-prod-login',
      Environment: { Variables: Match.objectLike({ RATE_LIMIT_READ_PATHS: 'defaults,overrides,secrets/login' }) },
    });
  });

  it('gives each function the reserved concurrency of its route (its share, and its Redis connection ceiling)', () => {
    for (const route of routes) {
      template.hasResourceProperties('AWS::Lambda::Function', {
        FunctionName: `ratelimit-prod-${route.id}`,
        ReservedConcurrentExecutions: route.reservedConcurrency,
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

  it('pages on a degraded limiter in 3 of 5 minutes, not on one blip; fail-open policies too', () => {
    const byName = new Map(alarms.map((a) => [a.Properties.AlarmName, a.Properties]));
    const closed = byName.get('ratelimit-prod DegradedClosed-login-ip');
    assert.equal(closed?.EvaluationPeriods, 5);
    assert.equal(closed?.DatapointsToAlarm, 3);
    assert.ok(byName.has('ratelimit-prod DegradedOpen-api-key'), 'the API key limits failing open are watched');
    for (const name of [
      'FunctionErrors-login',
      'FunctionThrottles-slack',
      'FunctionErrors-harvester',
      'Api5xx',
      'ApiLatencyP99',
      'WafBlocked',
      'DeadLetters',
      'QueueAge',
      'RedisEngineCpu',
      'RedisConnections',
      'RedisTrafficManagement',
    ]) {
      assert.ok(byName.has(`ratelimit-prod ${name}`), name);
    }
  });
});
