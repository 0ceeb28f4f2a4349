/**
 * The stage file's hygiene (issue 28, point 5) in the synthesized templates:
 * tags on every resource CloudFormation can tag (by CloudFormation's own
 * resource schemas, as cfn-lint ships them), the monthly budget, X-Ray as a
 * switch with a sampling rule, the API Gateway account role as a switch.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Template } from 'aws-cdk-lib/assertions';
import { createPlatformApp } from '../../infra/app.ts';
import { BUDGET_NOTIFICATIONS } from '../../infra/budget.ts';
import { InvalidContextError } from '../../infra/context.ts';
import { SAMPLING } from '../../infra/tracing.ts';
import { buildAll } from '../../scripts/build.ts';
import { executionLogsWithoutRole } from '../../scripts/deploy.ts';
import { tagPropertyOf } from '../support/cfn-schemas.ts';

type Resource = { Type: string; Properties?: Record<string, unknown> };
type Resources = Record<string, Resource>;

let work: string;
before(async () => {
  work = mkdtempSync(join(tmpdir(), 'rl-hygiene-'));
  await buildAll(join(work, 'dist'));
});
after(() => rmSync(work, { recursive: true, force: true }));

/** Where a stage lives (read once stage files name their account and region; ignored before). */
const PLACE = { account: '123456789012', region: 'eu-west-1' };

/** Everything the stage file can switch on, and every consumer deployed. */
const FULL_STAGE = {
  ...PLACE,
  tags: { owner: 'team-limits', costCentre: 'cc-1234' },
  budget: { monthlyLimitUsd: 900, emails: ['finance@example.com'] },
  tracing: 'sampled',
  apiGatewayAccountRole: true,
  egress: 'nat',
  harvesterSource: 'https://source.example.com',
  harvesterSites: 'site-a',
  mattermostUrl: 'https://chat.example.com',
};

/** Each synthesized stage's stack-level tags (data, platform). */
const stackTags = new Map<string, Record<string, string>[]>();

function synth(stage: string, file: Record<string, unknown>): Resources[] {
  const stagesDir = mkdtempSync(join(work, 'stages-'));
  writeFileSync(join(stagesDir, `${stage}.json`), JSON.stringify(file));
  const stacks = createPlatformApp({
    context: { stage, dist: join(work, 'dist') },
    outdir: mkdtempSync(join(work, `cdk-${stage}-`)),
    stagesDir,
  });
  stacks.app.synth(); // cdk-nag runs here: an unacknowledged finding throws
  stackTags.set(
    stage,
    [stacks.data, stacks.platform].map((s) => s.tags.tagValues()),
  );
  return [stacks.data, stacks.platform].map((s) => Template.fromStack(s).toJSON().Resources as Resources);
}

/** A tag list ([{Key, Value}]) or map, as the resource's schema spells it. */
function tagsIn(value: unknown): Record<string, unknown> {
  if (Array.isArray(value))
    return Object.fromEntries(value.map((t: { Key: string; Value: unknown }) => [t.Key, t.Value]));
  return (value ?? {}) as Record<string, unknown>;
}

