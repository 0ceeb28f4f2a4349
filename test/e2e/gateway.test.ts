/**
 * The local gateway: it serves exactly the route table, applies the outer
 * line before any handler, builds events a handler can always answer, and no
 * request, however malformed, gets a 5xx or a stack trace.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { routes } from '../../functions/routes.ts';
import { startGateway } from '../../scripts/gateway.ts';
import { consumers, type TestPlatform } from '../support/consumers.ts';
import { call, loopbackAddress } from '../support/http.ts';

let platform: TestPlatform;
before(async () => {
  platform = await consumers();
});
after(() => platform.close());

describe('Local gateway', () => {
  it('serves exactly the routes of functions/routes.ts, and nothing else', async () => {
    const gateway = await startGateway({
      outerLine: {
        stageThrottle: { rateLimit: 100, burstLimit: 100 },
        ipRateRule: { limit: 100, evaluationWindowSeconds: 60 },
      },
    });
    try {
      assert.deepEqual(
        [...gateway.served].sort(),
        routes.flatMap((r) => r.methods.map((m) => `${m} ${r.path}`)).sort(),
      );
      assert.equal((await call(gateway.url, { path: '/admin' })).status, 404);
      assert.equal((await call(gateway.url, { path: '/auth/login' })).status, 405, 'GET on a POST route');
      // found by the fuzz below: '//' once crashed the gateway (new URL('//', base) names a host)
      assert.equal((await call(gateway.url, { path: '//' })).status, 404);
      assert.equal((await call(gateway.url, { method: 'POST', path: '/webhooks/telegram/%E0%A4%A' })).status, 400);
      assert.equal((await call(gateway.url, { path: '/admin' })).status, 404, 'still serving');
    } finally {
      await gateway.close();
    }
  });

  it('refuses a burst beyond the stage throttle, and an IP over the rate rule, before any handler runs', async () => {
    const seen: string[] = [];
    const gateway = await startGateway({
      outerLine: {
        stageThrottle: { rateLimit: 1, burstLimit: 5 },
        ipRateRule: { limit: 1000, evaluationWindowSeconds: 60 },
      },
      onRequest: (entry) => seen.push(entry.route),
    });
    try {
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => call(gateway.url, { path: '/v1/whoami', from: loopbackAddress() })),
      );
      const edge = answers.filter((a) => a.status === 429);
      assert.equal(edge.length, 15);
      for (const answer of edge) assert.deepEqual(answer.json(), { message: 'Too Many Requests' });
      assert.equal(seen.filter((r) => r === 'api').length, 5, 'only the throttle burst reached the handler');
      assert.equal(seen.filter((r) => r === 'edge:stage-throttle').length, 15);
    } finally {
      await gateway.close();
    }
    const perIp: string[] = [];
    const ruled = await startGateway({
      outerLine: {
        stageThrottle: { rateLimit: 1000, burstLimit: 1000 },
        ipRateRule: { limit: 3, evaluationWindowSeconds: 60 },
      },
      onRequest: (entry) => perIp.push(entry.route),
    });
    try {
      const from = loopbackAddress();
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await call(ruled.url, { path: '/v1/items', from })).status);
      assert.deepEqual(statuses, [401, 401, 401, 429]);
      assert.equal(
        (await call(ruled.url, { path: '/v1/items', from: loopbackAddress() })).status,
        401,
        'another IP passes',
      );
      assert.ok(perIp.includes('edge:ip-rate-rule'));
    } finally {
      await ruled.close();
    }
  });

  it('gives a route with a throttle of its own its own bucket: a flood on the API leaves the webhooks theirs', async () => {
    const seen: string[] = [];
    const gateway = await startGateway({
      outerLine: {
        stageThrottle: { rateLimit: 1000, burstLimit: 1000 },
        routeThrottles: { api: { rateLimit: 1, burstLimit: 5 }, slack: { rateLimit: 1, burstLimit: 5 } },
        ipRateRule: { limit: 1000, evaluationWindowSeconds: 60 },
      },
      onRequest: (entry) => seen.push(entry.route),
    });
    try {
      const flood = await Promise.all(
        Array.from({ length: 20 }, () => call(gateway.url, { path: '/v1/whoami', from: loopbackAddress() })),
      );
      assert.equal(flood.filter((a) => a.status === 429).length, 15, 'the API route: its burst of 5 only');
      assert.equal(seen.filter((r) => r === 'edge:route-throttle').length, 15);
      const slack = await call(gateway.url, {
        method: 'POST',
        path: '/webhooks/slack',
        from: loopbackAddress(),
        body: '{}',
      });
      assert.equal(slack.status, 401, 'Slack reaches its handler (unsigned: 401), not the API flood');
      const login = await call(gateway.url, {
        method: 'POST',
        path: '/auth/login',
        from: loopbackAddress(),
        body: '{}',
      });
      assert.notEqual(login.status, 429, 'a route without its own throttle draws from the stage');
    } finally {
      await gateway.close();
    }
  });

  it('takes the client IP from the socket, not from an X-Real-IP or X-Forwarded-For the client sent', async () => {
    const [from, claimed] = [loopbackAddress(), loopbackAddress()];
    const login = (headers: Record<string, string>) =>
      call(platform.base, { method: 'POST', path: '/auth/login', from, headers, body: '{}' });
    assert.equal(
      (await login({ 'X-Real-IP': claimed })).headers.ratelimit,
      '"login-ip";r=19;t=900, "login-ip48";r=199;t=900',
    );
    assert.equal(
      (await login({ 'X-Forwarded-For': claimed })).headers.ratelimit,
      '"login-ip";r=18;t=900, "login-ip48";r=198;t=900',
    );
    const other = await call(platform.base, { method: 'POST', path: '/auth/login', from: claimed, body: '{}' });
    assert.equal(
      other.headers.ratelimit,
      '"login-ip";r=19;t=900, "login-ip48";r=199;t=900',
      'the claimed address was never counted',
    );
  });

  it('answers a handler called without a request context (not an API Gateway event) with 400, not a TypeError', async () => {
    for (const route of routes) {
      const { handler } = (await import(new URL(`../../functions/${route.handler}`, import.meta.url).href)) as {
        handler: (event: unknown, context: unknown) => Promise<{ statusCode: number; body: string }>;
      };
      const keyed = { headers: { 'x-api-key': 'demo-partner-key' }, body: '{}' };
      for (const event of [{}, { body: '{}', headers: {} }, { requestContext: null }, keyed]) {
        const answer = await handler(event, {});
        assert.ok(
          answer.statusCode >= 400 && answer.statusCode < 500,
          `${route.id}: ${answer.statusCode} ${answer.body}`,
        );
        assert.doesNotMatch(answer.body, /TypeError|\bat .*\.ts:\d+/);
      }
    }
  });

  it('never answers 5xx or a stack trace, whatever method, path, headers and body arrive', async () => {
    const paths = fc.oneof(
      fc.constantFrom(
        '/auth/login',
        '/v1/whoami',
        '/v1/items',
        '/v1/llm/complete',
        '/webhooks/slack',
        '/webhooks/telegram/demo',
        '/',
      ),
      fc.webPath(),
      fc.string().map((s) => `/v1/${encodeURIComponent(s)}`),
      fc.string().map((s) => `/webhooks/telegram/${encodeURIComponent(s)}`),
    );
    const headerName = fc.constantFrom(
      'x-api-key',
      'X-Slack-Signature',
      'X-Slack-Request-Timestamp',
      'X-Telegram-Bot-Api-Secret-Token',
      'content-type',
      'x-forwarded-for',
    );
    const headerValue = fc.string({ maxLength: 40 }).map((s) => s.replace(/[^\x20-\x7e]/g, ''));
    const body = fc.oneof(
      fc.string({ maxLength: 300 }),
      fc.json(),
      fc.record({ email: fc.string(), password: fc.string() }).map((b) => JSON.stringify(b)),
      fc
        .record({
          type: fc.constantFrom('event_callback', 'url_verification'),
          team_id: fc.anything(),
          event_id: fc.anything(),
          event: fc.anything(),
        })
        .map((b) => JSON.stringify(b)),
      fc.record({ update_id: fc.anything(), message: fc.anything() }).map((b) => JSON.stringify(b)),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'),
        paths,
        fc.dictionary(headerName, headerValue, { maxKeys: 4 }),
        fc.option(body, { nil: undefined }),
        async (method, path, headers, payload) => {
          const answer = await call(platform.base, { method, path, headers, body: payload, from: loopbackAddress() });
          assert.ok(answer.status < 500, `${method} ${path}: ${answer.status} ${answer.body}`);
          assert.doesNotMatch(answer.body, /TypeError|ReferenceError|\bat .*\.ts:\d+/);
        },
      ),
      { numRuns: 300 },
    );
  });
});
