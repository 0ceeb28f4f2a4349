/**
 * The deploy-time readers: the outer line (config/outer-line.json) and the
 * CDK context. Any input is either a valid value or a typed error naming what
 * is wrong, never a crash and never a value AWS would refuse.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  InvalidOuterLineError,
  parseOuterLine,
  readOuterLine,
  WAF_EVALUATION_WINDOWS,
} from '../../config/outer-line.ts';
import { CONTEXT_NAMES, InvalidContextError, readDeployContext } from '../../infra/context.ts';

describe('Function: parseOuterLine', () => {
  it('reads the shipped config/outer-line.json', () => {
    const line = readOuterLine();
    assert.ok(line.ipRateRule.limit >= 10);
    assert.ok((WAF_EVALUATION_WINDOWS as readonly number[]).includes(line.ipRateRule.evaluationWindowSeconds));
  });

  it('refuses what WAF refuses, naming the field', () => {
    const valid = {
      stageThrottle: { rateLimit: 10, burstLimit: 20 },
      ipRateRule: { limit: 100, evaluationWindowSeconds: 60 },
    };
    assert.deepEqual(parseOuterLine(valid), { ...valid, routeThrottles: {} });
    const cases: [unknown, RegExp][] = [
      [{ ...valid, ipRateRule: { limit: 9, evaluationWindowSeconds: 60 } }, /ipRateRule\.limit/],
      [{ ...valid, ipRateRule: { limit: 100, evaluationWindowSeconds: 90 } }, /ipRateRule\.evaluationWindowSeconds/],
      [{ ...valid, stageThrottle: { rateLimit: 0, burstLimit: 20 } }, /stageThrottle\.rateLimit/],
      [{ ...valid, stageThrottle: { rateLimit: 10, burstLimit: 1.5 } }, /stageThrottle\.burstLimit/],
      [{ ...valid, routeThrottles: { api: { rateLimit: 0, burstLimit: 1 } } }, /routeThrottles\.api\.rateLimit/],
      [{ ...valid, routeThrottles: { 'Not A Route': { rateLimit: 1, burstLimit: 1 } } }, /routeThrottles/],
      [null, /outer line/],
    ];
    for (const [input, message] of cases) {
      assert.throws(
        () => parseOuterLine(input),
        (e: unknown) => e instanceof InvalidOuterLineError && message.test((e as Error).message),
      );
    }
  });

  it('answers any JSON with an outer line or an InvalidOuterLineError', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (input) => {
        try {
          const line = parseOuterLine(input);
          return line.ipRateRule.limit >= 10 && line.stageThrottle.burstLimit >= 1;
        } catch (error) {
          return error instanceof InvalidOuterLineError;
        }
      }),
    );
  });
});

describe('Function: readDeployContext', () => {
  it('refuses what cannot be deployed: node types without durability, http URLs, bad alarm endpoints', () => {
    for (const context of [
      { nodeType: 'cache.r6gd.xlarge' }, // data tiering
      { nodeType: 'cache.r5.large' }, // not Graviton
      { nodeType: 'cache.t4g.medium' },
      { egress: 'nat', mattermostUrl: 'http://chat.example.com' }, // 443 only
      { egress: 'nat', harvesterSource: 'http://source.example.com', harvesterSites: 'a' },
      { alarmEmails: 'oncall' },
      { alarmUrls: 'http://hooks.example.com/x' },
    ] as Record<string, string>[]) {
      assert.throws(() => readDeployContext((name) => context[name]), InvalidContextError, JSON.stringify(context));
    }
    const ok = readDeployContext(
      (name) =>
        ({
          nodeType: 'cache.c7gn.large',
          alarmEmails: 'a@example.com, b@example.com',
          alarmUrls: 'https://h.example/x',
        })[name],
    );
    assert.deepEqual(
      [ok.nodeType, ok.alarmEmails, ok.alarmUrls],
      ['cache.c7gn.large', ['a@example.com', 'b@example.com'], ['https://h.example/x']],
    );
  });

  it('resolves the defaults, and the node type per store', () => {
    assert.deepEqual(
      readDeployContext(() => undefined),
      {
        stage: 'prod',
        redis: 'elasticache',
        nodeType: 'cache.r7g.large',
        shards: 1,
        replicasPerShard: 1,
        dist: 'dist',
        egress: 'none',
        harvester: undefined,
        mattermostUrl: undefined,
        alarmEmails: [],
        alarmUrls: [],
        deploymentConfig: 'Canary10Percent5Minutes',
      },
    );
    const memorydb = readDeployContext((name) => ({ redis: 'memorydb', shards: '2' })[name]);
    assert.equal(memorydb.nodeType, 'db.r7g.large');
    assert.equal(memorydb.shards, 2);
  });

  it('deploys the consumers that call outside AWS only with egress', () => {
    const harvester = { harvesterSource: 'https://example.com', harvesterSites: 'a,b' };
    assert.throws(() => readDeployContext((name) => harvester[name as keyof typeof harvester]), /egress=nat/);
    const withNat = { ...harvester, egress: 'nat' };
    assert.deepEqual(readDeployContext((name) => withNat[name as keyof typeof withNat]).harvester, {
      source: 'https://example.com',
      sites: 'a,b',
    });
    assert.throws(
      () => readDeployContext((name) => ({ harvesterSource: 'https://x.example', egress: 'nat' })[name]),
      InvalidContextError,
    );
  });

  it('answers any context values with a context or an InvalidContextError', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...CONTEXT_NAMES), fc.jsonValue()), (values) => {
        try {
          const context = readDeployContext((name) => values[name]);
          return context.replicasPerShard >= 1 && context.shards >= 1;
        } catch (error) {
          return error instanceof InvalidContextError;
        }
      }),
    );
  });
});
