import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type Load, monthlyBill, type Prices, type StageShape, stageShape } from '../../scripts/cost-model.ts';

// Round prices of the test's own, so the figures below can be worked out by hand: this tests the
// arithmetic, not config/prices.json. A 720-hour month (2 592 000 s, 30 days).
const prices: Prices = {
  asOf: 'test',
  region: 'test',
  hoursPerMonth: 720,
  cloudwatch: {
    logsIngestedPerGB: 1,
    logsStoredPerGBMonth: 0.1,
    logEventOverheadBytes: 0,
    vendedLogsIngestedPerGB: 1,
    customMetricPerMonth: 0.3,
    alarmMetricPerMonth: 0.1,
    dashboardPerMonth: 3,
    insightRulePerMonth: 0.5,
    insightRuleMatchedPerMillionEvents: 0.02,
  },
  elasticache: { nodeHour: { 'cache.test': 0.5 } },
  memorydb: { nodeHour: {} },
  lambda: { perMillionRequests: 0.2, perGBSecondArm: 0.00001, perGBSecondX86: 0.00002 },
  apiGateway: { restPerMillionRequests: 3.5 },
  waf: { webAclPerMonth: 5, rulePerMonth: 1, perMillionRequests: 0.6 },
  privatelink: { endpointPerAzHour: 0.01 },
  kms: { keyPerMonth: 1 },
  secretsManager: { secretPerMonth: 0.4 },
};

const shape: StageShape = {
  store: { service: 'elasticache', nodeType: 'cache.test', nodes: 2 },
  functions: [{ memoryMb: 1024, arm: true }],
  limiterPolicies: ['a', 'b'],
  alarmMetrics: { limiter: 10, platform: 5 },
  dashboards: 1,
  insightRules: 1,
  kmsKeys: 1,
  secrets: 1,
  endpointAzs: 0,
  waf: { webAcls: 1, rules: 1, logs: 'flagged' },
  functionLogRetentionDays: 15, // half a month kept
};

// 10 EMF bytes per check in lines of 1000 bytes; refusal lines of 250 bytes
const bytes = { emfPerCheck: 10, emfEventsPerCheck: 0.01, refusalLine: 250 };

const load = (checksPerSecond: number): Load => ({
  checksPerSecond,
  requestsPerSecond: checksPerSecond,
  refusedShare: 0.01,
  checkMs: 2,
  invocationMs: 2,
  wafFlaggedShare: 0.01,
  wafRecordBytes: 1000,
  accessLogBytes: 0,
});

const item = (bill: ReturnType<typeof monthlyBill>, prefix: string) =>
  bill.lines.find((l) => l.item.startsWith(prefix))?.usdPerMonth;

const near = (actual: number | undefined, expected: number) =>
  assert.ok(actual !== undefined && Math.abs(actual - expected) < 1e-9, `${actual} ≠ ${expected}`);

describe('Function: monthlyBill', () => {
  it('prices 1000 checks/s by hand: the store fixed, metrics, refusals and Lambda time per check', () => {
    // 2 592 000 000 checks: EMF 25.92 GB ingested ($25.92) + half of it kept a month ($1.296);
    // 25 920 000 refusals × 250 B = 6.48 GB ($6.48 + $0.324) + the rule ($0.50 + 25.92 M × $0.02);
    // 2 ms of a 1 GB function per check = 5 184 000 GB-s ($51.84); store 2 × 0.5 × 720 = $720;
    // 2 policies × 5 series × $0.30 = $3; 10 alarm metrics = $1; key and secret $1.40
    const bill = monthlyBill(shape, prices, bytes, load(1000));
    near(item(bill, 'store'), 720);
    near(item(bill, 'EMF'), 27.216);
    near(item(bill, 'custom metrics'), 3);
    near(item(bill, 'refusal'), 6.804 + 0.5 + 0.5184);
    near(item(bill, 'Lambda time'), 51.84);
    near(bill.limiterPerMonth, 812.2784);
    near(bill.limiterPerMillionChecks, 812.2784 / 2592);
    // the edge: 2 592 M requests × $3.50, and WAF logs 1 % × 1000 B = 25.92 GB
    near(item(bill, 'API Gateway REST'), 9072);
    near(item(bill, 'WAF logs'), 25.92);
  });

  it('prices 100 checks/s by hand: what is per check a tenth, what is fixed the same', () => {
    const bill = monthlyBill(shape, prices, bytes, load(100));
    near(item(bill, 'store'), 720);
    near(item(bill, 'EMF'), 2.7216);
    near(item(bill, 'refusal'), 0.6804 + 0.5 + 0.05184);
    near(item(bill, 'Lambda time'), 5.184);
    near(bill.limiterPerMonth, 734.53784);
    near(bill.limiterPerMillionChecks, 734.53784 / 259.2);
  });

  it('refuses a node type config/prices.json does not price', () => {
    assert.throws(
      () => monthlyBill({ ...shape, store: { ...shape.store, nodeType: 'cache.none' } }, prices, bytes, load(1)),
      /no elasticache price for cache.none/,
    );
  });
});

describe('Function: stageShape', () => {
  it("reads the store's nodes, the limiter's alarms and policies, and whether WAF logs everything", () => {
    const shapeOf = stageShape([
      {
        Resources: {
          Store: {
            Type: 'AWS::ElastiCache::ReplicationGroup',
            Properties: { CacheNodeType: 'cache.test', NumNodeGroups: 2, ReplicasPerNodeGroup: 2 },
          },
          Latency: {
            Type: 'AWS::CloudWatch::Alarm',
            Properties: { Namespace: 'RateLimit', Dimensions: [{ Name: 'policy', Value: 'login-ip' }] },
          },
          Memory: {
            Type: 'AWS::CloudWatch::Alarm',
            Properties: {
              Metrics: [
                { Expression: 'MAX([m0,m1])' },
                { MetricStat: { Metric: { Namespace: 'AWS/ElastiCache' } } },
                { MetricStat: { Metric: { Namespace: 'AWS/ElastiCache' } } },
              ],
            },
          },
          Errors: { Type: 'AWS::CloudWatch::Alarm', Properties: { Namespace: 'AWS/Lambda' } },
          Logs: { Type: 'AWS::Logs::LogGroup', Properties: { RetentionInDays: 30 } },
          Fn: {
            Type: 'AWS::Lambda::Function',
            Properties: { MemorySize: 512, Architectures: ['arm64'], LoggingConfig: { LogGroup: { Ref: 'Logs' } } },
          },
          WafLogging: { Type: 'AWS::WAFv2::LoggingConfiguration', Properties: {} },
        },
      },
    ]);
    assert.deepEqual(shapeOf.store, { service: 'elasticache', nodeType: 'cache.test', nodes: 6 });
    assert.deepEqual(shapeOf.alarmMetrics, { limiter: 3, platform: 1 });
    assert.deepEqual(shapeOf.limiterPolicies, ['login-ip']);
    assert.equal(shapeOf.functionLogRetentionDays, 30);
    assert.deepEqual(shapeOf.functions, [{ memoryMb: 512, arm: true }]);
    assert.equal(shapeOf.waf.logs, 'all');
  });
});
