/**
 * Runtime rates (AIMD) under random sequences of checks, rate changes, pauses
 * and lapses at pinned times. No reference model: the invariants a harvester
 * relies on, whatever the order of operations —
 *   - a pause (a source's Retry-After) admits nothing before its end, however
 *     the rate changes or lapses inside it;
 *   - no change of rate hands out a token: what was admitted never exceeds the
 *     capacity plus one token per fastest interval since the start;
 *   - no retry-after is longer than the pause left plus a whole bucket at the
 *     slowest rate (a rescaled debt stays a debt of tokens);
 *   - waiting exactly the retry-after admits the same cost, 1 ms less does not,
 *     when no runtime rate lapses in between.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { RateChange } from '@platform/rate-limit';
import { compilePolicy, InvalidPolicyError } from '@platform/rate-limit';
import type { CompiledTokenBucket } from '@platform/rate-limit/policy';
import { wholeIntervalUs } from '@platform/rate-limit/policy';
import fc from 'fast-check';
import { pinnedLimiter, targets, unique } from '../support/targets.ts';

const policyConfig = fc.record({
  capacity: fc.integer({ min: 1, max: 20 }),
  tokens: fc.integer({ min: 1, max: 10 }),
  every: fc.constantFrom('250 ms', '1 s', '7 s'),
  min: fc.constantFrom(0.05, 0.3, 1),
  max: fc.constantFrom(10, 45, 1000),
  increaseBy: fc.constantFrom(0.1, 1, 7, 50),
  decreaseFactor: fc.constantFrom(0.1, 0.5, 0.7, 0.9),
  keep: fc.constantFrom('1 s', '10 s', '1 m'),
});

type Step =
  | { op: 'check'; cost: number; thenWait: boolean }
  | { op: 'change'; change: RateChange }
  | { op: 'advance'; us: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ op: fc.constant('check' as const), cost: fc.integer({ min: 1, max: 20 }), thenWait: fc.boolean() }),
  fc.record({
    op: fc.constant('change' as const),
    change: fc.oneof(
      fc.record({ set: fc.constantFrom(0.01, 0.2, 3, 33.3, 2000) }),
      fc.record({ increase: fc.constant(true as const), steps: fc.integer({ min: 1, max: 100 }) }),
      fc.record(
        {
          decrease: fc.constant(true as const),
          steps: fc.integer({ min: 1, max: 5 }),
          pauseMs: fc.constantFrom(1, 999, 5_000, 90_000),
        },
        { requiredKeys: ['decrease'] },
      ),
    ),
  }),
  fc.record({ op: fc.constant('advance' as const), us: fc.integer({ min: 1, max: 120_000_000 }) }),
);

type PolicyShape = typeof policyConfig extends fc.Arbitrary<infer T> ? T : never;

function compiled(config: PolicyShape): CompiledTokenBucket | undefined {
  try {
    return compilePolicy('aimd', {
      strategy: 'tokenBucket',
      capacity: config.capacity,
      refill: { tokens: config.tokens, every: config.every },
      adaptive: {
        min: config.min,
        max: config.max,
        increaseBy: config.increaseBy,
        decreaseFactor: config.decreaseFactor,
        keep: config.keep,
      },
      timeBudget: '5 s', // a loaded CI machine: this is about decisions, not latency
    }) as CompiledTokenBucket;
  } catch (error) {
    assert.ok(error instanceof InvalidPolicyError, String(error));
    return undefined; // a policy rate outside min..max
  }
}

for (const target of targets) {
  describe(`Runtime rates on a ${target.name}, under random changes`, () => {
    const redis = target.client();
    after(() => redis.disconnect());

    it('keep every pause, hand out no token, and answer retry-afters that are exact and bounded', async () => {
      let played = 0;
      await fc.assert(
        fc.asyncProperty(policyConfig, fc.array(step, { minLength: 1, maxLength: 30 }), async (config, steps) => {
          const policy = compiled(config);
          if (!policy?.adaptive) return;
          played++;
          const { minRate, maxRate, keepUs } = policy.adaptive;
          const fastestUs = Math.min(policy.intervalUs, wholeIntervalUs(1e6 / maxRate));
          const slowestUs = Math.max(policy.intervalUs, wholeIntervalUs(1e6 / minRate));
          const start = 1_800_000_000_000_000;
          const clock = { nowUs: start };
          const limiter = pinnedLimiter(
            { redis, policies: { resolve: () => policy }, onDegraded: (e) => assert.fail(e.detail) },
            clock,
          );
          const key = unique('site');
          let pauseEnd = 0;
          let runtimeUntil = 0; // when the last runtime rate lapses
          let admitted = 0;
          const check = async (cost: number) => {
            const decision = await limiter.check({ policy: 'aimd', key, cost });
            assert.notEqual(decision.outcome, 'degraded');
            if (decision.outcome === 'allowed') {
              admitted += cost;
              assert.ok(clock.nowUs >= pauseEnd, `admitted ${pauseEnd - clock.nowUs} µs before the pause ends`);
              const tokens = policy.capacity + Math.floor((clock.nowUs - start) / fastestUs);
              assert.ok(admitted <= tokens, `admitted ${admitted} > ${tokens} tokens`);
            } else {
              const boundMs = Math.ceil((Math.max(0, pauseEnd - clock.nowUs) + policy.capacity * slowestUs) / 1000);
              assert.ok(decision.retryAfterMs <= boundMs, `retry ${decision.retryAfterMs} ms > ${boundMs} ms`);
              assert.ok(decision.retryAfterMs * 1000 >= pauseEnd - clock.nowUs, 'a retry inside the pause');
            }
            return decision;
          };
          for (const s of steps) {
            if (s.op === 'advance') clock.nowUs += s.us;
            else if (s.op === 'change') {
              const outcome = await limiter.changeRate('aimd', key, s.change);
              assert.ok(outcome.decided);
              assert.ok(outcome.ratePerSecond >= minRate && outcome.ratePerSecond <= maxRate);
              runtimeUntil = clock.nowUs + keepUs;
              if ('pauseMs' in s.change && s.change.pauseMs)
                pauseEnd = Math.max(pauseEnd, clock.nowUs + s.change.pauseMs * 1000);
            } else {
              const cost = Math.min(s.cost, policy.capacity);
              const decision = await check(cost);
              const waitUs = decision.retryAfterMs * 1000;
              const lapsesOnTheWay = clock.nowUs < runtimeUntil && runtimeUntil <= clock.nowUs + waitUs;
              if (decision.outcome !== 'limited' || !s.thenWait || lapsesOnTheWay) continue;
              clock.nowUs += waitUs - 1000;
              assert.equal((await check(cost)).outcome, 'limited', '1 ms before the retry-after');
              clock.nowUs += 1000;
              assert.equal((await check(cost)).outcome, 'allowed', 'exactly at the retry-after');
            }
          }
        }),
        { numRuns: 150 },
      );
      assert.ok(played > 50, `only ${played} of 150 generated policies were valid`);
    });
  });
}
