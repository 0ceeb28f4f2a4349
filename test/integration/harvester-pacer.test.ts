/**
 * The harvester's pacing against real Redis: AIMD on the shared rate, one
 * decrease per throttle episode; and the Retry-After reader.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { AdaptivePacer, HARVESTER_POLICY } from '../../functions/harvester/pacer.ts';
import { MAX_RETRY_AFTER_MS, parseRetryAfter } from '../../functions/harvester/source.ts';
import { AcceptedOnce } from '../../functions/shared/once.ts';
import { compilePolicies, createLimiter, createRedisClient, staticPolicies } from '../../layer/src/index.ts';

const shipped = PLATFORM_POLICIES[HARVESTER_POLICY] as {
  refill: { tokens: number; every: string };
  adaptive: { increaseBy: number; decreaseFactor: number };
};

describe('Class: AdaptivePacer', () => {
  it('adds increaseBy per success and multiplies by decreaseFactor once per throttle episode', async (t) => {
    const redis = createRedisClient({ url: process.env.REDIS_URL as string });
    t.after(() => redis.disconnect());
    const policies = staticPolicies(
      compilePolicies({ [HARVESTER_POLICY]: { ...(shipped as object), timeBudget: '2 s' } }),
    );
    const limiter = createLimiter({ redis, policies });
    const pacer = new AdaptivePacer({ limiter, once: new AcceptedOnce(redis), sleep: async () => {} });
    const scope = `aimd-${process.pid}-${Date.now()}`;
    const base = (await limiter.currentRate(HARVESTER_POLICY, scope)) as number;
    assert.equal(base, 2, 'the policy rate: 2 per second');
    for (let i = 0; i < 4; i++) await pacer.answered(scope, { kind: 'page', body: '{}' });
    assert.equal(await limiter.currentRate(HARVESTER_POLICY, scope), base + 4 * shipped.adaptive.increaseBy);
    await pacer.answered(scope, { kind: 'throttled', status: 429, retryAfterMs: 2000 });
    await pacer.answered(scope, { kind: 'throttled', status: 429, retryAfterMs: 2000 });
    await pacer.answered(scope, { kind: 'throttled', status: 503, retryAfterMs: undefined });
    assert.equal(
      await limiter.currentRate(HARVESTER_POLICY, scope),
      (base + 4 * shipped.adaptive.increaseBy) * shipped.adaptive.decreaseFactor,
      'three refusals of one episode: one decrease',
    );
    assert.deepEqual(
      { increases: pacer.stats.increases, decreases: pacer.stats.decreases },
      { increases: 4, decreases: 1 },
    );
    const decision = await limiter.check({ policy: HARVESTER_POLICY, key: scope });
    assert.equal(decision.outcome, 'limited', 'the pause holds every worker');
    assert.ok(decision.retryAfterMs > 1500 && decision.retryAfterMs <= 2000, `${decision.retryAfterMs} ms`);
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
