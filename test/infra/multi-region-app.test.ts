/**
 * The two-region stage (issue 32; infra/stages/global.json, docs/deploy.md
 * "Two regions"), synthesized offline from the built artefacts: each
 * region's stacks, the stores of the three modes and their links across the
 * regions, what the functions are told, the rebalancer's schedule, the
 * stage's hygiene, and the refusals of a stage file it cannot deploy.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Template } from 'aws-cdk-lib/assertions';
import { createPlatformApp, type PlatformApp, readStageFile, STAGES_DIR } from '../../infra/app.ts';
import { InvalidContextError } from '../../infra/context.ts';
import { MEMORYDB_MULTI_REGION_ENGINE_VERSION } from '../../infra/global-stores.ts';
import { PLACEHOLDER_METADATA } from '../../infra/rebalancer.ts';
import { buildAll } from '../../scripts/build.ts';
import { DeployRefusedError, executionLogsWithoutRole, preflight, refusePlaceholders } from '../../scripts/deploy.ts';
import { FIXED_NAME_PROPERTIES, tagPropertyOf } from '../support/cfn-schemas.ts';
import { scheduledRunRetries } from '../support/scheduled-runs.ts';

type Resource = {
  Type: string;
  Properties?: Record<string, unknown>;
  DeletionPolicy?: string;
  UpdateReplacePolicy?: string;
};
type Resources = Record<string, Resource>;
type TemplateJson = { Resources: Resources; Metadata?: Record<string, unknown> };

const ANCHOR = 'eu-west-1';
const OTHER = 'us-east-1';
const STAGE = readStageFile(STAGES_DIR, 'global');

let work: string;
before(async () => {
  work = mkdtempSync(join(tmpdir(), 'rl-regions-'));
  await buildAll(join(work, 'dist'));
});
after(() => rmSync(work, { recursive: true, force: true }));

/** The stage `global` as checked in, or changed by `change`, synthesized (cdk-nag runs: a finding throws). */
function synth(change: Record<string, unknown> = {}, context: Record<string, unknown> = {}, dist = join(work, 'dist')) {
  const stagesDir = mkdtempSync(join(work, 'stages-'));
  writeFileSync(join(stagesDir, 'global.json'), JSON.stringify({ ...STAGE, ...change }));
  const stacks = createPlatformApp({
    context: { stage: 'global', dist, ...context },
    outdir: mkdtempSync(join(work, 'cdk-')),
    stagesDir,
  });
  stacks.app.synth();
  return stacks;
}

const templateOf = (
  stack: PlatformApp['data'] | PlatformApp['platform'] | NonNullable<PlatformApp['regions'][0]['link']>,
) => Template.fromStack(stack).toJSON() as TemplateJson;
const ofType = (template: TemplateJson, type: string) =>
  Object.entries(template.Resources).filter(([, r]) => r.Type === type);
const one = (template: TemplateJson, type: string): [string, Resource] => {
  const found = ofType(template, type);
  assert.equal(found.length, 1, `one ${type}`);
  return found[0] as [string, Resource];
};
/** The name of the cross-region export a value reads (CDK's reader: `Fn::GetAtt [ExportsReader…, /cdk/exports/…]`). */
const crossRegionExport = (value: unknown): string => {
  const match = /"Fn::GetAtt":\["ExportsReader[0-9A-F]*","(\/cdk\/exports\/[^"]+)"\]/.exec(JSON.stringify(value));
  assert.ok(match, `a cross-region reference: ${JSON.stringify(value)}`);
  return match[1] as string;
};
const envOf = (fn: Resource) =>
  (fn.Properties?.Environment as { Variables: Record<string, unknown> } | undefined)?.Variables ?? {};
const platformFunctions = (template: TemplateJson) =>
  ofType(template, 'AWS::Lambda::Function').filter(([, r]) =>
    String(r.Properties?.FunctionName).startsWith('ratelimit-global-'),
  );

