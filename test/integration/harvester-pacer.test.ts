/**
 * The harvester's pacing against real Redis: AIMD on the shared rate, one
 * decrease per throttle episode; and the Retry-After reader.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compilePolicies, createLimiter, createRedisClient, staticPolicies } from '@platform/rate-limit';
import fc from 'fast-check';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { AdaptivePacer } from '../../functions/harvester/pacer.ts';
import { MAX_RETRY_AFTER_MS, parseRetryAfter } from '../../functions/harvester/source.ts';
import { AcceptedOnce } from '../../functions/shared/once.ts';
import { HARVESTER_POLICY } from '../../functions/workers.ts';

const shipped = PLATFORM_POLICIES[HARVESTER_POLICY] as {
  refill: { tokens: number; every: string };
  adaptive: { increaseBy: number; decreaseFactor: number; slowStartSteps: number };
};

describe('Class: AdaptivePacer', () => {
  it('adds slowStartSteps × increaseBy per success until a throttle halves the rate, then increaseBy; one decrease per episode', async (t) => {
    const redis = createRedisClient({ url: process.env.REDIS_URL as string });
    t.after(() => redis.disconnect());
    const policies = staticPolicies(
      compilePolicies({ [HARVESTER_POLICY]: { ...(shipped as object), timeBudget: '2 s' } }),
    );
    const limiter = createLimiter({ redis, policies });
    const pacer = new AdaptivePacer({ limiter, once: new AcceptedOnce(redis), sleep: async () => {} });
    const scope = `aimd-${process.pid}-${Date.now()}`;
    const rate = async () => {
      const answer = await limiter.currentRate(HARVESTER_POLICY, scope);
      return answer.decided ? answer.ratePerSecond : undefined;
    };
    const base = (await rate()) as number;
    assert.equal(base, 2, 'the policy rate: 2 per second');
    const { increaseBy, decreaseFactor, slowStartSteps } = shipped.adaptive;
    const close = (actual: number | undefined, expected: number) =>
      assert.ok(Math.abs((actual as number) - expected) < 1e-9, `${actual} ≈ ${expected}`);
    for (let i = 0; i < 4; i++) await pacer.answered(scope, { kind: 'page', body: '{}' });
    const started = base + 4 * slowStartSteps * increaseBy;
    close(await rate(), started);
    await pacer.answered(scope, { kind: 'throttled', status: 429, retryAfterMs: 2000 });
    await pacer.answered(scope, { kind: 'throttled', status: 429, retryAfterMs: 2000 });
    await pacer.answered(scope, { kind: 'throttled', status: 503, retryAfterMs: undefined });
    // The throttle that ends the slow start halves the rate: ⌈log 0.5 / log decreaseFactor⌉ decreases at once.
    const halving = decreaseFactor ** Math.ceil(Math.log(0.5) / Math.log(decreaseFactor));
    close(await rate(), started * halving);
    const decision = await limiter.check({ policy: HARVESTER_POLICY, key: scope });
    assert.equal(decision.outcome, 'limited', 'the pause holds every worker');
    assert.ok(decision.retryAfterMs > 1500 && decision.retryAfterMs <= 2000, `${decision.retryAfterMs} ms`);
    await pacer.answered(scope, { kind: 'page', body: '{}' });
    close(await rate(), started * halving + increaseBy);
    assert.deepEqual(
      { increases: pacer.stats.increases, decreases: pacer.stats.decreases },
      { increases: 5, decreases: 1 },
      'after the throttle: additive steps of increaseBy',
    );
  });
});

describe('Function: parseRetryAfter', () => {
  const now = Date.parse('2026-11-30T12:00:00Z');

  it('reads delay-seconds and HTTP dates as whole milliseconds from now', () => {
    assert.equal(parseRetryAfter('5', now), 5000);
    assert.equal(parseRetryAfter(' 0 ', now), 0);
    assert.equal(parseRetryAfter('Mon, 30 Nov 2026 12:00:03 GMT', now), 3000);
    assert.equal(parseRetryAfter('Mon, 30 Nov 2026 11:59:00 GMT', now), 0, 'a date in the past: now');
    assert.equal(parseRetryAfter('3601', now), undefined, 'longer than an hour');
    for (const bad of ['', '-1', '1.5', 'soon', 'Mon, 30 Nov 2026 12:00:03', null, undefined]) {
      assert.equal(parseRetryAfter(bad, now), undefined, String(bad));
    }
  });

  it('answers any header with undefined or whole milliseconds within an hour', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.date().map((d) => (Number.isNaN(d.getTime()) ? 'x' : d.toUTCString())),
        ),
        (header) => {
          const ms = parseRetryAfter(header, now);
          return ms === undefined || (Number.isInteger(ms) && ms >= 0 && ms <= MAX_RETRY_AFTER_MS);
        },
      ),
    );
  });
});
