/**
 * The deploy-time readers: the outer line (config/outer-line.json) and the
 * CDK context. Any input is either a valid value or a typed error naming what
 * is wrong, never a crash and never a value AWS would refuse.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  InvalidOuterLineError,
  parseOuterLine,
  readOuterLine,
  WAF_EVALUATION_WINDOWS,
} from '../../config/outer-line.ts';
import { CONTEXT_NAMES, InvalidContextError, readDeployContext, reservedConcurrencyFor } from '../../infra/context.ts';

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

/** A stage's place (its file names it); the tests below give the rest. */
const PLACE: Record<string, unknown> = { account: '222222222222', region: 'eu-west-1' };
const placed =
  (values: Record<string, unknown>) =>
  (name: string): unknown =>
    name in values ? values[name] : PLACE[name];

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
      // a chat's incoming webhook never confirms an SNS subscription: it would never get an alarm
      { alarmUrls: 'https://hooks.slack.com/services/T0/B0/x' },
      { alarmUrls: 'https://events.pagerduty.com/x, https://acme.webhook.office.com/webhookb2/x' },
      { alarmUrls: 'https://chat.googleapis.com/v1/spaces/x/messages?key=k' },
      { alarmUrls: 'https://discord.com/api/webhooks/1/x' },
    ] as Record<string, string>[]) {
      assert.throws(() => readDeployContext(placed(context)), InvalidContextError, JSON.stringify(context));
    }
    const ok = readDeployContext(
      placed({
        nodeType: 'cache.c7gn.large',
        alarmEmails: 'a@example.com, b@example.com',
        alarmUrls: 'https://h.example/x, https://events.pagerduty.com/integration/k/enqueue',
      }),
    );
    assert.deepEqual(
      [ok.nodeType, ok.alarmEmails, ok.alarmUrls],
      [
        'cache.c7gn.large',
        ['a@example.com', 'b@example.com'],
        ['https://h.example/x', 'https://events.pagerduty.com/integration/k/enqueue'],
      ],
    );
  });

  it('resolves the defaults, and the node type per store', () => {
    assert.deepEqual(readDeployContext(placed({})), {
      stage: 'prod',
      account: '222222222222',
      region: 'eu-west-1',
      availabilityZones: ['eu-west-1a', 'eu-west-1b'],
      reservedConcurrency: {},
      userPoolId: undefined,
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
      tags: { owner: 'unassigned', costCentre: 'unassigned' },
      tracing: 'off',
      apiGatewayAccountRole: false,
    });
    const memorydb = readDeployContext(placed({ redis: 'memorydb', shards: '2' }));
    assert.equal(memorydb.nodeType, 'db.r7g.large');
    assert.equal(memorydb.shards, 2);
  });

  it('deploys the consumers that call outside AWS only with egress', () => {
    const harvester = { harvesterSource: 'https://example.com', harvesterSites: 'a,b' };
    assert.throws(() => readDeployContext(placed(harvester)), /egress=nat/);
    const withNat = { ...harvester, egress: 'nat' };
    assert.deepEqual(readDeployContext(placed(withNat)).harvester, {
      source: 'https://example.com',
      sites: 'a,b',
    });
    assert.throws(
      () => readDeployContext(placed({ harvesterSource: 'https://x.example', egress: 'nat' })),
      InvalidContextError,
    );
    // what the deployed harvester would refuse at its start, refused at synth (its own settings reader)
    for (const [source, reason] of [
      ['https://u:tok@example.com/api', /harvesterSource: .*credentials/],
      ['https://example.com/api?k=v', /harvesterSource: .*query/],
    ] as const)
      assert.throws(() => readDeployContext(placed({ ...withNat, harvesterSource: source })), reason);
    assert.throws(() => readDeployContext(placed({ ...withNat, harvesterSites: 'a b' })), /harvesterSites: /);
    // and what the listener would (its task would exit 2 and restart in a loop; a password in its task definition)
    for (const url of ['https://bot:secret@chat.example.com', 'https://chat.example.com/?team=x'])
      assert.throws(
        () => readDeployContext(placed({ egress: 'nat', mattermostUrl: url })),
        /mattermostUrl: invalid setting MATTERMOST_URL/,
      );
    assert.equal(
      readDeployContext(placed({ egress: 'nat', mattermostUrl: 'https://example.com/mattermost' })).mattermostUrl,
      'https://example.com/mattermost',
    );
  });

  it('answers any context values with a context or an InvalidContextError', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...CONTEXT_NAMES), fc.jsonValue()), (values) => {
        try {
          const context = readDeployContext(placed(values));
          return context.replicasPerShard >= 1 && context.shards >= 1;
        } catch (error) {
          return error instanceof InvalidContextError;
        }
      }),
    );
  });
});

