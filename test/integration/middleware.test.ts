/**
 * The middleware in a real Middy stack (CORS and the error handler around it)
 * against real Redis: the answers an API client sees.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import middy from '@middy/core';
import httpCors from '@middy/http-cors';
import httpErrorHandler from '@middy/http-error-handler';
import type { Limiter } from '@platform/rate-limit';
import {
  type CompiledPolicy,
  compilePolicy,
  createLimiter,
  createRedisClient,
  type Verdict,
} from '@platform/rate-limit';
import {
  apiKeyHash,
  clientIp,
  emailHash,
  type HttpEvent,
  type RouteLimit,
  rateLimit,
  rateLimitHeaders,
} from '@platform/rate-limit/middleware';
import type { Context } from 'aws-lambda';
import fc from 'fast-check';
import { freePort } from '../../scripts/redis-process.ts';
import { quotaPeriodUs } from '../model/reference-model.ts';
import { httpApiEvent, restEvent } from '../support/events.ts';
import { connected, countingCommands, pinnedLimiter, policies, targets, unique } from '../support/targets.ts';

type Response = { statusCode: number; headers: Record<string, string>; body: string };

function stack(limiter: Limiter, limits: RouteLimit[], seen: Verdict[] = [], scope?: RouteLimit['key']) {
  let handled = 0;
  const handler = middy<HttpEvent, Response>(async () => {
    handled++;
    return { statusCode: 200, headers: {}, body: 'ok' };
  })
    .use(httpCors({ origins: ['https://app.example'] }))
    .use(httpErrorHandler({ logger: false }))
    .use(rateLimit({ limiter, limits, observer: { observe: (v) => seen.push(v) }, ...(scope ? { scope } : {}) }));
  return {
    invoke: (event: HttpEvent) => handler(event, {} as Context) as Promise<Response>,
    handled: () => handled,
  };
}

for (const target of targets) {
  describe(`rateLimit middleware on a ${target.name}`, () => {
    const redis = target.client();
    after(() => redis.disconnect());

    it('answers 200 with RateLimit headers, then 429 with Retry-After, and admits again after it', async () => {
      const policy = unique('api');
      const catalogue = policies({ [policy]: { strategy: 'slidingWindow', limit: 2, window: '1 m' } });
      const clock = { nowUs: 1_800_000_000_000_000 };
      const api = stack(pinnedLimiter({ redis, policies: catalogue }, clock), [{ policy, key: clientIp }]);

      const first = await api.invoke(restEvent());
      assert.equal(first.statusCode, 200);
      assert.equal(first.headers['RateLimit-Policy'], `"${policy}";q=2;w=60`);
      assert.equal(first.headers.RateLimit, `"${policy}";r=1;t=60`);
      clock.nowUs += 10_000_000;
      assert.equal((await api.invoke(restEvent())).statusCode, 200);
      clock.nowUs += 5_000_000;

      const refused = await api.invoke(restEvent());
      assert.equal(refused.statusCode, 429);
      assert.equal(refused.headers['Retry-After'], '45'); // the first event leaves 60 s after it came
      assert.equal(refused.headers['RateLimit-Policy'], `"${policy}";q=2;w=60`);
      assert.equal(refused.headers.RateLimit, `"${policy}";r=0;t=55`);
      assert.equal(refused.headers['Content-Type'], 'application/json');
      assert.deepEqual(JSON.parse(refused.body), {
        error: 'rate_limited',
        message: 'Too many requests.',
        policy,
        retryAfterSeconds: 45,
      });
      assert.equal(refused.headers['Access-Control-Allow-Origin'], 'https://app.example', 'CORS on a 429');
      assert.equal(api.handled(), 2);

      clock.nowUs += 45_000_000;
      assert.equal((await api.invoke(restEvent())).statusCode, 200);
    });

    it('keys on the gateway-seen IP of REST and HTTP API events, never on X-Forwarded-For', async () => {
      const policy = unique('ip');
      const limiter = createLimiter({
        redis,
        policies: policies({ [policy]: { strategy: 'slidingWindow', limit: 2, window: '1 m' } }),
      });
      const api = stack(limiter, [{ policy, key: clientIp }]);
      const spoofed = (n: number) => restEvent({ ip: '203.0.113.50', headers: { 'X-Forwarded-For': `10.0.0.${n}` } });
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await api.invoke(spoofed(i))).statusCode);
      assert.deepEqual(statuses, [200, 200, 429]);
      assert.equal((await api.invoke(httpApiEvent({ ip: '203.0.113.51' }))).statusCode, 200);
    });
  });
}

describe('rateLimit middleware', () => {
  const redis = targets[0]?.client() ?? assert.fail();
  after(() => redis.disconnect());

  it("states a month quota's window as the length of its month (28 to 31 days) in its offset, never shorter than t", async () => {
    const OFFSETS = [undefined, '+05:30', '-08:00', '+14:00', '-14:00'] as const;
    const at = (iso: string) => Date.parse(iso) * 1000;
    // the first second of a 31-day month (t was past a 30-day w), a leap February and a plain one, a 30-day month;
    // the first hours of a UTC month, still the month before at -08:00, and the last hours of one, the next at +14:00
    const pinned = [
      '2027-01-01T00:00:00Z',
      '2028-02-15T12:00:00Z',
      '2027-02-01T00:00:00Z',
      '2027-04-30T23:59:59Z',
      '2027-02-01T03:00:00Z',
      '2027-01-31T12:00:00Z',
      '2028-03-01T07:59:59Z',
    ];
    // within 15 h of a month's start in UTC: inside every offset's hours
    const nearMonthEnd = fc
      .record({
        year: fc.integer({ min: 1971, max: 2099 }),
        month: fc.integer({ min: 0, max: 11 }),
        offsetS: fc.integer({ min: -15 * 3600, max: 15 * 3600 }),
      })
      .map(({ year, month, offsetS }) => (Date.UTC(year, month, 1) + offsetS * 1000) * 1000);
    const instant = fc.oneof(
      fc.constantFrom(...pinned.map(at)),
      nearMonthEnd,
      fc.integer({ min: at('1971-01-01T00:00:00Z'), max: at('2099-12-31T00:00:00Z') }),
    );
    const w = (headers: Record<string, string>) => Number(/;w=(\d+)$/.exec(headers['RateLimit-Policy'] ?? '')?.[1]);
    await fc.assert(
      fc.asyncProperty(instant, fc.constantFrom(...OFFSETS), async (nowUs, utcOffset) => {
        const name = unique('month');
        const policy = compilePolicy(name, {
          strategy: 'quota',
          limit: 5,
          period: 'month',
          ...(utcOffset ? { utcOffset } : {}),
          timeBudget: '5 s',
        });
        const limiter = pinnedLimiter({ redis, policies: { resolve: () => policy } }, { nowUs });
        const [start, end] = quotaPeriodUs(nowUs, 'month', policy.strategy === 'quota' ? policy.offsetUs : 0);
        const month = (end - start) / 1e6;
        const when = `${new Date(nowUs / 1000).toISOString()} ${utcOffset ?? 'UTC'}`;

        // nothing counted yet: the status has no reset (t=0), and w is still the month in the quota's offset
        const peeked = await limiter.peek([{ policy: name, key: 'k' }]);
        assert.ok(peeked.decided && peeked.limits[0]?.resetAfterMs === 0);
        assert.equal(w(rateLimitHeaders(peeked.limits, nowUs / 1000)), month, `peek ${when}`);

        const decision = await limiter.check({ policy: name, key: 'k' });
        assert.ok(decision.decided);
        const headers = rateLimitHeaders(decision.limits, nowUs / 1000);
        const t = Number(/;t=(\d+)$/.exec(headers.RateLimit ?? '')?.[1]);
        assert.equal(w(headers), month, when);
        assert.ok(t > 0 && t <= month, `t=${t} w=${month}`);
      }),
      { numRuns: 200 },
    );
  });

  it('answers 400 with a reason when the key is missing, without a shared bucket', async () => {
    const policy = unique('key');
    const limiter = createLimiter({
      redis,
      policies: policies({ [policy]: { strategy: 'slidingWindow', limit: 5, window: '1 m' } }),
    });
    const api = stack(limiter, [{ policy, key: apiKeyHash({ pepper: () => 'test-pepper' }) }]);
    const response = await api.invoke(restEvent());
    assert.equal(response.statusCode, 400);
    assert.deepEqual(JSON.parse(response.body), {
      error: 'rate_limit_bad_request',
      message: 'the request has no x-api-key header',
    });
    assert.equal(api.handled(), 0);
  });

  it('answers 503 when Redis is down and the policy fails closed, and runs the handler when it fails open', async () => {
    const down = createRedisClient({ url: `redis://127.0.0.1:${await freePort()}` });
    const limiter = createLimiter({
      redis: down,
      policies: policies({
        closed: { strategy: 'slidingWindow', limit: 5, window: '1 m' },
        open: { strategy: 'tokenBucket', capacity: 5, refill: { tokens: 5, every: '1 m' }, failureMode: 'open' },
      }),
      onDegraded: () => {},
    });
    try {
      const seen: Verdict[] = [];
      const closed = await stack(limiter, [{ policy: 'closed', key: clientIp }], seen).invoke(restEvent());
      assert.equal(closed.statusCode, 503);
      assert.equal(closed.headers['Retry-After'], '1');
      assert.equal(JSON.parse(closed.body).error, 'rate_limiter_unavailable');
      const open = stack(limiter, [{ policy: 'open', key: clientIp }], seen);
      assert.equal((await open.invoke(restEvent())).statusCode, 200);
      assert.equal(open.handled(), 1);
      assert.deepEqual(
        seen.map((v) => v.outcome),
        ['degraded-closed', 'degraded-open'],
      );
    } finally {
      down.disconnect();
    }
  });

  it('never refuses for a shadow policy, but counts what it would have refused', async () => {
    const [enforced, shadow] = [unique('enforced'), unique('shadow')];
    const group = unique('g');
    const limiter = createLimiter({
      redis,
      policies: policies({
        [enforced]: { strategy: 'slidingWindow', limit: 10, window: '1 m', group },
        [shadow]: { strategy: 'slidingWindow', limit: 1, window: '1 m', group, shadow: true },
      }),
    });
    const seen: Verdict[] = [];
    const api = stack(
      limiter,
      [
        { policy: enforced, key: clientIp },
        { policy: shadow, key: clientIp },
      ],
      seen,
      clientIp,
    );
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await api.invoke(restEvent({ ip: '192.0.2.99' }))).statusCode);
    assert.deepEqual(statuses, [200, 200, 200]);
    assert.deepEqual(
      seen.map((v) => v.outcome),
      ['allowed', 'shadow-limited', 'shadow-limited'],
    );
    // the enforced window counted every request: the shadow refusals blocked nothing
    const peek = await limiter.peek([{ policy: enforced, key: '192.0.2.99' }], { scope: '192.0.2.99' });
    assert.ok(peek.outcome === 'allowed' && peek.binding.remaining === 10 - 3);
  });

  it('refuses a known-limited key from the block cache without asking Redis, until the policy changes', async () => {
    await connected(redis);
    const policy = unique('blocked');
    const config = { strategy: 'slidingWindow', limit: 1, window: '1 m', blockCache: true };
    const state: { compiled: CompiledPolicy } = { compiled: compilePolicy(policy, config) };
    const counting = countingCommands(redis);
    const limiter = createLimiter({ redis: counting.client, policies: { resolve: () => state.compiled } });
    const calls = async () => counting.sent();
    assert.equal((await limiter.check({ policy, key: 'k' })).outcome, 'allowed');
    assert.equal((await limiter.check({ policy, key: 'k' })).outcome, 'limited');
    const before = await calls();
    assert.ok(before >= 2, "the count sees this limiter's scripts");
    const cached = await limiter.check({ policy, key: 'k' });
    assert.ok(cached.outcome === 'limited' && cached.retryAfterMs > 59_000);
    assert.equal(await calls(), before, 'no EVALSHA for a cached refusal');
    state.compiled = compilePolicy(policy, { ...config, limit: 5 });
    assert.equal((await limiter.check({ policy, key: 'k' })).outcome, 'allowed');
  });

  it('refuses from the block cache only a cost at least as large as the one refused', async () => {
    await connected(redis);
    const policy = unique('costly');
    const config = { strategy: 'tokenBucket', capacity: 5, refill: { tokens: 1, every: '1 h' }, blockCache: true };
    const compiled = compilePolicy(policy, config);
    const counting = countingCommands(redis);
    const limiter = createLimiter({ redis: counting.client, policies: { resolve: () => compiled } });
    const calls = async () => counting.sent();
    assert.equal((await limiter.check({ policy, key: 'k', cost: 3 })).outcome, 'allowed');
    assert.equal((await limiter.check({ policy, key: 'k', cost: 5 })).outcome, 'limited');
    // 2 tokens are left: a cost of 1 fits, though a cost of 5 was just refused
    assert.equal((await limiter.check({ policy, key: 'k', cost: 1 })).outcome, 'allowed');
    const before = await calls();
    assert.ok(before >= 3, "the count sees this limiter's scripts");
    assert.equal((await limiter.check({ policy, key: 'k', cost: 5 })).outcome, 'limited');
    assert.equal(await calls(), before, 'the cost-5 refusal came from the cache');
  });

  it("ends each invocation with a batching observer's flushIfDue, not its flush: checks are held across invocations", async () => {
    const policy = unique('api');
    const limiter = createLimiter({
      redis,
      policies: policies({ [policy]: { strategy: 'tokenBucket', capacity: 10, refill: { tokens: 10, every: '1 m' } } }),
    });
    const calls = { observe: 0, flush: 0, flushIfDue: 0, plainFlush: 0 };
    const invoke = (observer: NonNullable<Parameters<typeof rateLimit>[0]['observer']>, fail = false) =>
      middy<HttpEvent, Response>(async () => {
        if (fail) throw new Error('the handler failed');
        return { statusCode: 200, headers: {}, body: 'ok' };
      })
        .use(httpErrorHandler({ logger: false }))
        .use(rateLimit({ limiter, limits: [{ policy, key: clientIp }], observer }))(
        restEvent(),
        {} as Context,
      ) as Promise<Response>;
    const batching = {
      observe: () => void calls.observe++,
      flush: () => void calls.flush++,
      flushIfDue: () => void calls.flushIfDue++,
    };
    for (let i = 0; i < 3; i++) assert.equal((await invoke(batching)).statusCode, 200);
    assert.equal((await invoke(batching, true)).statusCode, 500);
    assert.deepEqual(calls, { observe: 4, flush: 0, flushIfDue: 4, plainFlush: 0 });
    // an observer that does not batch is still published at every invocation's end
    assert.equal((await invoke({ observe: () => {}, flush: () => void calls.plainFlush++ })).statusCode, 200);
    assert.equal(calls.plainFlush, 1);
  });

  it('puts no raw API key or email in any Redis key or log line', async () => {
    await connected(redis);
    const secretKey = `sk_live_${unique('secret')}`;
    const email = `${unique('alice')}@example.com`;
    const group = unique('g');
    const limiter = createLimiter({
      redis,
      policies: policies({
        [`${group}-key`]: { strategy: 'tokenBucket', capacity: 1, refill: { tokens: 1, every: '1 m' }, group },
        [`${group}-mail`]: { strategy: 'slidingWindow', limit: 1, window: '1 m', group },
      }),
    });
    const api = stack(
      limiter,
      [
        { policy: `${group}-key`, key: apiKeyHash({ pepper: () => 'test-pepper' }) },
        { policy: `${group}-mail`, key: emailHash({ pepper: () => 'test-pepper' }) },
      ],
      [],
      apiKeyHash({ pepper: () => 'test-pepper' }),
    );
    // Record every write and pass it on: in a test file's process, stdout also
    // carries the runner's own results, and swallowing them would hide tests.
    const written: string[] = [];
    const [out, err] = [process.stdout.write.bind(process.stdout), process.stderr.write.bind(process.stderr)];
    const recording =
      (write: typeof out) =>
      (chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
        written.push(String(chunk));
        return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
      };
    process.stdout.write = recording(out) as typeof process.stdout.write;
    process.stderr.write = recording(err) as typeof process.stderr.write;
    try {
      const event = () => restEvent({ headers: { 'x-api-key': secretKey }, body: { email } });
      assert.equal((await api.invoke(event())).statusCode, 200);
      assert.equal((await api.invoke(event())).statusCode, 429);
    } finally {
      process.stdout.write = out;
      process.stderr.write = err;
    }
    const keys = await redis.keys(`rl:{${group}:*`);
    assert.equal(keys.length, 2);
    for (const text of [...keys, ...written]) {
      assert.equal(text.includes(secretKey), false, text);
      assert.equal(text.includes(email), false, text);
      assert.equal(text.includes(email.split('@')[0] as string), false, text);
    }
  });
});
