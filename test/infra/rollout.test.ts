/**
 * Safe rollout and the attributable admin path, in the synthesized template
 * (infra/rollout.ts, infra/admin-entry.ts): each function a version behind
 * its alias `live`, everything that invokes it invoking the alias, a CodeDeploy
 * group per function shifting it as the stage file says and rolling back on
 * its alarms, the layer pinned by each version; the admin function behind a
 * function URL with AWS_IAM auth and no resource policy, its writes' notices
 * piped to the alarm topic.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Template } from 'aws-cdk-lib/assertions';
import { checksOf, routes } from '../../functions/routes.ts';
import { scheduled } from '../../functions/workers.ts';
import { createPlatformApp } from '../../infra/app.ts';
import { InvalidContextError } from '../../infra/context.ts';
import { MAX_ROLLBACK_ALARMS, rollbackAlarmIds } from '../../infra/rollout.ts';
import { buildAll } from '../../scripts/build.ts';

// biome-ignore lint/suspicious/noExplicitAny: template JSON, walked by the assertions below
type Json = any;
type Resource = { Type: string; Properties?: Record<string, Json>; UpdatePolicy?: Record<string, Json> };
type Resources = Record<string, Resource>;

const HARVESTER = { egress: 'nat', harvesterSource: 'https://source.example.com', harvesterSites: 'site-a' };
const FUNCTION_IDS = [...routes.map((r) => r.id), 'admin', 'harvester'];

let work: string;
before(async () => {
  work = mkdtempSync(join(tmpdir(), 'rl-rollout-'));
  await buildAll(join(work, 'dist'));
  // stage files naming the place and how each rolls out (prod's own file says the same as infra/stages/prod.json)
  const place = { account: '222222222222', region: 'eu-west-1' };
  writeFileSync(join(work, 'prod.json'), JSON.stringify({ ...place, deploymentConfig: 'Canary10Percent5Minutes' }));
  writeFileSync(join(work, 'dev.json'), JSON.stringify({ ...place, deploymentConfig: 'AllAtOnce' }));
  writeFileSync(join(work, 'dev2.json'), JSON.stringify(place));
});
after(() => rmSync(work, { recursive: true, force: true }));

function synth(context: Record<string, unknown> = {}): Resources {
  const created = createPlatformApp({
    context: { dist: join(work, 'dist'), ...HARVESTER, ...context },
    outdir: mkdtempSync(join(work, 'cdk-')),
    stagesDir: work,
  });
  created.app.synth(); // cdk-nag: an unacknowledged finding throws here
  return Template.fromStack(created.platform).toJSON().Resources as Resources;
}

const ofType = (resources: Resources, type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);
const ref = (value: unknown): string | undefined => (value as { Ref?: string } | undefined)?.Ref;
const getAtt = (value: unknown): string | undefined =>
  (value as { 'Fn::GetAtt'?: string[] } | undefined)?.['Fn::GetAtt']?.[0];

/** The names of the alarms a deployment group watches (a Ref to an alarm is its name). */
function watchedBy(resources: Resources, group: Resource | undefined): string[] {
  return ((group?.Properties?.AlarmConfiguration?.Alarms ?? []) as { Name: unknown }[]).map(({ Name }) => {
    if (typeof Name === 'string') return Name;
    const alarm = resources[ref(Name) ?? ''];
    assert.equal(alarm?.Type, 'AWS::CloudWatch::Alarm', 'a rollback alarm of the stack');
    return String(alarm?.Properties?.AlarmName);
  });
}

/** The logical id of the function named `ratelimit-<stage>-<id>`. */
function functionId(resources: Resources, id: string, stage = 'prod'): string {
  const found = ofType(resources, 'AWS::Lambda::Function').find(
    ([, r]) => r.Properties?.FunctionName === `ratelimit-${stage}-${id}`,
  );
  return found?.[0] ?? assert.fail(`no function ${id}`);
}