describe('The two-region stage (infra/stages/global.json)', () => {
  let stage: PlatformApp;
  let anchor: { data: TemplateJson; platform: TemplateJson; link: TemplateJson };
  let other: { data: TemplateJson; platform: TemplateJson };
  before(() => {
    stage = synth();
    const [a, o] = stage.regions;
    assert.ok(a?.link && o);
    anchor = { data: templateOf(a.data), platform: templateOf(a.platform), link: templateOf(a.link) };
    other = { data: templateOf(o.data), platform: templateOf(o.platform) };
  });

  it('deploys a data and a platform stack in each region, and the anchor’s link stack, bound to the stage file’s places', () => {
    const placed = stage.app.node.children
      .filter((c): c is PlatformApp['data'] => 'stackName' in c)
      .map((s) => [s.stackName, s.account, s.region]);
    assert.deepEqual(placed.sort(), [
      ['RateLimitData-global-eu-west-1', '333333333333', ANCHOR],
      ['RateLimitData-global-us-east-1', '333333333333', OTHER],
      ['RateLimitLink-global-eu-west-1', '333333333333', ANCHOR],
      ['RateLimitPlatform-global-eu-west-1', '333333333333', ANCHOR],
      ['RateLimitPlatform-global-us-east-1', '333333333333', OTHER],
    ]);
    for (const region of stage.regions) {
      assert.equal(region.data.terminationProtection, true, region.data.stackName);
      assert.deepEqual(region.data.availabilityZones, [`${region.region}a`, `${region.region}b`]);
    }
    // the order the deploy follows: anchor data → other data → anchor link → the platforms
    const [a, o] = stage.regions as [PlatformApp['regions'][0], PlatformApp['regions'][0]];
    const dependsOn = (stack: { dependencies: { stackName: string }[] }) => stack.dependencies.map((d) => d.stackName);
    assert.ok(dependsOn(o.data).includes(a.data.stackName));
    assert.ok(a.link && dependsOn(a.link).includes(o.data.stackName));
    for (const r of [a, o]) assert.ok(dependsOn(r.platform).includes(a.link?.stackName as string));
    // each VPC in its own address space (peered)
    assert.equal(one(anchor.data, 'AWS::EC2::VPC')[1].Properties?.CidrBlock, '10.10.0.0/16');
    assert.equal(one(other.data, 'AWS::EC2::VPC')[1].Properties?.CidrBlock, '10.20.0.0/16');
  });

  it('keeps the home mode in a Global Datastore: the anchor’s durable group its primary, a secondary in the other region', () => {
    const [primaryId, primary] = one(anchor.data, 'AWS::ElastiCache::ReplicationGroup');
    assert.equal(primary.Properties?.Engine, 'valkey');
    assert.equal(primary.Properties?.Durability, 'sync');
    assert.equal(primary.Properties?.ClusterMode, 'enabled');
    assert.equal(primary.Properties?.MultiAZEnabled, true);
    const [globalId, global] = one(anchor.data, 'AWS::ElastiCache::GlobalReplicationGroup');
    assert.equal(global.Properties?.GlobalReplicationGroupIdSuffix, 'ratelimit-global');
    assert.deepEqual(global.Properties?.Members, [
      { ReplicationGroupId: { Ref: primaryId }, ReplicationGroupRegion: ANCHOR, Role: 'PRIMARY' },
    ]);
    const [, secondary] = one(other.data, 'AWS::ElastiCache::ReplicationGroup');
    assert.equal(secondary.Properties?.ReplicationGroupId, 'ratelimit-global');
    assert.match(
      crossRegionExport(secondary.Properties?.GlobalReplicationGroupId),
      new RegExp(`${globalId}GlobalReplicationGroupId`),
    );
    // engine, node type, shards and parameters are the primary's: a secondary may not name them
    for (const inherited of [
      'Engine',
      'EngineVersion',
      'CacheNodeType',
      'NumNodeGroups',
      'CacheParameterGroupName',
      'Durability',
    ]) {
      assert.equal(secondary.Properties?.[inherited], undefined, inherited);
    }
    for (const group of [primary, secondary]) {
      assert.equal(group.Properties?.TransitEncryptionEnabled, true);
      assert.equal(group.Properties?.TransitEncryptionMode, 'required');
      assert.equal(group.Properties?.AtRestEncryptionEnabled, true);
      assert.equal(group.Properties?.AuthToken, undefined);
      assert.equal((group.Properties?.UserGroupIds as unknown[] | undefined)?.length, 1);
    }
  });

  it('keeps shares and approximate counts in MemoryDB Multi-Region: one member cluster per region', () => {
    const [multiId, multi] = one(anchor.data, 'AWS::MemoryDB::MultiRegionCluster');
    assert.deepEqual(
      {
        engine: multi.Properties?.Engine,
        version: multi.Properties?.EngineVersion,
        tls: multi.Properties?.TLSEnabled,
        node: multi.Properties?.NodeType,
        suffix: multi.Properties?.MultiRegionClusterNameSuffix,
      },
      {
        engine: 'valkey',
        version: MEMORYDB_MULTI_REGION_ENGINE_VERSION,
        tls: true,
        node: 'db.r7g.xlarge',
        suffix: 'ratelimit-global',
      },
    );
    const [, anchorMember] = one(anchor.data, 'AWS::MemoryDB::Cluster');
    assert.deepEqual(anchorMember.Properties?.MultiRegionClusterName, {
      'Fn::GetAtt': [multiId, 'MultiRegionClusterName'],
    });
    const [, otherMember] = one(other.data, 'AWS::MemoryDB::Cluster');
    assert.match(
      crossRegionExport(otherMember.Properties?.MultiRegionClusterName),
      new RegExp(`${multiId}MultiRegionClusterName`),
    );
    for (const member of [anchorMember, otherMember]) {
      assert.equal(member.Properties?.ClusterName, 'ratelimit-global');
      assert.equal(member.Properties?.NodeType, 'db.r7g.xlarge');
      // the multi-region cluster's: TLS on, its parameter group (a member may not name its own)
      assert.equal(member.Properties?.ParameterGroupName, undefined);
      assert.equal(member.Properties?.TLSEnabled, undefined);
      assert.equal(member.Properties?.ACLName, 'ratelimit-global');
    }
  });

  it('reaches every store as one ACL user with one password: the anchor’s secret, replicated to the other region', () => {
    const [secretId, secret] = one(anchor.data, 'AWS::SecretsManager::Secret');
    assert.deepEqual(secret.Properties?.ReplicaRegions, [{ Region: OTHER }]);
    assert.equal(
      JSON.parse(
        String(
          (secret.Properties?.GenerateSecretString as { SecretStringTemplate?: string } | undefined)
            ?.SecretStringTemplate,
        ),
      ).username,
      'ratelimit-global',
    );
    assert.equal(ofType(other.data, 'AWS::SecretsManager::Secret').length, 0, 'the replica, not a second secret');
    for (const [template, region] of [
      [anchor.data, ANCHOR],
      [other.data, OTHER],
    ] as const) {
      const elasticacheUsers = ofType(template, 'AWS::ElastiCache::User').map(([, u]) => u.Properties ?? {});
      assert.deepEqual(
        elasticacheUsers.map((u) => [u.UserName, u.AccessString === 'off -@all']),
        [
          ['default', true],
          ['ratelimit-global', false],
        ],
      );
      const [, memoryDbUser] = one(template, 'AWS::MemoryDB::User');
      assert.equal(memoryDbUser.Properties?.UserName, 'ratelimit-global');
      const elasticacheUser = elasticacheUsers[1] as Record<string, unknown>;
      assert.equal(
        elasticacheUser.AccessString,
        memoryDbUser.Properties?.AccessString,
        'the same rules on both stores',
      );
      for (const user of [elasticacheUser, memoryDbUser.Properties ?? {}]) {
        const password = JSON.stringify((user.AuthenticationMode as { Passwords: unknown[] }).Passwords);
        assert.match(password, /resolve:secretsmanager:/);
        if (region === ANCHOR) assert.match(password, new RegExp(`"Ref":"${secretId}"`));
        else {
          assert.match(password, new RegExp(`arn:aws:secretsmanager:${OTHER}:333333333333:secret:`));
          assert.match(crossRegionExport(JSON.parse(password)), new RegExp(`Ref${secretId}`));
        }
      }
    }
  });

  it('peers the two VPCs, routes each to the other’s CIDR, and opens the home stores (not the regional ones) to it on 6379', () => {
    const [peeringId, peering] = one(other.data, 'AWS::EC2::VPCPeeringConnection');
    const [anchorVpcId] = one(anchor.data, 'AWS::EC2::VPC');
    assert.equal(peering.Properties?.PeerRegion, ANCHOR);
    assert.equal(peering.Properties?.PeerOwnerId, '333333333333');
    assert.match(crossRegionExport(peering.Properties?.PeerVpcId), new RegExp(`Ref${anchorVpcId}`));
    const routes = (template: TemplateJson) => ofType(template, 'AWS::EC2::Route').map(([, r]) => r.Properties ?? {});
    const otherRoutes = routes(other.data).filter((r) => r.VpcPeeringConnectionId);
    assert.equal(otherRoutes.length, 2, 'one per isolated subnet');
    for (const r of otherRoutes) {
      assert.equal(r.DestinationCidrBlock, '10.10.0.0/16');
      assert.deepEqual(r.VpcPeeringConnectionId, { Ref: peeringId });
    }
    const back = routes(anchor.link);
    assert.equal(back.length, 2);
    for (const r of back) {
      assert.equal(r.DestinationCidrBlock, '10.20.0.0/16');
      assert.match(crossRegionExport(r.VpcPeeringConnectionId), new RegExp(`Ref${peeringId}`));
    }
    for (const [template, peerCidr] of [
      [anchor.data, '10.20.0.0/16'],
      [other.data, '10.10.0.0/16'],
    ] as const) {
      const groups = Object.fromEntries(ofType(template, 'AWS::EC2::SecurityGroup'));
      const [, replicationGroup] = one(template, 'AWS::ElastiCache::ReplicationGroup');
      const [, memoryDb] = one(template, 'AWS::MemoryDB::Cluster');
      const groupOf = (store: Resource) =>
        (store.Properties?.SecurityGroupIds as { 'Fn::GetAtt': string[] }[] | undefined)?.[0]?.[
          'Fn::GetAtt'
        ][0] as string;
      const home = groups[groupOf(replicationGroup)];
      const regional = groups[groupOf(memoryDb)];
      assert.ok(home && regional && home !== regional, 'the home and the regional store behind groups of their own');
      const cidrIngress = (group: Resource) =>
        ((group.Properties?.SecurityGroupIngress ?? []) as Record<string, unknown>[]).filter((r) => r.CidrIp);
      assert.deepEqual(
        cidrIngress(home).map((r) => [r.CidrIp, r.FromPort, r.ToPort]),
        [[peerCidr, 6379, 6379]],
      );
      assert.deepEqual(cidrIngress(regional), [], 'the regional store takes nothing from the peer region');
      const functions = Object.entries(groups).find(([id]) => id.startsWith('Functions'))?.[1] as Resource;
      const egress = (functions.Properties?.SecurityGroupEgress ?? []) as Record<string, unknown>[];
      assert.deepEqual(
        egress.filter((r) => r.CidrIp).map((r) => [r.CidrIp, r.FromPort]),
        [[peerCidr, 6379]],
      );
    }
  });

  it('tells every function its region, the home region, all regions, its regional store and the home store', () => {
    const [anchorGroupId] = one(anchor.data, 'AWS::ElastiCache::ReplicationGroup');
    for (const [template, region] of [
      [anchor.platform, ANCHOR],
      [other.platform, OTHER],
    ] as const) {
      const functions = platformFunctions(template);
      assert.ok(functions.length >= 7, `${functions.length} functions in ${region}`);
      for (const [id, fn] of functions) {
        const env = envOf(fn);
        assert.equal(env.RATE_LIMIT_REGION, region, id);
        assert.equal(env.RATE_LIMIT_HOME_REGION, ANCHOR, id);
        assert.equal(env.RATE_LIMIT_REGIONS, `${ANCHOR},${OTHER}`, id);
        assert.equal(env.REDIS_TLS, 'true');
        // the regional store: this region's MemoryDB member (same region: an import)
        assert.match(JSON.stringify(env.REDIS_CLUSTER_NODES), /MemoryDbCluster[0-9A-F]+ClusterEndpointAddress/);
        // the home store: the anchor's primary (its own group there; a cross-region reference elsewhere)
        const home = JSON.stringify(env.REDIS_HOME_CLUSTER_NODES);
        if (region === ANCHOR) assert.match(home, new RegExp(`${anchorGroupId}ConfigurationEndPointAddress`));
        else
          assert.match(
            crossRegionExport(env.REDIS_HOME_CLUSTER_NODES),
            new RegExp(`${anchorGroupId}ConfigurationEndPointAddress`),
          );
        assert.equal(env.REDIS_URL ?? '', '', 'never a local store');
      }
    }
  });

  it('runs the rebalancer in each region on REBALANCE_PERIOD_SECONDS (60 s by default), through its live alias', () => {
    for (const template of [anchor.platform, other.platform]) {
      const [fnId, fn] =
        platformFunctions(template).find(([, r]) => r.Properties?.FunctionName === 'ratelimit-global-rebalancer') ?? [];
      assert.ok(fnId && fn, 'the rebalancer function');
      assert.equal(envOf(fn).REBALANCE_PERIOD_SECONDS, '60');
      assert.ok((fn.Properties?.Timeout as number) < 60, 'a run ends before the next starts');
      const rules = ofType(template, 'AWS::Events::Rule').filter(([, r]) => JSON.stringify(r).includes('rebalancer'));
      assert.equal(rules.length, 1);
      const rule = rules[0]?.[1] as Resource;
      assert.equal(rule.Properties?.ScheduleExpression, 'rate(1 minute)');
      const target = (rule.Properties?.Targets as { Arn: unknown }[] | undefined)?.[0];
      const [aliasId, alias] = ofType(template, 'AWS::Lambda::Alias').find(([id]) => id.startsWith('Rebalancer')) ?? [];
      assert.equal(alias?.Properties?.Name, 'live');
      assert.deepEqual(target?.Arn, { Ref: aliasId });
      // a failed run is not run again by EventBridge nor by Lambda: a retry would overlap the next run
      assert.deepEqual(scheduledRunRetries(template), [
        { function: fnId, alias: 'live', delivery: 0, invocation: 0, maxEventAgeSeconds: 60 },
      ]);
    }
    const slower = synth({ rebalancePeriodSeconds: 180 });
    const rule = ofType(templateOf(slower.regions[1]?.platform as PlatformApp['platform']), 'AWS::Events::Rule').find(
      ([, r]) => JSON.stringify(r).includes('rebalancer'),
    );
    assert.equal(rule?.[1].Properties?.ScheduleExpression, 'rate(3 minutes)');
  });

  it('marks a template built with a placeholder rebalancer, which the deploy refuses; the real handler is not marked', () => {
    const marked = [anchor.platform, other.platform].map((t) => t.Metadata?.[PLACEHOLDER_METADATA]);
    const built = readFileSync(join(work, 'dist', 'functions', 'rebalancer', 'handler.mjs'), 'utf8');
    assert.ok(!built.includes('REBALANCER_PLACEHOLDER'), 'the bundled rebalancer is the real one');
    assert.deepEqual(marked, [undefined, undefined]);
    refusePlaceholders('global', [anchor.platform, other.platform]);
    // a placeholder in the bundle marks the templates, and the deploy refuses them
    const dist = mkdtempSync(join(work, 'placeholder-'));
    cpSync(join(work, 'dist'), dist, { recursive: true, verbatimSymlinks: true });
    writeFileSync(
      join(dist, 'functions', 'rebalancer', 'handler.mjs'),
      "export const handler = async () => { throw new Error('REBALANCER_PLACEHOLDER'); };\n",
    );
    const stand = synth({}, {}, dist);
    const templates = stand.regions.map((r) => templateOf(r.platform));
    assert.deepEqual(
      templates.map((t) => t.Metadata?.[PLACEHOLDER_METADATA]),
      [['rebalancer'], ['rebalancer']],
    );
    assert.throws(() => refusePlaceholders('global', templates), DeployRefusedError);
  });

  it('tags every taggable resource of the five templates with the stage’s tags, and budgets once', () => {
    const templates = [anchor.data, anchor.platform, anchor.link, other.data, other.platform];
    const types = [...new Set(templates.flatMap((t) => Object.values(t.Resources).map((r) => r.Type)))];
    const tagProperty = tagPropertyOf(types);
    assert.deepEqual(
      Object.entries(tagProperty).filter(([, p]) => p === 'UNKNOWN'),
      [],
      'every type is in the schema',
    );
    const expected = { stage: 'global', service: 'ratelimit', owner: 'platform-team', 'cost-centre': 'platform' };
    const untagged: string[] = [];
    for (const template of templates) {
      for (const [id, r] of Object.entries(template.Resources)) {
        const property = tagProperty[r.Type];
        if (!property) continue;
        const value = r.Properties?.[property];
        const carried = Array.isArray(value)
          ? Object.fromEntries(value.map((t: { Key: string; Value: unknown }) => [t.Key, t.Value]))
          : ((value ?? {}) as Record<string, unknown>);
        for (const [key, v] of Object.entries(expected))
          if (carried[key] !== v) untagged.push(`${id} (${r.Type}) ${key}`);
      }
    }
    assert.deepEqual(untagged, []);
    for (const region of stage.regions) {
      for (const stack of [region.data, region.platform, ...(region.link ? [region.link] : [])]) {
        assert.deepEqual(stack.tags.tagValues(), expected, stack.stackName);
      }
    }
    assert.equal(ofType(anchor.platform, 'AWS::Budgets::Budget').length, 1);
    assert.equal(
      ofType(other.platform, 'AWS::Budgets::Budget').length,
      0,
      'Budgets are account-wide: one for the stage',
    );
  });

  it('keeps no resource with a fixed name past a failed create or a destroy', () => {
    const named = [...FIXED_NAME_PROPERTIES];
    for (const template of [anchor.data, anchor.platform, anchor.link, other.data, other.platform]) {
      for (const [id, r] of Object.entries(template.Resources)) {
        const kept = [r.DeletionPolicy, r.UpdateReplacePolicy].some(
          (p) => p === 'Retain' || p === 'RetainExceptOnCreate',
        );
        if (!kept) continue;
        for (const property of named) {
          const value = r.Properties?.[property];
          if (value === undefined) continue;
          assert.ok(
            JSON.stringify(value).includes('"Ref":"AWS::StackId"'),
            `${id} (${r.Type}) kept with the fixed ${property}`,
          );
        }
      }
    }
    // the global stores are deleted with their stack (members first), never kept under their names
    for (const type of ['AWS::ElastiCache::GlobalReplicationGroup', 'AWS::MemoryDB::MultiRegionCluster']) {
      assert.equal(one(anchor.data, type)[1].DeletionPolicy, 'Delete', type);
    }
  });

  it('names what is named once per account (IAM, dashboards) apart in each region: one account holds both', () => {
    // the name properties of the types whose names are account-wide, not regional
    const accountWide: Record<string, (p: Record<string, unknown>) => unknown> = {
      'AWS::IAM::Role': (p) => p.RoleName,
      'AWS::IAM::ManagedPolicy': (p) => p.ManagedPolicyName,
      'AWS::IAM::User': (p) => p.UserName,
      'AWS::IAM::InstanceProfile': (p) => p.InstanceProfileName,
      'AWS::CloudWatch::Dashboard': (p) => p.DashboardName,
      'AWS::Budgets::Budget': (p) => (p.Budget as { BudgetName?: unknown } | undefined)?.BudgetName,
      'AWS::S3::Bucket': (p) => p.BucketName,
    };
    const seen = new Map<string, string>();
    for (const [where, template] of Object.entries({
      'anchor data': anchor.data,
      'anchor platform': anchor.platform,
      'anchor link': anchor.link,
      'other data': other.data,
      'other platform': other.platform,
    })) {
      for (const [id, r] of Object.entries(template.Resources)) {
        const named = accountWide[r.Type]?.(r.Properties ?? {});
        if (named === undefined) continue;
        const key = `${r.Type} ${JSON.stringify(named)}`;
        assert.ok(!seen.has(key), `${key}: in the ${seen.get(key)} and the ${where} (${id})`);
        seen.set(key, where);
      }
    }
    for (const region of [ANCHOR, OTHER]) {
      assert.ok(seen.has(`AWS::CloudWatch::Dashboard "ratelimit-global-${region}"`), `${region}'s dashboard`);
      assert.ok(seen.has(`AWS::IAM::ManagedPolicy "ratelimit-global-${region}-admin-operator"`), region);
    }
  });

  it('after a promotion (homeRegion: the other region) tells every function the new home and lists it primary', () => {
    const promoted = synth({ homeRegion: OTHER });
    const [a, o] = promoted.regions as [PlatformApp['regions'][0], PlatformApp['regions'][0]];
    const [anchorGroupId] = one(templateOf(a.data), 'AWS::ElastiCache::ReplicationGroup');
    const [otherGroupId] = one(templateOf(o.data), 'AWS::ElastiCache::ReplicationGroup');
    assert.deepEqual(one(templateOf(a.data), 'AWS::ElastiCache::GlobalReplicationGroup')[1].Properties?.Members, [
      { ReplicationGroupId: 'ratelimit-global', ReplicationGroupRegion: OTHER, Role: 'PRIMARY' },
      { ReplicationGroupId: { Ref: anchorGroupId }, ReplicationGroupRegion: ANCHOR, Role: 'SECONDARY' },
    ]);
    // the groups themselves keep the shape they were created with (a changed one would be replaced)
    assert.deepEqual(
      one(templateOf(a.data), 'AWS::ElastiCache::ReplicationGroup')[1],
      one(anchor.data, 'AWS::ElastiCache::ReplicationGroup')[1],
    );
    for (const [region, platform] of [
      [ANCHOR, a.platform],
      [OTHER, o.platform],
    ] as const) {
      for (const [, fn] of platformFunctions(templateOf(platform))) {
        assert.equal(envOf(fn).RATE_LIMIT_HOME_REGION, OTHER);
        const home = envOf(fn).REDIS_HOME_CLUSTER_NODES;
        if (region === OTHER)
          assert.match(JSON.stringify(home), new RegExp(`${otherGroupId}ConfigurationEndPointAddress`));
        else assert.match(crossRegionExport(home), new RegExp(`${otherGroupId}ConfigurationEndPointAddress`));
      }
    }
  });

  it("has the pre-flight check each region's API Gateway logging role (global.json sets none)", () => {
    const placed = [
      ...Object.values(anchor).map((template) => ({ region: ANCHOR, template })),
      ...Object.values(other).map((template) => ({ region: OTHER, template })),
    ];
    assert.deepEqual(executionLogsWithoutRole(placed), [ANCHOR, OTHER]);
  });

  it('pre-flights the credentials in either region and reserved concurrency per region', async () => {
    const target = { stage: 'global', account: '333333333333', region: ANCHOR, regions: [ANCHOR, OTHER] };
    const asked: (string | undefined)[] = [];
    const probe = (region: string) => ({
      callerIdentity: async () => ({ account: '333333333333', arn: 'arn:aws:iam::333333333333:role/deployer' }),
      region: async () => region,
      concurrency: async (where?: string) => {
        asked.push(where);
        return where === OTHER ? { quota: 150, unreserved: 150 } : { quota: 1000, unreserved: 1000 };
      },
      // the anchor's account has the API Gateway logging role, the other region not yet
      apiGatewayLoggingRole: async (where?: string) =>
        where === ANCHOR ? 'arn:aws:iam::333333333333:role/logs' : undefined,
    });
    await preflight(target, { reserved: { [ANCHOR]: 300, [OTHER]: 50 } }, probe(OTHER));
    assert.deepEqual(asked, [ANCHOR, OTHER]);
    await assert.rejects(
      preflight(target, { reserved: { [ANCHOR]: 300, [OTHER]: 51 } }, probe(ANCHOR)),
      /reserves 51 concurrent executions in us-east-1, but .* can reserve 50 in us-east-1/,
    );
    await assert.rejects(
      preflight(target, { reserved: { [ANCHOR]: 0, [OTHER]: 0 } }, probe('eu-central-1')),
      /deploys to region eu-west-1 and us-east-1/,
    );
    // each region's own role: the one without refuses, by name, whichever region the credentials are in
    const logs = { reserved: { [ANCHOR]: 0, [OTHER]: 0 }, executionLogsWithoutRole: [ANCHOR, OTHER] };
    await assert.rejects(
      preflight(target, logs, probe(ANCHOR)),
      /API writes execution logs in us-east-1, but account 333333333333 has no API Gateway CloudWatch Logs role there/,
    );
    await preflight(target, { ...logs, executionLogsWithoutRole: [ANCHOR] }, probe(OTHER));
  });
});

