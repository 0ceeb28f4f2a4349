/**
 * The harvester's pacing against real Redis: AIMD on the shared rate, one
 * decrease per throttle episode, a slow start only on a scope not tuned yet,
 * turns bounded by their run, a clock stepped back; and the Retry-After reader.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it, type TestContext } from 'node:test';
import { compilePolicies, createLimiter, createRedisClient, staticPolicies } from '@platform/rate-limit';
import fc from 'fast-check';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { AdaptivePacer, type PacerOptions } from '../../functions/harvester/pacer.ts';
import { MAX_RETRY_AFTER_MS, parseRetryAfter } from '../../functions/harvester/source.ts';
import { AcceptedOnce } from '../../functions/shared/once.ts';
import { HARVESTER_POLICY } from '../../functions/workers.ts';

const shipped = PLATFORM_POLICIES[HARVESTER_POLICY] as {
  refill: { tokens: number; every: string };
  adaptive: { increaseBy: number; decreaseFactor: number; slowStartSteps: number };
};

const close = (actual: number | undefined, expected: number) =>
  assert.ok(Math.abs((actual as number) - expected) < 1e-9, `${actual} ≈ ${expected}`);

/** A pacer of the shipped policy (sleeping for real and on Date.now unless given `sleep`, `now`) on a fresh scope, and that scope's rate in force. */
function pacerOn(t: TestContext, options: Pick<PacerOptions, 'sleep' | 'now'> = {}) {
  const redis = createRedisClient({ url: process.env.REDIS_URL as string });
  t.after(() => redis.disconnect());
  const policies = staticPolicies(
    compilePolicies({ [HARVESTER_POLICY]: { ...(shipped as object), timeBudget: '2 s' } }),
  );
  const limiter = createLimiter({ redis, policies });
  const pacer = new AdaptivePacer({ limiter, once: new AcceptedOnce(redis), ...options });
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

describe('Class: AdaptivePacer, a clock stepped back', () => {
  it('answers a success after a throttle when the clock went back since, with one increaseBy, and counts the calm from then', async (t) => {
    let clock = 1000;
    const { pacer, scope, rate } = pacerOn(t, { now: () => clock });
    const { increaseBy } = shipped.adaptive;
    await pacer.answered(scope, { kind: 'throttled', status: 429, retryAfterMs: 1000 });
    const throttled = (await rate()) as number;
    clock = 999; // NTP stepped Date.now() back past the throttle
    await pacer.answered(scope, { kind: 'page', bytes: 2 });
    close(await rate(), throttled + increaseBy);
    clock = 999 + 2000; // one PROBE_DOUBLING_MS after the step back, not after the throttle
    await pacer.answered(scope, { kind: 'page', bytes: 2 });
    close(await rate(), throttled + 3 * increaseBy);
  });
});

describe('Class: AdaptivePacer, a turn within its run', () => {
  /** A scope the source paused for a minute: the bucket refuses with that wait. */
  async function pausedScope(t: TestContext, sleep?: (ms: number, signal?: AbortSignal) => Promise<void>) {
    const parts = pacerOn(t, sleep ? { sleep } : {});
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
    assert.equal(parseRetryAfter('3601', now), MAX_RETRY_AFTER_MS, 'longer than an hour: an hour, not absent');
    for (const bad of ['', '-1', '1.5', 'soon', 'Mon, 30 Nov 2026 12:00:03', null, undefined]) {
      assert.equal(parseRetryAfter(bad, now), undefined, String(bad));
    }
  });

  it('holds a pause longer than an hour to MAX_RETRY_AFTER_MS instead of treating it as absent', () => {
    for (const long of [
      '7200',
      '99999999999', // more digits than a 32-bit count
      `1${'0'.repeat(400)}`, // past Number.MAX_VALUE
      'Mon, 30 Nov 2026 14:00:00 GMT',
      'Monday, 30-Nov-26 14:00:00 GMT',
      'Mon Nov 30 14:00:00 2026',
    ]) {
      assert.equal(parseRetryAfter(long, now), MAX_RETRY_AFTER_MS, long);
    }
  });

  it('reads the obsolete RFC 850 and asctime dates (RFC 9110 §5.6.7), asctime as UTC whatever the local zone', () => {
    const zone = process.env.TZ;
    process.env.TZ = 'Asia/Kolkata'; // UTC+5:30: a date read as local time would be hours off
    try {
      assert.notEqual(new Date(now).getTimezoneOffset(), 0, 'the local zone is not UTC');
      assert.equal(parseRetryAfter('Monday, 30-Nov-26 12:00:03 GMT', now), 3000);
      assert.equal(parseRetryAfter('Mon Nov 30 12:00:03 2026', now), 3000);
      const first = Date.parse('2026-12-01T11:59:58Z');
      assert.equal(parseRetryAfter('Tue Dec  1 12:00:00 2026', first), 2000, 'a one-digit day after a space');
      assert.equal(parseRetryAfter('Tue Dec 01 12:00:00 2026', first), 2000, 'or as two digits');
      // A two-digit year more than 50 years ahead is the latest such year in the past.
      assert.equal(parseRetryAfter('Sunday, 06-Nov-94 08:49:37 GMT', now), 0, '1994, not 2094');
      assert.equal(parseRetryAfter('Tuesday, 30-Nov-77 12:00:03 GMT', now), 0, '1977, not 2077');
      assert.equal(parseRetryAfter('Monday, 30-Nov-76 12:00:03 GMT', now), MAX_RETRY_AFTER_MS, '2076: 50 years ahead');
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });

  it('answers anything but the three date forms and delay-seconds as absent', () => {
    for (const bad of [
      'Mon 30 Nov 2026 12:00:03 GMT', // no comma
      'Mon,  30 Nov 2026 12:00:03 GMT', // two spaces
      'mon, 30 Nov 2026 12:00:03 GMT', // names are case-sensitive
      'Xyz, 30 Nov 2026 12:00:03 GMT',
      'Monday, 30 Nov 2026 12:00:03 GMT', // RFC 850's day name, IMF-fixdate's date
      'Mon, 30-Nov-26 12:00:03 GMT', // and the other way round
      'Mon, 30 November 2026 12:00:03 GMT',
      'Mon, 30 Nov 26 12:00:03 GMT',
      'Mon, 30 Nov 2026 12:00 GMT',
      'Mon, 30 Nov 2026 12:00:03 +0000 GMT',
      'Mon, 30 Nov 2026 12:00:03 UTC',
      'Mon Nov 30 12:00:03 2026 GMT',
      'Mon, 31 Nov 2026 12:00:03 GMT', // no such day
      'Mon, 30 Nov 2026 24:00:00 GMT',
      'Mon, 30 Nov 2026 12:60:00 GMT',
      '2026-11-30T12:00:03Z',
      '\u00a05', // a no-break space is not OWS
    ]) {
      assert.equal(parseRetryAfter(bad, now), undefined, bad);
    }
  });

  const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
  const LONG_DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
  const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  /** `at` in one of RFC 9110's three HTTP-date forms. */
  function httpDate(form: 'imf' | 'rfc850' | 'asctime', at: Date): string {
    const time = `${pad(at.getUTCHours())}:${pad(at.getUTCMinutes())}:${pad(at.getUTCSeconds())}`;
    const [day, month, year] = [at.getUTCDate(), MONTHS[at.getUTCMonth()], at.getUTCFullYear()];
    if (form === 'imf') return `${DAYS[at.getUTCDay()]}, ${pad(day)} ${month} ${pad(year, 4)} ${time} GMT`;
    if (form === 'rfc850') return `${LONG_DAYS[at.getUTCDay()]}, ${pad(day)}-${month}-${pad(year % 100)} ${time} GMT`;
    return `${DAYS[at.getUTCDay()]} ${month} ${String(day).padStart(2, ' ')} ${time} ${pad(year, 4)}`;
  }

  it('answers any header with undefined or whole milliseconds within an hour, and never throws', () => {
    const near = fc.oneof(
      fc.integer({ min: -2 * MAX_RETRY_AFTER_MS, max: 2 * MAX_RETRY_AFTER_MS }),
      fc.integer({ min: -3e12, max: 3e12 }),
    );
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.string({ unit: 'binary' }),
          // pieces of the grammar, so near-misses of the date forms come up
          fc
            .array(
              fc.constantFrom('Mon', 'Sunday', 'Nov', ',', ' ', '  ', '-', ':', 'GMT', '06', '6', '94', '1994', '60'),
            )
            .map((parts) => parts.join('')),
          fc.date().map((d) => (Number.isNaN(d.getTime()) ? 'x' : d.toUTCString())),
          fc
            .tuple(fc.constantFrom('imf' as const, 'rfc850' as const, 'asctime' as const), near)
            .map(([form, ms]) => httpDate(form, new Date(now + ms))),
        ),
        (header) => {
          const ms = parseRetryAfter(header, now);
          return ms === undefined || (Number.isInteger(ms) && ms >= 0 && ms <= MAX_RETRY_AFTER_MS);
        },
      ),
    );
  });

  it('reads any instant in any of the three date forms as its distance from now, held to [0, an hour]', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('imf' as const, 'rfc850' as const, 'asctime' as const),
        fc.integer({ min: Date.parse('1970-01-01T00:00:00Z'), max: Date.parse('2200-01-01T00:00:00Z') }),
        // within 40 years, where a two-digit RFC 850 year is still the right century
        fc.oneof(
          fc.integer({ min: -2 * MAX_RETRY_AFTER_MS, max: 2 * MAX_RETRY_AFTER_MS }),
          fc.integer({ min: -40 * 365 * 86_400_000, max: 40 * 365 * 86_400_000 }),
        ),
        (form, nowMs, offset) => {
          const at = Math.floor((nowMs + offset) / 1000) * 1000; // a date has whole seconds
          const expected = Math.min(MAX_RETRY_AFTER_MS, Math.max(0, at - nowMs));
          assert.equal(parseRetryAfter(httpDate(form, new Date(at)), nowMs), expected, httpDate(form, new Date(at)));
        },
      ),
    );
  });
});
