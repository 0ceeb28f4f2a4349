/**
 * What the middleware answers to bad input and bad configuration: a caller's
 * mistake is a 400 with a reason, a misconfiguration is answered by the
 * failure mode and reported once, and no event, however malformed, gets a 500.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import middy from '@middy/core';
import httpErrorHandler from '@middy/http-error-handler';
import type { Limiter } from '@platform/rate-limit';
import { createLimiter, type DegradedEvent, enforce } from '@platform/rate-limit';
import {
  apiKeyHash,
  bodyField,
  clientIp,
  emailHash,
  type HttpEvent,
  jsonBody,
  type RouteLimit,
  rateLimit,
} from '@platform/rate-limit/middleware';
import type { Context } from 'aws-lambda';
import fc from 'fast-check';
import { restEvent } from '../support/events.ts';
import { policies, targets, unique } from '../support/targets.ts';

type Response = { statusCode: number; headers?: Record<string, string>; body: string };

function stack(limiter: Limiter, limits: RouteLimit[], scope?: RouteLimit['key']) {
  let handled = 0;
  const handler = middy<HttpEvent, Response>(async () => {
    handled++;
    return { statusCode: 200, body: 'ok' };
  })
    .use(httpErrorHandler({ logger: false }))
    .use(rateLimit({ limiter, limits, ...(scope ? { scope } : {}) }));
  return {
    invoke: (event: unknown) => handler(event as HttpEvent, {} as Context) as Promise<Response>,
    handled: () => handled,
  };
}

const costFromBody = (event: HttpEvent) => (jsonBody(event) as { cost?: number } | undefined)?.cost ?? 1;

describe('rateLimit middleware, bad input', () => {
  const redis = targets[0]?.client() ?? assert.fail();
  after(() => redis.disconnect());
  const name = unique('in');
  const catalogue = policies({ [name]: { strategy: 'slidingWindow', limit: 5, window: '1 m' } });

  it('answers 400 with a reason for a cost of 0, 1.5 or above the limit', async () => {
    const limiter = createLimiter({ redis, policies: catalogue });
    const api = stack(limiter, [{ policy: name, key: clientIp, cost: costFromBody }]);
    for (const cost of [0, 1.5, 6, -1, '2']) {
      const response = await api.invoke(restEvent({ body: { cost } }));
      assert.equal(response.statusCode, 400, `cost ${cost}`);
      assert.deepEqual(JSON.parse(response.body), {
        error: 'rate_limit_bad_request',
        message: `cost must be a whole number from 1 to 5 for policy "${name}"`,
      });
    }
    assert.equal(api.handled(), 0);
    assert.equal((await api.invoke(restEvent({ body: { cost: 5 } }))).statusCode, 200);
  });

  it('answers 400, not a TypeError, for an event without a request context', async () => {
    const limiter = createLimiter({ redis, policies: catalogue });
    const api = stack(limiter, [{ policy: name, key: clientIp }]);
    for (const event of [{}, { requestContext: null }, { requestContext: { identity: null } }, null]) {
      const response = await api.invoke(event);
      assert.equal(response.statusCode, 400, JSON.stringify(event));
      assert.equal(JSON.parse(response.body).message, 'the request has no client IP');
    }
  });

  it('answers an unknown policy by the failure mode (503, fail-closed by default) and reports it once', async () => {
    const reported: DegradedEvent[] = [];
    const limiter = createLimiter({ redis, policies: catalogue, onDegraded: (e) => reported.push(e) });
    const api = stack(limiter, [{ policy: 'no-such-policy', key: clientIp }]);
    for (let i = 0; i < 3; i++) {
      const response = await api.invoke(restEvent());
      assert.equal(response.statusCode, 503);
      assert.equal(JSON.parse(response.body).error, 'rate_limiter_unavailable');
    }
    assert.equal(reported.length, 1);
    assert.equal(reported[0]?.reason, 'misconfigured');
    assert.match(reported[0]?.detail ?? '', /unknown rate-limit policy "no-such-policy"/);
  });

  it('answers a missing secret of a key extractor by the failure mode of the route policy', async () => {
    const open = unique('open');
    const limiter = createLimiter({
      redis,
      policies: policies({ [open]: { strategy: 'slidingWindow', limit: 5, window: '1 m', failureMode: 'open' } }),
      onDegraded: () => {},
    });
    const api = stack(limiter, [{ policy: open, key: emailHash({ pepper: () => undefined }) }]);
    assert.equal((await api.invoke(restEvent({ body: { email: 'a@example.com' } }))).statusCode, 200);
  });

  it('gives enforce() without limits a fail-closed verdict, not a TypeError', async () => {
    const limiter = createLimiter({ redis, policies: catalogue, onDegraded: () => {} });
    const verdict = await enforce(limiter, []);
    assert.equal(verdict.outcome, 'degraded-closed');
    assert.equal(verdict.proceed, false);
  });

  it('resolves each policy of a request once, shadow and enforced alike', async () => {
    const group = unique('once');
    const catalogue = policies({
      [`${group}-a`]: { strategy: 'slidingWindow', limit: 5, window: '1 m', group },
      [`${group}-b`]: { strategy: 'slidingWindow', limit: 5, window: '1 m', group, shadow: true },
    });
    const resolved: string[] = [];
    const limiter = createLimiter({
      redis,
      policies: {
        resolve: (policy) => {
          resolved.push(policy);
          return catalogue.resolve(policy);
        },
      },
    });
    const verdict = await enforce(
      limiter,
      [
        { policy: `${group}-a`, key: 'k' },
        { policy: `${group}-b`, key: 'k' },
      ],
      { scope: 'k' },
    );
    assert.equal(verdict.outcome, 'allowed');
    assert.deepEqual(resolved, [`${group}-a`, `${group}-b`]);
  });

  it('never answers 500 or a stack trace, whatever the event holds', async () => {
    const group = unique('fz');
    const limiter = createLimiter({
      redis,
      policies: policies({
        [`${group}-ip`]: { strategy: 'slidingWindow', limit: 1000, window: '1 m', group },
        [`${group}-key`]: { strategy: 'tokenBucket', capacity: 50, refill: { tokens: 1, every: '1 s' }, group },
        [`${group}-team`]: { strategy: 'slidingWindow', limit: 1000, window: '1 m', group },
      }),
      onDegraded: () => {},
    });
    const api = stack(
      limiter,
      [
        { policy: `${group}-ip`, key: clientIp },
        { policy: `${group}-key`, key: apiKeyHash({ pepper: () => 'test-pepper' }), cost: costFromBody },
        { policy: `${group}-team`, key: bodyField('team.id') },
      ],
      clientIp,
    );
    const ip = fc.oneof(fc.ipV4(), fc.ipV6(), fc.string(), fc.anything());
    const event = fc.oneof(
      fc.anything(),
      fc.record(
        {
          requestContext: fc.oneof(
            fc.anything(),
            fc.record({ identity: fc.oneof(fc.anything(), fc.record({ sourceIp: ip })) }),
            fc.record({ http: fc.oneof(fc.anything(), fc.record({ sourceIp: ip })) }),
          ),
          headers: fc.oneof(
            fc.anything(),
            fc.dictionary(
              // with the names of Object.prototype's members, as own properties (JSON-parsed events have them)
              fc.constantFrom('x-api-key', 'X-Api-Key', 'origin', 'x', '__proto__', 'constructor', 'toString'),
              fc.oneof(fc.string(), fc.anything()),
            ),
          ),
          body: fc.oneof(
            fc.string(),
            fc.json(),
            fc.anything(),
            fc
              .record({ cost: fc.anything(), team: fc.oneof(fc.anything(), fc.record({ id: fc.anything() })) })
              .map((b) => JSON.stringify(b)),
            fc.constant('{"__proto__":{"id":"x"},"team":{"__proto__":{"id":"y"},"constructor":1},"toString":2}'),
            // deep past any walk's stack (as text: JSON.stringify would overflow)
            fc.integer({ min: 1, max: 100_000 }).map((depth) => `{"team":${'['.repeat(depth)}${']'.repeat(depth)}}`),
          ),
          isBase64Encoded: fc.anything(),
        },
        { requiredKeys: [] },
      ),
    );
    await fc.assert(
      fc.asyncProperty(event, async (e) => {
        const response = await api.invoke(e);
        assert.ok([200, 400, 429, 503].includes(response.statusCode), `status ${response.statusCode}`);
        assert.doesNotMatch(String(response.body), /\bat .*\.ts:\d+|TypeError|Error:/);
      }),
      { numRuns: 500 },
    );
  });
});
