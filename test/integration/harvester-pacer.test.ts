/**
 * The harvester's pacing against real Redis: AIMD on the shared rate, one
 * decrease per throttle episode, a slow start only on a scope not tuned yet,
 * turns bounded by their run; and the Retry-After reader.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it, type TestContext } from 'node:test';
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

const close = (actual: number | undefined, expected: number) =>
  assert.ok(Math.abs((actual as number) - expected) < 1e-9, `${actual} ≈ ${expected}`);

/** A pacer of the shipped policy (sleeping for real unless given `sleep`) on a fresh scope, and that scope's rate in force. */
function pacerOn(t: TestContext, sleep?: (ms: number, signal?: AbortSignal) => Promise<void>) {
  const redis = createRedisClient({ url: process.env.REDIS_URL as string });
  t.after(() => redis.disconnect());
  const policies = staticPolicies(
    compilePolicies({ [HARVESTER_POLICY]: { ...(shipped as object), timeBudget: '2 s' } }),
  );
  const limiter = createLimiter({ redis, policies });
  const pacer = new AdaptivePacer({ limiter, once: new AcceptedOnce(redis), ...(sleep ? { sleep } : {}) });
  const scope = `pacer-${randomUUID().slice(0, 8)}`;
  const rate = async () => {
    const answer = await limiter.currentRate(HARVESTER_POLICY, scope);
    return answer.decided ? answer.ratePerSecond : undefined;
  };
  return { limiter, pacer, scope, rate };
}

describe('Class: AdaptivePacer', () => {
  it('adds slowStartSteps × increaseBy per success until a throttle halves the rate, then increaseBy; one decrease per episode', async (t) => {
    const { limiter, pacer, scope, rate } = pacerOn(t);
    const base = (await rate()) as number;
    assert.equal(base, 2, 'the policy rate: 2 per second');
    const { increaseBy, decreaseFactor, slowStartSteps } = shipped.adaptive;
    for (let i = 0; i < 4; i++) await pacer.answered(scope, { kind: 'page', bytes: 2 });
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
    await pacer.answered(scope, { kind: 'page', bytes: 2 });
    close(await rate(), started * halving + increaseBy);
    assert.deepEqual(
      { increases: pacer.stats.increases, decreases: pacer.stats.decreases },
      { increases: 5, decreases: 1 },
      'after the throttle: additive steps of increaseBy',
    );
  });
});

describe('Class: AdaptivePacer, a run on a scope earlier runs tuned', () => {
  it('probes from the rate in force, one increaseBy at a time, without another slow start', async (t) => {
    const { limiter, pacer, scope, rate } = pacerOn(t);
    const { increaseBy } = shipped.adaptive;
    // what earlier runs left: a runtime rate the source bears
    const tuned = await limiter.changeRate(HARVESTER_POLICY, scope, { set: 3 });
    assert.deepEqual(tuned, { decided: true, ratePerSecond: 3 });
    await pacer.answered(scope, { kind: 'page', bytes: 2 });
    close(await rate(), 3 + increaseBy);
  });

  it('slow-starts on a scope with no runtime rate', async (t) => {
    const { pacer, scope, rate } = pacerOn(t);
    const { increaseBy, slowStartSteps } = shipped.adaptive;
    await pacer.answered(scope, { kind: 'page', bytes: 2 });
    close(await rate(), 2 + slowStartSteps * increaseBy);
  });
});

describe('Class: AdaptivePacer, a turn within its run', () => {
  /** A scope the source paused for a minute: the bucket refuses with that wait. */
  async function pausedScope(t: TestContext, sleep?: (ms: number, signal?: AbortSignal) => Promise<void>) {
    const parts = pacerOn(t, sleep);
    await parts.limiter.changeRate(HARVESTER_POLICY, parts.scope, { decrease: true, pauseMs: 60_000 });
    return parts;
  }

  it("answers 'over' at once, without a sleep, when the wait outlasts the run", { timeout: 20_000 }, async (t) => {
    const slept: number[] = [];
    const { pacer, scope } = await pausedScope(t, async (ms) => {
      slept.push(ms);
      if (slept.length > 3) throw new Error(`still waiting: ${slept.join(', ')} ms`);
    });
    assert.equal(await pacer.turn(scope, { until: Date.now() + 30_000 }), 'over');
    assert.deepEqual(slept, [], 'no sleep the run could not finish');
    assert.equal(pacer.stats.waits, 0);
  });

  it("answers 'over' at once when the run's time is up or it is stopped", async (t) => {
    const { pacer, scope } = pacerOn(t);
    assert.equal(await pacer.turn(scope, { until: Date.now() - 1 }), 'over');
    assert.equal(await pacer.turn(scope, { until: Number.POSITIVE_INFINITY, stop: AbortSignal.abort() }), 'over');
    assert.equal(pacer.stats.shared, 0, 'no token taken for a request that will not be sent');
    assert.equal(await pacer.turn(scope, { until: Number.POSITIVE_INFINITY }), 'shared');
  });

  it("ends its wait at the stop (SIGTERM), with 'over'", { timeout: 20_000 }, async (t) => {
    const { pacer, scope } = await pausedScope(t); // the real, abortable sleep
    const stop = new AbortController();
    const turning = pacer.turn(scope, { until: Number.POSITIVE_INFINITY, stop: stop.signal });
    while (pacer.stats.waits === 0) await new Promise((resolve) => setImmediate(resolve));
    stop.abort(); // the worker is asleep in its minute's wait
    assert.equal(await turning, 'over');
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
