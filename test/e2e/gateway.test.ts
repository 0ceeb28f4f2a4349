/**
 * The local gateway: it serves exactly the route table, applies the outer
 * line before any handler, builds events a handler can always answer, and no
 * request, however malformed, gets a 5xx or a stack trace.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { routes } from '../../functions/routes.ts';
import { MAX_BODY_BYTES, OuterLineGate, startGateway, trustedProxyOf } from '../../scripts/gateway.ts';
import { consumers, type TestPlatform } from '../support/consumers.ts';
import { call, loopbackAddress } from '../support/http.ts';

/** The demo key of a partner (config/local-api-keys.json). */
const API_KEY = 'rk_localDemoPartnerKeyNotASecret000';

let platform: TestPlatform;

/** Sends a `bytes`-long POST body to the gateway over a raw socket until it answers; the status line and the time to it. */
function upload(port: number, bytes: number, framing: 'content-length' | 'chunked') {
  const started = performance.now();
  return new Promise<{ status: string; ms: number }>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let written = 0;
    let status = '';
    socket.on('data', (data) => {
      if (status) return;
      status = data.toString('latin1').split('\r\n')[0] as string;
      resolve({ status, ms: performance.now() - started });
    });
    socket.on('error', (error) => (status ? undefined : reject(error)));
    const length = framing === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${bytes}`;
    socket.write(`POST /webhooks/slack HTTP/1.1\r\nHost: localhost\r\n${length}\r\n\r\n`);
    const chunk = Buffer.alloc(64 * 1024, 0x7b);
    const framed =
      framing === 'chunked' ? Buffer.concat([Buffer.from('10000\r\n'), chunk, Buffer.from('\r\n')]) : chunk;
    const pump = () => {
      while (written < bytes && !status) {
        written += chunk.length;
        if (!socket.write(framed)) return void socket.once('drain', pump);
      }
    };
    pump();
  });
}

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

  it('reads prototype names in the query and the headers (__proto__, constructor, toString) as plain names', async () => {
    const names = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf'];
    for (const path of [
      '/v1/whoami',
      '/auth/login',
      '/webhooks/slack',
      '/webhooks/telegram/demo',
      '/v1/llm/complete',
    ]) {
      for (const name of names) {
        for (const query of [`?${name}=1`, `?${name}=1&${name}=2`, `?${name}`]) {
          const answer = await call(platform.base, {
            method: 'POST',
            path: `${path}${query}`,
            body: '{}',
            from: loopbackAddress(),
          });
          assert.ok(answer.status < 500, `${path}${query}: ${answer.status} ${answer.body}`);
        }
        // an own property named __proto__, as a client sends it (an object literal would set the prototype)
        const headers = Object.fromEntries([
          [name, '1'],
          ['x-api-key', 'rk_x'],
        ]) as Record<string, string>;
        const answer = await call(platform.base, {
          method: 'POST',
          path,
          headers,
          body: '{}',
          from: loopbackAddress(),
        });
        assert.ok(answer.status < 500, `${path} with header ${name}: ${answer.status} ${answer.body}`);
      }
    }
    const known = await call(platform.base, {
      path: '/v1/whoami?__proto__=1&constructor=x',
      headers: { 'x-api-key': API_KEY },
    });
    assert.equal(known.status, 200, 'the query names do not change what the route answers');
  });

  it('refuses a 64 MiB body with 413 without reading it: by its Content-Length, or at the byte past the limit', async (t) => {
    const gateway = await startGateway({
      outerLine: {
        stageThrottle: { rateLimit: 100, burstLimit: 100 },
        ipRateRule: { limit: 100, evaluationWindowSeconds: 60 },
      },
    });
    try {
      const port = Number(new URL(gateway.url).port);
      for (const framing of ['content-length', 'chunked'] as const) {
        // what the gateway read from the connection, known when it closes (the linger ends with a reset)
        const closed = new Promise<number>((resolve) =>
          gateway.server.once('connection', (socket) => socket.on('close', () => resolve(socket.bytesRead))),
        );
        const sent = await upload(port, 64 * 1024 * 1024, framing);
        assert.equal(sent.status, 'HTTP/1.1 413 Payload Too Large', framing);
        const read = await closed;
        // the limit, plus the reads already taken from the socket when the limit is crossed
        // (64 KiB each; measured 1.09-1.21 MB in all, chunked): never the 64 MiB
        assert.ok(read <= MAX_BODY_BYTES + 512 * 1024, `${framing}: ${read} bytes read of 64 MiB`);
        t.diagnostic(
          `${framing}: 413 after ${sent.ms.toFixed(1)} ms, ${read} bytes read by the gateway of 67108864 sent`,
        );
      }
    } finally {
      await gateway.close();
    }
  });

  it('believes X-Real-IP only from its dedicated proxy address, never from any local client', async () => {
    assert.throws(() => trustedProxyOf('127.0.0.1'), /every local client/);
    assert.throws(() => trustedProxyOf('::1'), /every local client/);
    assert.throws(() => trustedProxyOf('nginx'), /not an IP address/);
    assert.equal(trustedProxyOf(undefined), undefined);
    await assert.rejects(startGateway({ trustedProxy: '127.0.0.1' }), /every local client/);
    const gateway = await startGateway({
      trustedProxy: '127.0.0.2',
      outerLine: {
        stageThrottle: { rateLimit: 100, burstLimit: 100 },
        ipRateRule: { limit: 100, evaluationWindowSeconds: 60 },
      },
    });
    try {
      const login = (from: string, headers: Record<string, string> = {}) =>
        call(gateway.url, { method: 'POST', path: '/auth/login', from, headers, body: '{}' });
      const victim = loopbackAddress();
      // a local client on the default address (and any other but the proxy's) claims the victim's IP
      for (const from of ['127.0.0.1', loopbackAddress()]) {
        await login(from, { 'X-Real-IP': victim });
        await login(from, { 'X-Forwarded-For': victim });
      }
      assert.equal(
        (await login(victim)).headers.ratelimit,
        '"login-ip";r=19;t=900, "login-ip48";r=199;t=900',
        'the victim was never counted',
      );
      const client = loopbackAddress();
      assert.equal(
        (await login('127.0.0.2', { 'X-Real-IP': client })).headers.ratelimit,
        '"login-ip";r=19;t=900, "login-ip48";r=199;t=900',
        'the proxy is believed',
      );
      assert.equal(
        (await login(client)).headers.ratelimit,
        '"login-ip";r=18;t=900, "login-ip48";r=198;t=900',
        'counted as that client',
      );
    } finally {
      await gateway.close();
    }
  });

  it('believes X-Real-IP over its proxy unix socket (mode 0660), which no TCP client reaches', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-gw-'));
    const socketPath = join(dir, 'gateway.sock');
    const gateway = await startGateway({
      proxySocket: socketPath,
      outerLine: {
        stageThrottle: { rateLimit: 100, burstLimit: 100 },
        ipRateRule: { limit: 100, evaluationWindowSeconds: 60 },
      },
    });
    try {
      assert.equal(statSync(socketPath).mode & 0o777, 0o660);
      const client = loopbackAddress();
      const viaSocket = await new Promise<string>((resolve, reject) => {
        const req = httpRequest(
          {
            socketPath,
            method: 'POST',
            path: '/auth/login',
            headers: { 'X-Real-IP': client, 'content-length': 2, 'content-type': 'application/json' },
          },
          (res) => {
            res.resume();
            resolve(String(res.headers.ratelimit));
          },
        );
        req.on('error', reject);
        req.end('{}');
      });
      assert.equal(viaSocket, '"login-ip";r=19;t=900, "login-ip48";r=199;t=900', 'the proxy is believed');
      const login = (from: string, headers: Record<string, string> = {}) =>
        call(gateway.url, { method: 'POST', path: '/auth/login', from, headers, body: '{}' });
      assert.equal(
        (await login(client)).headers.ratelimit,
        '"login-ip";r=18;t=900, "login-ip48";r=198;t=900',
        'counted as that client',
      );
      const victim = loopbackAddress();
      await login('127.0.0.1', { 'X-Real-IP': victim });
      assert.equal(
        (await login(victim)).headers.ratelimit,
        '"login-ip";r=19;t=900, "login-ip48";r=199;t=900',
        'TCP clients are not believed',
      );
    } finally {
      await gateway.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('forgets an IP once its requests left the window: bounded state under many IPs', () => {
    const gate = new OuterLineGate({
      stageThrottle: { rateLimit: 1e9, burstLimit: 1e9 },
      ipRateRule: { limit: 100, evaluationWindowSeconds: 60 },
    });
    for (let i = 0; i < 50_000; i++)
      assert.equal(gate.refusal(`2001:db8::${i.toString(16)}`, undefined, 1000), undefined);
    assert.equal(gate.trackedIps, 50_000);
    assert.equal(gate.refusal('2001:db8::1', undefined, 1000 + 59_999), undefined, 'within the window: still counted');
    gate.refusal('198.51.100.7', undefined, 1000 + 60_000);
    assert.equal(gate.trackedIps, 2, 'only the IPs with a request within the window are kept');
    const throttled = new OuterLineGate({
      stageThrottle: { rateLimit: 1, burstLimit: 1 },
      ipRateRule: { limit: 100, evaluationWindowSeconds: 60 },
    });
    const at = performance.now(); // the stage bucket's own clock: it starts full
    for (let i = 0; i < 1000; i++) throttled.refusal(`2001:db8:1::${i.toString(16)}`, undefined, at);
    assert.equal(throttled.trackedIps, 1, 'a refused request leaves no state behind');
  });

  it('throttles the stage from its first request, whatever clock the caller passes: a time earlier than the last drains nothing', () => {
    // it used to start its clock at construction on performance.now(): a caller's smaller `now` (any test process
    // older than 2 s) drained the bucket
    const gate = new OuterLineGate({
      stageThrottle: { rateLimit: 1, burstLimit: 2 },
      ipRateRule: { limit: 100, evaluationWindowSeconds: 60 },
    });
    assert.equal(gate.refusal('192.0.2.1', undefined, 10_000), undefined, 'it starts full');
    assert.equal(gate.refusal('192.0.2.2', undefined, 5_000), undefined, 'an earlier time drains nothing');
    assert.equal(gate.refusal('192.0.2.3', undefined, 5_000), 'stage-throttle', 'the burst of 2 spent');
    assert.equal(gate.refusal('192.0.2.4', undefined, 11_000), undefined, 'a second after the last: one more');
  });

  it('answers API Gateway events whose headers, query and path parameters are named after prototype members with 4xx or 2xx, never 5xx', async () => {
    for (const route of routes) {
      const { handler } = (await import(new URL(`../../functions/${route.handler}`, import.meta.url).href)) as {
        handler: (event: unknown, context: unknown) => Promise<{ statusCode: number; body: string }>;
      };
      // as Lambda hands it over: parsed from JSON, so `__proto__` is an own property, not the prototype
      const names = (value: string) =>
        `{"__proto__":${value},"constructor":${value},"toString":${value},"hasOwnProperty":${value}}`;
      for (const [headers, path] of [
        [names('"1"'), names('"x"')],
        [
          `{"__proto__":{"x-api-key":"${API_KEY}"},"x-api-key":"${API_KEY}","constructor":"1"}`,
          '{"bot":"demo","proxy":"whoami","constructor":"x"}',
        ],
        [names('["1"]'), '{"__proto__":{"bot":"demo"}}'],
      ]) {
        const event = JSON.parse(`{
          "resource": "${route.path}", "path": "/", "httpMethod": "${route.methods[0]}",
          "headers": ${headers}, "multiValueHeaders": ${names('["1"]')},
          "queryStringParameters": ${names('"1"')}, "multiValueQueryStringParameters": ${names('["1"]')},
          "pathParameters": ${path}, "stageVariables": ${names('"1"')},
          "requestContext": { "identity": { "sourceIp": "${loopbackAddress()}" }, "requestId": "r1" },
          "body": "{}", "isBase64Encoded": false
        }`);
        const answer = await handler(event, { getRemainingTimeInMillis: () => 10_000 });
        assert.ok(answer.statusCode < 500, `${route.id}: ${answer.statusCode} ${answer.body}`);
        assert.doesNotMatch(answer.body, /TypeError|\bat .*\.ts:\d+/);
      }
    }
  });

  it('answers a handler called without a request context (not an API Gateway event) with 400, not a TypeError', async () => {
    for (const route of routes) {
      const { handler } = (await import(new URL(`../../functions/${route.handler}`, import.meta.url).href)) as {
        handler: (event: unknown, context: unknown) => Promise<{ statusCode: number; body: string }>;
      };
      const keyed = { headers: { 'x-api-key': API_KEY }, body: '{}' };
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
    // query strings whose names are Object.prototype's members (they once answered 500)
    const prototypeName = fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf');
    const query = fc.option(
      fc
        .array(fc.tuple(fc.oneof(prototypeName, fc.string({ maxLength: 8 })), fc.string({ maxLength: 8 })), {
          minLength: 1,
          maxLength: 4,
        })
        .map((pairs) => `?${pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&')}`),
      { nil: '' },
    );
    const headerName = fc.constantFrom(
      'x-api-key',
      'X-Slack-Signature',
      'X-Slack-Request-Timestamp',
      'X-Telegram-Bot-Api-Secret-Token',
      'content-type',
      'x-forwarded-for',
      '__proto__',
      'constructor',
      'toString',
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
      // nested deeper than any body bound (text: JSON.stringify itself would overflow)
      fc.integer({ min: 1, max: 100_000 }).map((depth) => `{"a":${'['.repeat(depth)}${']'.repeat(depth)}}`),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'),
        paths,
        query,
        fc.dictionary(headerName, headerValue, { maxKeys: 4 }),
        fc.option(body, { nil: undefined }),
        async (method, bare, search, headers, payload) => {
          const path = `${bare}${search}`;
          const answer = await call(platform.base, { method, path, headers, body: payload, from: loopbackAddress() });
          assert.ok(answer.status < 500, `${method} ${path}: ${answer.status} ${answer.body}`);
          assert.doesNotMatch(answer.body, /TypeError|ReferenceError|\bat .*\.ts:\d+/);
        },
      ),
      { numRuns: 300 },
    );
  });
});