const STAGE_FIXTURES = new URL('../fixtures/invalid-stages/', import.meta.url);

describe('The stage name (what ElastiCache, MemoryDB and the other named resources accept)', () => {
  for (const file of readdirSync(STAGE_FIXTURES).filter((f) => f.endsWith('.json'))) {
    it(`refuses ${file.replace('.json', '')} with its exact message`, () => {
      const { stage, error } = JSON.parse(readFileSync(new URL(file, STAGE_FIXTURES), 'utf8')) as {
        stage: string;
        error: string;
      };
      assert.throws(
        () => readDeployContext(placed({ stage })),
        (e: unknown) => e instanceof InvalidContextError && e.message === error,
      );
    });
  }

  it('takes the names a replication group id, a MemoryDB cluster and user take: `ratelimit-<stage>`, 40 at most', () => {
    for (const stage of ['prod', 'dev', 'qa-x', 'a', 'eu1-blue-2', 'abcdefghijklmnopqrst']) {
      const name = `ratelimit-${readDeployContext(placed({ stage })).stage}`;
      assert.match(name, /^[a-z](?!.*--)[a-z0-9-]{0,38}[a-z0-9]$/, name);
    }
  });

  it('answers any text with a name ElastiCache takes or an InvalidContextError', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 30 }), (stage) => {
        try {
          const name = `ratelimit-${readDeployContext(placed({ stage })).stage}`;
          return /^[a-z](?!.*--)[a-z0-9-]{0,38}[a-z0-9]$/.test(name);
        } catch (error) {
          return error instanceof InvalidContextError;
        }
      }),
    );
  });
});

describe('A stage bound to its account', () => {
  it('names its account and region, or is refused naming what is missing', () => {
    assert.throws(() => readDeployContext(() => undefined), {
      message:
        'context account: stage prod names no AWS account: every stage file (infra/stages/<stage>.json) names the account and region it deploys to',
    });
    assert.throws(() => readDeployContext(placed({ account: '12345' })), {
      message: 'context account: a 12-digit AWS account id',
    });
    assert.throws(() => readDeployContext(placed({ region: 'Europe' })), {
      message: 'context region: an AWS region such as eu-west-1',
    });
    assert.throws(() => readDeployContext(placed({ availabilityZones: ['us-east-1a', 'us-east-1b'] })), {
      message: 'context availabilityZones: zones of eu-west-1',
    });
  });

  it('reads reserved concurrency as the stage file gives it (an object) or as -c gives it (JSON text)', () => {
    assert.deepEqual(readDeployContext(placed({ reservedConcurrency: { login: 5 } })).reservedConcurrency, {
      login: 5,
    });
    assert.deepEqual(readDeployContext(placed({ reservedConcurrency: '{"api":7}' })).reservedConcurrency, { api: 7 });
    // a default reserves every function the file does not name; without one, a function not named has none
    const withDefault = readDeployContext(
      placed({ reservedConcurrency: { default: 20, login: 5 } }),
    ).reservedConcurrency;
    assert.equal(reservedConcurrencyFor(withDefault, 'login'), 5);
    assert.equal(reservedConcurrencyFor(withDefault, 'a-new-route'), 20);
    assert.equal(reservedConcurrencyFor({ login: 5 }, 'a-new-route'), undefined);
    for (const bad of [{ login: 0 }, { login: 1.5 }, '{"login":', { Login: 1 }]) {
      assert.throws(
        () => readDeployContext(placed({ reservedConcurrency: bad })),
        InvalidContextError,
        JSON.stringify(bad),
      );
    }
  });
});