/** The alias `live` of a function (logical id and resource). */
function aliasOf(resources: Resources, fnLogicalId: string): [string, Resource] {
  const found = ofType(resources, 'AWS::Lambda::Alias').find(
    ([, r]) => ref(r.Properties?.FunctionName) === fnLogicalId,
  );
  return found ?? assert.fail(`no alias of ${fnLogicalId}`);
}

describe('Safe rollout (stage prod: Canary10Percent5Minutes)', () => {
  let resources: Resources;
  before(() => {
    resources = synth();
  });

  it('publishes every function as a version behind its alias live', () => {
    assert.equal(ofType(resources, 'AWS::Lambda::Alias').length, FUNCTION_IDS.length);
    for (const id of FUNCTION_IDS) {
      const fn = functionId(resources, id);
      const [, alias] = aliasOf(resources, fn);
      assert.equal(alias.Properties?.Name, 'live');
      const version = resources[getAtt(alias.Properties?.FunctionVersion) ?? ''];
      assert.equal(version?.Type, 'AWS::Lambda::Version', `${id}: the alias names a published version`);
      assert.equal(ref(version?.Properties?.FunctionName), fn);
    }
  });

  it('has every API method, the harvester schedule and the admin URL invoke the alias, never $LATEST', () => {
    const aliasIds = new Set(ofType(resources, 'AWS::Lambda::Alias').map(([id]) => id));
    const methods = ofType(resources, 'AWS::ApiGateway::Method');
    assert.equal(
      methods.length,
      routes.reduce((n, r) => n + r.methods.length, 0),
    );
    for (const [id, method] of methods) {
      const uri = JSON.stringify(method.Properties?.Integration?.Uri);
      const invoked = [...aliasIds].filter((alias) => uri.includes(`{"Ref":"${alias}"}`));
      assert.equal(invoked.length, 1, `${id} integrates an alias: ${uri}`);
    }
    for (const [id, permission] of ofType(resources, 'AWS::Lambda::Permission')) {
      assert.ok(aliasIds.has(ref(permission.Properties?.FunctionName) ?? ''), `${id} lets callers invoke an alias`);
    }
    const [, rule] = ofType(resources, 'AWS::Events::Rule')[0] ?? assert.fail('no schedule');
    const [harvesterAlias] = aliasOf(resources, functionId(resources, 'harvester'));
    assert.equal(ref(rule.Properties?.Targets?.[0]?.Arn), harvesterAlias);
    const [, url] = ofType(resources, 'AWS::Lambda::Url')[0] ?? assert.fail('no admin URL');
    assert.equal(url.Properties?.Qualifier, 'live');
  });

  it('shifts each alias with its own CodeDeploy group, canary 10 % for 5 minutes, rolling back on its alarms', () => {
    const groups = ofType(resources, 'AWS::CodeDeploy::DeploymentGroup');
    assert.equal(groups.length, FUNCTION_IDS.length);
    const alarmNames = new Map(
      ofType(resources, 'AWS::CloudWatch::Alarm').map(([, a]) => [a.Properties?.AlarmName as string, a]),
    );
    for (const id of FUNCTION_IDS) {
      const [, alias] = aliasOf(resources, functionId(resources, id));
      const groupId = ref(alias.UpdatePolicy?.CodeDeployLambdaAliasUpdate?.DeploymentGroupName);
      const group = resources[groupId ?? ''];
      assert.equal(group?.Type, 'AWS::CodeDeploy::DeploymentGroup', `${id}: CodeDeploy updates its alias`);
      assert.equal(group?.Properties?.DeploymentGroupName, `ratelimit-prod-${id}`);
      // a scheduled function runs every few minutes: a canary would most often shift no invocation at all
      const every = scheduled.find((w) => w.id === id)?.everyMinutes;
      assert.equal(
        group?.Properties?.DeploymentConfigName,
        every === undefined ? 'CodeDeployDefault.LambdaCanary10Percent5Minutes' : 'CodeDeployDefault.LambdaAllAtOnce',
        id,
      );
      if (every !== undefined) {
        // and its errors alarm fires on one failed run: one period of its schedule, one datapoint
        const errors = alarmNames.get(`ratelimit-prod FunctionErrors-${id}`)?.Properties ?? {};
        assert.ok(Number(errors.Period) >= every * 60, `${id}: a period of its schedule`);
        assert.equal(errors.DatapointsToAlarm, 1, `${id}: one failed run alarms`);
      }
      const watched = watchedBy(resources, group);
      if (every !== undefined) {
        // its deployment is over before its next run: an alarm could only stop the deploy carrying a fix
        assert.deepEqual(watched, [], `${id}: no rollback alarm`);
        assert.deepEqual(group?.Properties?.AutoRollbackConfiguration, {
          Enabled: true,
          Events: ['DEPLOYMENT_FAILURE', 'DEPLOYMENT_STOP_ON_REQUEST'],
        });
        continue;
      }
      assert.deepEqual(group?.Properties?.AutoRollbackConfiguration, {
        Enabled: true,
        Events: ['DEPLOYMENT_FAILURE', 'DEPLOYMENT_STOP_ON_REQUEST', 'DEPLOYMENT_STOP_ON_ALARM'],
      });
      assert.ok(watched.length <= MAX_ROLLBACK_ALARMS);
      for (const name of watched) assert.ok(alarmNames.has(name), `${id} rolls back on an alarm that exists: ${name}`);
      assert.ok(watched.includes(`ratelimit-prod FunctionErrors-${id}`), `${id} rolls back on its errors`);
      // a route answers its faults as 500s (the invocation succeeds): those roll it back too
      if (routes.some((r) => r.id === id))
        assert.ok(watched.includes(`ratelimit-prod UnhandledErrors-${id}`), `${id} rolls back on the 500s it answers`);
    }
    // a route rolls back on its policies' degraded and latency alarms too (login: its IP window, closed)
    const login = routes.find((r) => r.id === 'login') ?? assert.fail('no login route');
    const [, loginAlias] = aliasOf(resources, functionId(resources, 'login'));
    const loginGroup = resources[ref(loginAlias.UpdatePolicy?.CodeDeployLambdaAliasUpdate?.DeploymentGroupName) ?? ''];
    const loginWatched = watchedBy(resources, loginGroup);
    const first = checksOf(login)[0]?.[0] ?? assert.fail('login checks nothing');
    assert.ok(
      loginWatched.some((n) => /Degraded(Open|Closed)-/.test(n)),
      'a degraded alarm',
    );
    assert.ok(loginWatched.includes(`ratelimit-prod CheckLatencyP99-${first}`), 'a latency alarm');
  });

  it('keeps each group within CodeDeploy’s 10 alarms, errors first', () => {
    const many = Array.from({ length: 20 }, (_, i) => `p${i}`);
    const picked = rollbackAlarmIds('api', many, () => true);
    assert.equal(picked.length, MAX_ROLLBACK_ALARMS);
    assert.equal(picked[0], 'FunctionErrors-api');
    assert.deepEqual(
      rollbackAlarmIds('x', ['a'], (id) => id !== 'DegradedOpen-a'),
      ['FunctionErrors-x', 'UnhandledErrors-x', 'DegradedClosed-a', 'CheckLatencyP99-a'],
    );
  });

  it('reaches the admin function by a function URL with AWS_IAM auth and no resource policy', () => {
    const admin = functionId(resources, 'admin');
    const [adminAlias] = aliasOf(resources, admin);
    const urls = ofType(resources, 'AWS::Lambda::Url');
    assert.equal(urls.length, 1, 'the admin function only');
    assert.equal(urls[0]?.[1].Properties?.AuthType, 'AWS_IAM');
    assert.equal(getAtt(urls[0]?.[1].Properties?.TargetFunctionArn), admin);
    const opened = ofType(resources, 'AWS::Lambda::Permission').filter(([, p]) =>
      [admin, adminAlias].includes(ref(p.Properties?.FunctionName) ?? getAtt(p.Properties?.FunctionName) ?? ''),
    );
    assert.deepEqual(opened, [], 'no resource policy: only IAM principals of the account allowed InvokeFunctionUrl');
    // the operators' policy: the URL, and InvokeFunction only through it (no forged event by lambda:Invoke)
    const [, operator] =
      ofType(resources, 'AWS::IAM::ManagedPolicy').find(([, p]) =>
        String(p.Properties?.ManagedPolicyName).endsWith('-admin-operator'),
      ) ?? assert.fail('no operator policy');
    const statements = operator.Properties?.PolicyDocument?.Statement as { Action: string; Condition: unknown }[];
    assert.deepEqual(
      statements.map((st) => [st.Action, st.Condition]),
      [
        ['lambda:InvokeFunctionUrl', { StringEquals: { 'lambda:FunctionUrlAuthType': 'AWS_IAM' } }],
        ['lambda:InvokeFunction', { Bool: { 'lambda:InvokedViaFunctionUrl': 'true' } }],
      ],
    );
  });

  it('pipes each admin write notice from the operations queue to the alarm topic', () => {
    const admin = resources[functionId(resources, 'admin')];
    const queueId = ref(admin?.Properties?.Environment?.Variables?.OPERATIONS_QUEUE_URL);
    assert.equal(resources[queueId ?? '']?.Type, 'AWS::SQS::Queue');
    const [, pipe] =
      ofType(resources, 'AWS::Pipes::Pipe').find(([, p]) => getAtt(p.Properties?.Source) === queueId) ??
      assert.fail('no pipe from the operations queue');
    const topic = ref(pipe.Properties?.Target);
    assert.equal(resources[topic ?? '']?.Type, 'AWS::SNS::Topic');
    assert.match(String(resources[topic ?? '']?.Properties?.TopicName), /-alarms$/);
    const policies = ofType(resources, 'AWS::IAM::Policy').map(([, p]) => JSON.stringify(p.Properties));
    assert.ok(
      policies.some(
        (p) => p.includes('FnadminServiceRole') && p.includes('sqs:SendMessage') && p.includes(queueId ?? ''),
      ),
      'the admin function may send to the operations queue',
    );
  });
});