describe('The stage file hygiene', () => {
  let full: Resources[];
  let plain: Resources[];
  before(() => {
    full = synth('hygiene', FULL_STAGE);
    plain = synth('plain', PLACE); // nothing but where it lives: every default
  });

  it('tags every resource CloudFormation can tag with stage, service, owner and cost centre', () => {
    const expected = (stage: string, owner: string, costCentre: string) => ({
      stage,
      service: 'ratelimit',
      owner,
      'cost-centre': costCentre,
    });
    const cases = [
      { templates: full, tags: expected('hygiene', 'team-limits', 'cc-1234') },
      { templates: plain, tags: expected('plain', 'unassigned', 'unassigned') },
    ];
    for (const { templates, tags } of cases) {
      const resources = templates.flatMap((t) => Object.entries(t));
      const tagProperty = tagPropertyOf([...new Set(resources.map(([, r]) => r.Type))]);
      assert.deepEqual(
        Object.entries(tagProperty).filter(([, p]) => p === 'UNKNOWN'),
        [],
        'every type is in the schema',
      );
      const untagged: string[] = [];
      let tagged = 0;
      for (const [id, resource] of resources) {
        const property = tagProperty[resource.Type];
        if (!property) continue;
        tagged += 1;
        const carried = tagsIn(resource.Properties?.[property]);
        for (const [key, value] of Object.entries(tags)) {
          if (carried[key] !== value) untagged.push(`${id} (${resource.Type}) ${key}=${String(carried[key])}`);
        }
      }
      assert.deepEqual(untagged, [], 'resources without the stage tags');
      // and the stacks themselves (CloudFormation tags what it creates with them)
      assert.deepEqual(stackTags.get(tags.stage), [tags, tags]);
      // the walk found the bulk of the stack (functions, log groups, queues, the VPC, the store…)
      assert.ok(tagged > 40, `${tagged} taggable resources`);
    }
  });

  it('sets a monthly budget on the stage’s tagged costs, notifying the alarm topic and the stage file’s addresses', () => {
    const platform = full[1] as Resources;
    const budgets = Object.values(platform).filter((r) => r.Type === 'AWS::Budgets::Budget');
    assert.equal(budgets.length, 1);
    const budget = budgets[0]?.Properties as {
      Budget: Record<string, unknown>;
      NotificationsWithSubscribers: {
        Notification: { NotificationType: string; Threshold: number };
        Subscribers: { SubscriptionType: string; Address: unknown }[];
      }[];
    };
    assert.equal(budget.Budget.BudgetType, 'COST');
    assert.equal(budget.Budget.TimeUnit, 'MONTHLY');
    assert.deepEqual(budget.Budget.BudgetLimit, { Amount: 900, Unit: 'USD' });
    assert.deepEqual(budget.Budget.FilterExpression, {
      And: [
        { Tags: { Key: 'stage', Values: ['hygiene'], MatchOptions: ['EQUALS'] } },
        { Tags: { Key: 'service', Values: ['ratelimit'], MatchOptions: ['EQUALS'] } },
      ],
    });
    assert.deepEqual(
      budget.NotificationsWithSubscribers.map((n) => [n.Notification.NotificationType, n.Notification.Threshold]),
      BUDGET_NOTIFICATIONS.map((n) => [n.notificationType, n.threshold]),
    );
    const topicId = Object.entries(platform).find(([, r]) => r.Type === 'AWS::SNS::Topic')?.[0];
    for (const { Subscribers } of budget.NotificationsWithSubscribers) {
      assert.deepEqual(Subscribers, [
        { SubscriptionType: 'SNS', Address: { Ref: topicId } },
        { SubscriptionType: 'EMAIL', Address: 'finance@example.com' },
      ]);
    }
    // Budgets may publish to the topic, for this account only, and use its key
    const policies = JSON.stringify(Object.values(platform).filter((r) => r.Type === 'AWS::SNS::TopicPolicy'));
    assert.match(policies, /budgets\.amazonaws\.com/);
    assert.match(policies, /aws:SourceAccount/);
    const keys = JSON.stringify(Object.values(platform).filter((r) => r.Type === 'AWS::KMS::Key'));
    assert.match(keys, /budgets\.amazonaws\.com/);
    // the budget counts only what carries its filter's tag keys once they are activated for cost allocation:
    // docs/deploy.md gives the command, run by the management account, for exactly those keys
    const filterKeys = (budget.Budget.FilterExpression as { And: { Tags: { Key: string } }[] }).And.map(
      (f) => f.Tags.Key,
    );
    const docs = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8');
    const activation = /aws ce update-cost-allocation-tags-status \\\n\s+--cost-allocation-tags-status ([^\n]+)/.exec(
      docs,
    );
    assert.ok(activation, "docs/deploy.md's activation command");
    assert.deepEqual(
      String(activation[1]).trim().split(/\s+/),
      filterKeys.map((key) => `TagKey=${key},Status=Active`),
    );
    assert.match(docs, /only the \*\*management account\*\* can activate them/);
    // no budget in the stage file: none
    assert.equal(Object.values(plain[1] as Resources).filter((r) => r.Type === 'AWS::Budgets::Budget').length, 0);
  });

  it('traces nothing by default; sampled, the API stage and every function trace under a low-rate rule', () => {
    const functions = (t: Resources) => Object.values(t).filter((r) => r.Type === 'AWS::Lambda::Function');
    const stages = (t: Resources) => Object.values(t).filter((r) => r.Type === 'AWS::ApiGateway::Stage');
    const rules = (t: Resources) => Object.values(t).filter((r) => r.Type === 'AWS::XRay::SamplingRule');
    const plainPlatform = plain[1] as Resources;
    const fullPlatform = full[1] as Resources;
    const platformFunctions = functions(plainPlatform).filter((f) =>
      String(f.Properties?.FunctionName).startsWith('ratelimit-'),
    );
    assert.ok(platformFunctions.length > 3);
    for (const fn of platformFunctions) assert.equal(fn.Properties?.TracingConfig, undefined);
    assert.equal(stages(plainPlatform)[0]?.Properties?.TracingEnabled, false);
    assert.equal(rules(plainPlatform).length, 0);
    // off: no role is granted X-Ray
    assert.doesNotMatch(
      JSON.stringify(Object.values(plainPlatform).filter((r) => r.Type === 'AWS::IAM::Policy')),
      /xray:/,
    );

    const tracedFunctions = functions(fullPlatform).filter((f) =>
      String(f.Properties?.FunctionName).startsWith('ratelimit-'),
    );
    assert.ok(tracedFunctions.some((f) => f.Properties?.FunctionName === 'ratelimit-hygiene-harvester'));
    for (const fn of tracedFunctions) assert.deepEqual(fn.Properties?.TracingConfig, { Mode: 'Active' });
    assert.equal(stages(fullPlatform)[0]?.Properties?.TracingEnabled, true);
    assert.deepEqual(
      rules(fullPlatform).map((r) => r.Properties?.SamplingRule),
      [
        {
          RuleName: 'ratelimit-hygiene',
          Priority: SAMPLING.priority,
          FixedRate: SAMPLING.fixedRate,
          ReservoirSize: SAMPLING.reservoirSize,
          ServiceName: 'ratelimit-hygiene/hygiene',
          ServiceType: 'AWS::ApiGateway::Stage',
          Host: '*',
          HTTPMethod: '*',
          URLPath: '*',
          ResourceARN: '*',
          Version: 1,
        },
      ],
    );
    assert.ok(SAMPLING.fixedRate <= 0.05 && SAMPLING.reservoirSize <= 5, 'a low rate');
  });

  it('sets the region’s API Gateway account role only when the stage file says, and the pre-flight reads which', () => {
    const accounts = (t: Resources) => Object.values(t).filter((r) => r.Type === 'AWS::ApiGateway::Account');
    assert.equal(accounts(plain[1] as Resources).length, 0);
    assert.equal(accounts(full[1] as Resources).length, 1);
    // the stage logs execution in both: without the role in the stack, the region must have one already
    const inRegion = (stacks: Resources[]) =>
      stacks.map((resources) => ({ region: PLACE.region, template: { Resources: resources } }));
    assert.deepEqual(executionLogsWithoutRole(inRegion(plain)), [PLACE.region]);
    assert.deepEqual(executionLogsWithoutRole(inRegion(full)), []);
  });

  it('reads refusals from every consumer’s log group into the top offenders, the listener’s included', () => {
    const platform = full[1] as Resources;
    const rule = Object.values(platform).find((r) => r.Type === 'AWS::CloudWatch::InsightRule');
    const body = JSON.stringify(rule?.Properties?.RuleBody);
    const logGroups = Object.entries(platform).filter(([, r]) => r.Type === 'AWS::Logs::LogGroup');
    // every log group a function or the listener writes to (not the API's access logs nor WAF's)
    const written = new Set<string>();
    for (const r of Object.values(platform)) {
      if (r.Type === 'AWS::Lambda::Function') {
        const ref = (r.Properties?.LoggingConfig as { LogGroup?: { Ref: string } } | undefined)?.LogGroup?.Ref;
        if (ref) written.add(ref);
      }
      if (r.Type === 'AWS::ECS::TaskDefinition') {
        for (const c of (r.Properties?.ContainerDefinitions ?? []) as {
          LogConfiguration: { Options: Record<string, { Ref: string }> };
        }[])
          written.add(c.LogConfiguration.Options['awslogs-group']?.Ref as string);
      }
    }
    assert.ok(written.size > 5, `${written.size} consumer log groups`);
    const listenerLogs = logGroups.find(([id]) => id.includes('ListenerLogs'))?.[0];
    assert.ok(listenerLogs && written.has(listenerLogs), 'the listener writes to its own log group');
    for (const id of written) assert.ok(body.includes(`{"Ref":"${id}"}`), `${id} in the top-offenders rule`);
  });

  it('alarms on the listener’s health: tasks below desired, a slow catch-up, both to the topic', () => {
    const platform = full[1] as Resources;
    const alarms = Object.values(platform).filter((r) => r.Type === 'AWS::CloudWatch::Alarm');
    const named = (suffix: string) => alarms.find((a) => a.Properties?.AlarmName === `ratelimit-hygiene ${suffix}`);
    const tasks = named('ListenerTasks');
    assert.ok(tasks, 'ListenerTasks');
    assert.equal(tasks.Properties?.TreatMissingData, 'breaching');
    assert.match(
      JSON.stringify(tasks.Properties?.Metrics),
      /RunningTaskCount.*DesiredTaskCount|DesiredTaskCount.*RunningTaskCount/,
    );
    const lag = named('ListenerCatchUpLag');
    assert.ok(lag, 'ListenerCatchUpLag');
    assert.match(JSON.stringify(lag.Properties), /MattermostCatchUpLag/);
    for (const a of [tasks, lag]) {
      assert.ok(
        (a.Properties?.AlarmActions as unknown[] | undefined)?.length === 1 &&
          (a.Properties?.OKActions as unknown[] | undefined)?.length === 1,
      );
    }
    // no listener deployed, no listener alarm
    const plainAlarms = Object.values(plain[1] as Resources).filter((r) => r.Type === 'AWS::CloudWatch::Alarm');
    assert.ok(!plainAlarms.some((a) => String(a.Properties?.AlarmName).includes('Listener')));
  });

  it('draws the edge, the functions, the queue and the listener beside the limiter', () => {
    const body = JSON.stringify(
      Object.values(full[1] as Resources).find((r) => r.Type === 'AWS::CloudWatch::Dashboard')?.Properties
        ?.DashboardBody,
    );
    for (const part of [
      'AWS/ApiGateway',
      '4XXError',
      '5XXError',
      'Latency',
      'Count',
      'AWS/WAFV2',
      'BlockedRequests',
      'AllowedRequests',
      'AWS/Lambda',
      'Errors',
      'Throttles',
      'Duration',
      'ConcurrentExecutions',
      'AWS/SQS',
      'ApproximateAgeOfOldestMessage',
      'ApproximateNumberOfMessagesVisible',
      'ECS/ContainerInsights',
      'RunningTaskCount',
      'MattermostCatchUpLag',
      'CheckLatency',
      'insightRule',
      'EngineCPUUtilization',
    ])
      assert.ok(body.includes(part), `${part} on the dashboard`);
  });

  it('sets CDK’s recommended feature flags: the VPC’s default security group loses its rules', () => {
    const data = plain[0] as Resources;
    const restrict = Object.values(data).filter((r) => r.Type === 'Custom::VpcRestrictDefaultSG');
    assert.equal(restrict.length, 1, 'the default security group restricted');
    const vpc = Object.entries(data).find(([, r]) => r.Type === 'AWS::EC2::VPC')?.[0];
    assert.deepEqual(restrict[0]?.Properties?.DefaultSecurityGroupId, { 'Fn::GetAtt': [vpc, 'DefaultSecurityGroup'] });
  });

  it('refuses hygiene fields it cannot deploy, naming them', () => {
    const refused = (context: Record<string, unknown>, name: RegExp) =>
      assert.throws(
        () => createPlatformApp({ context: { stage: 'plain', ...PLACE, ...context }, stagesDir: work }),
        (e: unknown) => e instanceof InvalidContextError && name.test((e as Error).message),
      );
    refused({ tags: '{"owner":"a"}' }, /tags/);
    refused({ tags: { owner: 'a', costCentre: 'b', extra: 'c' } }, /tags/);
    refused({ tags: { owner: '<script>', costCentre: 'b' } }, /tags\.owner/);
    refused({ budget: { monthlyLimitUsd: 0 } }, /budget\.monthlyLimitUsd/);
    refused({ budget: '{"monthlyLimitUsd": 10, "emails": ["not-an-address"]}' }, /budget\.emails/);
    refused({ tracing: 'always' }, /tracing/);
    refused({ apiGatewayAccountRole: 'yes' }, /apiGatewayAccountRole/);
    // text from -c reads as the file's value
    const app = createPlatformApp({
      context: {
        stage: 'plain',
        ...PLACE,
        dist: join(work, 'dist'),
        tags: '{"owner":"o","costCentre":"c"}',
        apiGatewayAccountRole: 'true',
      },
      outdir: mkdtempSync(join(work, 'cdk-text-')),
      stagesDir: work,
    });
    assert.deepEqual(app.context.tags, { owner: 'o', costCentre: 'c' });
    assert.equal(app.context.apiGatewayAccountRole, true);
  });
});
