/**
 * Exactness at pinned time, on both deployments, for every strategy: refill
 * rates that do not divide evenly, a cost equal to the capacity or to what is
 * left, and "waiting exactly `retryAfterMs` admits, 1 ms less does not".
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { compilePolicy, type Decision, InvalidPolicyError, type PolicyConfig } from '@platform/rate-limit';
import fc from 'fast-check';
import { pinnedLimiter, targets, unique } from '../support/targets.ts';

const START_US = 1_800_000_000_000_000;

/** A limiter on one policy (named 'p') at a pinned clock, or undefined when the policy does not compile. */
function harness(redis: Parameters<typeof pinnedLimiter>[0]['redis'], config: PolicyConfig) {
  let policy: ReturnType<typeof compilePolicy>;
  try {
    // a generous budget: these properties are about decisions, not latency (a loaded CI machine)
    policy = compilePolicy('p', { ...config, timeBudget: '5 s' });
  } catch (error) {
    if (error instanceof InvalidPolicyError) return undefined;
    throw error;
  }
  const clock = { nowUs: START_US };
  const limiter = pinnedLimiter(
    { redis, policies: { resolve: () => policy }, onDegraded: (e) => assert.fail(`degraded: ${e.detail}`) },
    clock,
  );
  const key = unique('x');
  return {
    clock,
    key,
    policy,
    limiter,
    check: (cost = 1) => limiter.check({ policy: 'p', key, cost }),
    peek: (cost = 1) => limiter.peek([{ policy: 'p', key, cost }]),
    advanceMs: (ms: number) => {
      clock.nowUs += ms * 1000;
    },
  };
}

type Harness = NonNullable<ReturnType<typeof harness>>;

/** Units a check of cost 1 could take now (0 when it is refused). */
async function left(h: Harness): Promise<number> {
  const peek = await h.peek(1);
  assert.ok(peek.outcome !== 'degraded');
  return peek.outcome === 'allowed' ? peek.binding.remaining : 0;
}

/** A refused check waits `retryAfterMs`: 1 ms less is still refused, exactly that long is admitted. */
async function assertRetryAfterIsExact(h: Harness, cost: number, refused: Decision): Promise<void> {
  assert.ok(refused.outcome === 'limited', `expected a refusal, got ${refused.outcome}`);
  const wait = refused.retryAfterMs;
  assert.ok(wait > 0);
  h.advanceMs(wait - 1);
  assert.equal((await h.peek(cost)).outcome, 'limited', `admitted 1 ms before the ${wait} ms retry-after`);
  h.advanceMs(1);
  assert.equal((await h.check(cost)).outcome, 'allowed', `refused after waiting the ${wait} ms retry-after`);
}

const steps = fc.array(fc.record({ advanceMs: fc.nat({ max: 3000 }), cost: fc.integer({ min: 1, max: 60 }) }), {
  maxLength: 12,
});

for (const target of targets) {
  describe(`Exact arithmetic on a ${target.name}`, () => {
    const redis = target.client();
    after(() => redis.disconnect());

    it('admits cost == capacity on a full bucket whose rate does not divide evenly', async () => {
      for (const [capacity, tokens, every] of [
        [1, 6, '1 s'],
        [10, 9, '4 s'],
        [7, 3, '1 s'],
      ] as const) {
        const h = harness(redis, { strategy: 'tokenBucket', capacity, refill: { tokens, every } }) as Harness;
        const full = await h.check(capacity);
        assert.ok(full.outcome === 'allowed', `capacity ${capacity} at ${tokens} per ${every}: ${full.outcome}`);
        assert.equal(full.binding.remaining, 0);
      }
    });

    it('says exactly what is left: capacity 7 at 3/s, full, cost 6 leaves 1', async () => {
      const h = harness(redis, {
        strategy: 'tokenBucket',
        capacity: 7,
        refill: { tokens: 3, every: '1 s' },
      }) as Harness;
      const decision = await h.check(6);
      assert.ok(decision.outcome === 'allowed');
      assert.equal(decision.binding.remaining, 1);
      assert.equal((await h.check(1)).outcome, 'allowed');
      assert.equal((await h.check(1)).outcome, 'limited');
    });

    it('token bucket: capacity, what is left and the retry-after are exact at any rate', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 60 }),
          fc.oneof(fc.integer({ min: 1, max: 50 }), fc.constantFrom(0.1, 0.3, 2.5, 7.7)),
          fc.integer({ min: 100, max: 60_000 }),
          steps,
          fc.integer({ min: 1, max: 60 }),
          async (capacity, tokens, everyMs, history, lastCost) => {
            const config: PolicyConfig = {
              strategy: 'tokenBucket',
              capacity,
              refill: { tokens, every: `${everyMs} ms` },
            };
            const h = harness(redis, config);
            fc.pre(h !== undefined);
            // a full bucket admits its whole capacity at once
            const full = await h.check(capacity);
            assert.ok(full.outcome === 'allowed' && full.binding.remaining === 0, `cost == capacity: ${full.outcome}`);
            for (const step of history) {
              h.advanceMs(step.advanceMs);
              await h.check(Math.min(step.cost, capacity));
            }
            // a cost equal to what is left is admitted, and leaves nothing
            const units = await left(h);
            if (units > 0) {
              const all = await h.check(units);
              assert.ok(all.outcome === 'allowed' && all.binding.remaining === 0, `cost == left (${units})`);
            }
            const cost = Math.min(lastCost, capacity);
            await assertRetryAfterIsExact(h, cost, await h.check(cost));
          },
        ),
        { numRuns: 60 },
      );
    });

    it('sliding window: the limit, what is left and the retry-after are exact for any window', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 40 }),
          fc.integer({ min: 1, max: 10_000 }),
          steps,
          fc.integer({ min: 1, max: 40 }),
          async (limit, windowMs, history, lastCost) => {
            const h = harness(redis, { strategy: 'slidingWindow', limit, window: `${windowMs} ms` }) as Harness;
            const full = await h.check(limit);
            assert.ok(full.outcome === 'allowed' && full.binding.remaining === 0, `cost == limit: ${full.outcome}`);
            for (const step of history) {
              h.advanceMs(step.advanceMs);
              await h.check(Math.min(step.cost, limit));
            }
            const units = await left(h);
            if (units > 0) {
              const all = await h.check(units);
              assert.ok(all.outcome === 'allowed' && all.binding.remaining === 0, `cost == left (${units})`);
            }
            const cost = Math.min(lastCost, limit);
            await assertRetryAfterIsExact(h, cost, await h.check(cost));
          },
        ),
        { numRuns: 60 },
      );
    });

    it('failure backoff: the retry-after is exact after any run of failures', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: 3 }),
          fc.integer({ min: 1, max: 5_000 }),
          fc.integer({ min: 1, max: 8 }),
          fc.array(fc.nat({ max: 2_000 }), { minLength: 1, maxLength: 8 }),
          async (freeFailures, baseMs, maxFactor, gapsMs) => {
            const config: PolicyConfig = {
              strategy: 'failureBackoff',
              freeFailures,
              base: `${baseMs} ms`,
              max: `${baseMs * maxFactor} ms`,
              memory: '1 h',
            };
            const h = harness(redis, config) as Harness;
            for (const gap of gapsMs) {
              h.advanceMs(gap);
              await h.limiter.recordFailure('p', h.key);
            }
            const decision = await h.check();
            if (decision.outcome === 'allowed') return;
            await assertRetryAfterIsExact(h, 1, decision);
          },
        ),
        { numRuns: 60 },
      );
    });
  });
}