describe('The single-region stages beside it', () => {
  it('keep their two stacks, their one store and an environment without regions (prod.json, dev.json unchanged)', () => {
    for (const stage of ['prod', 'dev']) {
      const stacks = createPlatformApp({
        context: { stage, dist: join(work, 'dist') },
        outdir: mkdtempSync(join(work, `cdk-${stage}-`)),
      });
      stacks.app.synth();
      assert.equal(stacks.multiRegion, undefined);
      assert.deepEqual(
        stacks.regions.map((r) => [r.data.stackName, r.platform.stackName, r.link]),
        [[`RateLimitData-${stage}`, `RateLimitPlatform-${stage}`, undefined]],
      );
      const data = templateOf(stacks.data);
      const platform = templateOf(stacks.platform);
      for (const type of [
        'AWS::ElastiCache::GlobalReplicationGroup',
        'AWS::MemoryDB::MultiRegionCluster',
        'AWS::EC2::VPCPeeringConnection',
      ]) {
        assert.equal(ofType(data, type).length, 0, type);
      }
      assert.equal(one(data, 'AWS::EC2::VPC')[1].Properties?.CidrBlock, '10.0.0.0/16', "CDK's default, as before");
      // the account-wide names keep the stage's name (a rename would replace them; permission sets name the policy)
      assert.equal(one(platform, 'AWS::CloudWatch::Dashboard')[1].Properties?.DashboardName, `ratelimit-${stage}`);
      assert.equal(
        one(platform, 'AWS::IAM::ManagedPolicy')[1].Properties?.ManagedPolicyName,
        `ratelimit-${stage}-admin-operator`,
      );
      const functions = ofType(platform, 'AWS::Lambda::Function').filter(([, r]) =>
        String(r.Properties?.FunctionName).startsWith(`ratelimit-${stage}-`),
      );
      assert.ok(functions.length >= 6, `${functions.length} functions`);
      for (const [id, fn] of functions) {
        for (const name of [
          'RATE_LIMIT_REGION',
          'RATE_LIMIT_HOME_REGION',
          'RATE_LIMIT_REGIONS',
          'REDIS_HOME_CLUSTER_NODES',
        ]) {
          assert.equal(envOf(fn)[name], undefined, `${id} ${name}`);
        }
        assert.notEqual(fn.Properties?.FunctionName, `ratelimit-${stage}-rebalancer`, 'no rebalancer in one region');
      }
    }
  });
});