describe('Safe rollout per stage file, and the layer pinned', () => {
  it('rolls a stage out as its file says (dev: AllAtOnce), and refuses a config CodeDeploy lacks', () => {
    const dev = synth({ stage: 'dev' });
    const configs = new Set(
      ofType(dev, 'AWS::CodeDeploy::DeploymentGroup').map(([, g]) => g.Properties?.DeploymentConfigName),
    );
    assert.deepEqual([...configs], ['CodeDeployDefault.LambdaAllAtOnce']);
    assert.throws(
      () => createPlatformApp({ context: { stage: 'dev2', deploymentConfig: 'Canary50Percent' }, stagesDir: work }),
      (error: unknown) => error instanceof InvalidContextError && /deploymentConfig/.test(error.message),
    );
  });

  it('publishes a new version of every function when the layer changes, and none when nothing does', () => {
    const versions = (resources: Resources) =>
      new Map(
        FUNCTION_IDS.map((id) => {
          const [, alias] = aliasOf(resources, functionId(resources, id));
          return [id, getAtt(alias.Properties?.FunctionVersion)];
        }),
      );
    const before = versions(synth());
    assert.deepEqual(versions(synth()), before, 'the same build: the same versions');
    mkdirSync(join(work, 'dist', 'layer', 'nodejs'), { recursive: true });
    writeFileSync(join(work, 'dist', 'layer', 'nodejs', 'changed.txt'), 'a layer change');
    const afterChange = versions(synth());
    for (const id of FUNCTION_IDS) {
      assert.notEqual(afterChange.get(id), before.get(id), `${id}: a new version for the new layer (and a canary)`);
    }
  });
});
