/**
 * The policy bounds (layer/src/strategies/strategy.ts POLICY_BOUNDS) hold what they promise:
 * any policy the schema accepts, however extreme its numbers, is decided by
 * Redis at its extremes (cost 1 and its largest cost, a drained bucket, runtime
 * rates at their bounds with the longest pause), never degraded by a number
 * Lua cannot carry. Policies the schema refuses are refused with a reason.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { type CompiledPolicy, compilePolicy, InvalidPolicyError } from '@platform/rate-limit';
import { POLICY_BOUNDS } from '@platform/rate-limit/policy';
import fc from 'fast-check';
import { pinnedLimiter, targets, unique } from '../support/targets.ts';

const duration = fc.oneof(
  fc.constantFrom('1 ms', '0.5 ms', '0.001 ms', '1 s', '59.999 s', '1 h', '168 h', '169 h', '6.5 m'),
  fc.integer({ min: 1, max: 604_800_000 }).map((ms) => `${ms} ms`),
);
const wide = fc.oneof(
  fc.integer({ min: 1, max: 100 }),
  fc.double({ min: 1e-12, max: 1e15, noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(1e9, 1e9 + 1, 1e15, 0.05, 1_000_000, 1_000_001),
);

const policyConfig = fc.oneof(
  fc.record({
    strategy: fc.constant('tokenBucket'),
    capacity: wide,
    refill: fc.record({ tokens: wide, every: duration }),
    adaptive: fc.option(
      fc.record({
        min: wide,
        max: wide,
        increaseBy: wide,
        decreaseFactor: fc.double({ min: 0.01, max: 0.99, noNaN: true }),
        keep: duration,
      }),
      { nil: undefined },
    ),
  }),
  fc.record({ strategy: fc.constant('slidingWindow'), limit: wide, window: duration }),
  fc.record({
    strategy: fc.constant('failureBackoff'),
    freeFailures: fc.integer({ min: 0, max: 2000 }),
    base: duration,
    max: duration,
    memory: duration,
  }),
  // three durations drawn alone are in the one order a backoff takes (base ≤ max ≤ memory) a sixth of the
  // time: these are, so its extremes get tried as often as the other strategies'
  fc
    .tuple(...Array.from({ length: 3 }, () => fc.integer({ min: 1, max: 604_800_000 })))
    .map((ms) => ms.sort((a, b) => a - b).map((m) => `${m} ms`))
    .chain(([base, max, memory]) =>
      fc.record({
        strategy: fc.constant('failureBackoff'),
        freeFailures: fc.integer({ min: 0, max: 2000 }),
        base: fc.constant(base),
        max: fc.constant(max),
        memory: fc.constant(memory),
      }),
    ),
);

function compiled(config: Record<string, unknown>): CompiledPolicy | undefined {
  // a generous budget: this is about numbers Lua can carry, not latency (a loaded CI machine)
  const clean = {
    ...Object.fromEntries(Object.entries(config).filter(([, value]) => value !== undefined)),
    timeBudget: '5 s',
  };
  try {
    return compilePolicy('edge', clean);
  } catch (error) {
    assert.ok(error instanceof InvalidPolicyError, String(error));
    assert.match(error.reason, /\S/);
    return undefined;
  }
}

for (const target of targets) {
  describe(`Policy bounds on a ${target.name}`, () => {
    const redis = target.client();
    after(() => redis.disconnect());

    it('every policy the schema accepts is decided by Redis at its extremes', async () => {
      let accepted = 0;
      await fc.assert(
        fc.asyncProperty(policyConfig, fc.integer({ min: 0, max: 10 * 365 * 86_400 }), async (config, skewS) => {
          const policy = compiled(config);
          if (!policy) return;
          accepted++;
          const clock = { nowUs: 1_800_000_000_000_000 + skewS * 1_000_000 };
          const limiter = pinnedLimiter(
            {
              redis,
              policies: { resolve: () => policy },
              onDegraded: (e) => assert.fail(`${JSON.stringify(config)}: ${e.detail}`),
            },
            clock,
          );
          const key = unique('edge');
          for (const cost of [policy.maxCost, 1, policy.maxCost]) {
            const decision = await limiter.check({ policy: 'edge', key, cost });
            assert.notEqual(decision.outcome, 'degraded');
          }
          if (policy.strategy === 'failureBackoff') {
            for (let i = 0; i < 3; i++) assert.ok((await limiter.recordFailure('edge', key)).decided);
            assert.notEqual((await limiter.check({ policy: 'edge', key })).outcome, 'degraded');
          }
          if (policy.strategy === 'tokenBucket' && policy.adaptive) {
            const pauseMs = POLICY_BOUNDS.maxPauseUs / 1000;
            for (const change of [
              { set: policy.adaptive.minRate },
              { decrease: true as const, pauseMs },
              { set: policy.adaptive.maxRate },
              { increase: true as const },
            ]) {
              assert.ok((await limiter.changeRate('edge', key, change)).decided);
              assert.notEqual((await limiter.check({ policy: 'edge', key, cost: policy.maxCost })).outcome, 'degraded');
            }
            clock.nowUs += policy.adaptive.keepUs; // lapse
            assert.notEqual((await limiter.check({ policy: 'edge', key })).outcome, 'degraded');
          }
        }),
        {
          numRuns: 300,
          examples: [
            // found in CI: a day's pause at 1 µs a token, lapsing to 20 s a token, was re-expressed as tokens
            [
              {
                strategy: 'tokenBucket',
                capacity: 1,
                refill: { tokens: 3, every: '59.999 s' },
                adaptive: { min: 0.05, max: 1_000_001, increaseBy: 1e9, decreaseFactor: 0.01, keep: '1 ms' },
              },
              0,
            ],
          ],
        },
      );
      assert.ok(accepted > 30, `only ${accepted} of 300 generated policies were accepted`);
    });
  });
}