describe('A two-region stage file the app cannot deploy', () => {
  const refused = (change: Record<string, unknown>, message: RegExp, context: Record<string, unknown> = {}) =>
    assert.throws(
      () => synth(change, context),
      (e: unknown) => e instanceof InvalidContextError && message.test((e as Error).message),
      JSON.stringify(change),
    );
  const [anchorPlace, otherPlace] = STAGE.regions as Record<string, unknown>[];

  it('refuses each with the field and the reason', () => {
    refused({ regions: [anchorPlace] }, /regions: two regions/);
    refused({ regions: [anchorPlace, { ...otherPlace, cidr: anchorPlace?.cidr }] }, /must not overlap/);
    refused({ regions: [anchorPlace, { ...otherPlace, cidr: '10.20.0.0/24' }] }, /regions\.1\.cidr: a private \/16/);
    refused({ regions: [anchorPlace, { ...otherPlace, account: '444444444444' }] }, /both regions in one account/);
    refused(
      { regions: [anchorPlace, { ...otherPlace, region: ANCHOR, availabilityZones: ['eu-west-1a', 'eu-west-1b'] }] },
      /two different regions/,
    );
    refused(
      { regions: [anchorPlace, { ...otherPlace, availabilityZones: ['eu-west-1a', 'eu-west-1b'] }] },
      /zones of us-east-1/,
    );
    refused({ homeRegion: 'ap-south-1' }, /homeRegion: ap-south-1 is not one of the stage's regions/);
    refused({ rebalancePeriodSeconds: 90 }, /rebalancePeriodSeconds: a whole number of minutes/);
    refused({ rebalancePeriodSeconds: 30 }, /rebalancePeriodSeconds: at least 60/);
    refused({ memoryDbNodeType: 'db.r7g.large' }, /memoryDbNodeType: an R7g node of size xlarge/);
    refused(
      { redis: 'memorydb', nodeType: 'db.r7g.large' },
      /redis: a two-region stage keeps its home store on ElastiCache/,
    );
    refused({ account: '333333333333' }, /account: a two-region stage names it per region/);
    refused({}, /region: a two-region stage takes it from its stage file's regions/, { region: 'eu-west-1' });
  });
});
