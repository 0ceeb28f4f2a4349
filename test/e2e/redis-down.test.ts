/**
 * Every consumer with its Redis stopped: the fail-closed ones (login, the
 * webhooks) answer 503 with a short Retry-After, never a 200 or a 500; the
 * fail-open public API keeps answering. A private Redis, so stopping it
 * disturbs no other test.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { signSlackBody } from '../../functions/slack/signature.ts';
import { type RedisProcess, startRedis } from '../../scripts/redis-process.ts';
import { consumers, type TestPlatform } from '../support/consumers.ts';
import { call, loopbackAddress } from '../support/http.ts';

let redis: RedisProcess;
let platform: TestPlatform;
before(async () => {
  redis = await startRedis();
  platform = await consumers({ redisUrl: redis.url });
});
after(async () => {
  await platform.close();
  await redis.stop();
});

describe('Consumers with Redis stopped', () => {
  it('answer by their failure mode: login and webhooks 503, the API 200', async () => {
    // Prepare: everything answers while Redis runs
    const login = () =>
      call(platform.base, {
        method: 'POST',
        path: '/auth/login',
        from: loopbackAddress(),
        body: JSON.stringify({ email: 'alice@example.com', password: 'correct horse battery staple' }),
      });
    const api = () =>
      call(platform.base, {
        path: '/v1/whoami',
        from: loopbackAddress(),
        headers: { 'x-api-key': 'rk_localDemoStandardKeyNotASecret00' },
      });
    const body = JSON.stringify({
      type: 'event_callback',
      team_id: 'TDOWN',
      event_id: `Ev${Date.now()}`,
      event: { channel: 'C1' },
    });
    const slack = () =>
      call(platform.base, {
        method: 'POST',
        path: '/webhooks/slack',
        from: loopbackAddress(),
        body,
        headers: signSlackBody('local-only-slack-signing-secret', body),
      });
    const telegram = () =>
      call(platform.base, {
        method: 'POST',
        path: '/webhooks/telegram/demo',
        from: loopbackAddress(),
        body: JSON.stringify({ update_id: Date.now(), message: { chat: { id: 1 } } }),
        headers: { 'X-Telegram-Bot-Api-Secret-Token': 'local-only-telegram-secret-token' },
      });
    assert.equal((await login()).status, 200);
    assert.equal((await api()).status, 200);
    // Act
    await redis.stop();
    // Assess
    for (const [name, answer] of [
      ['login', await login()],
      ['slack', await slack()],
      ['telegram', await telegram()],
    ] as const) {
      assert.equal(answer.status, 503, `${name}: ${JSON.stringify(answer.headers)} ${answer.body}`);
      assert.equal(answer.headers['retry-after'], '1', name);
      assert.equal(answer.json().error, 'rate_limiter_unavailable', name);
    }
    const open = await api();
    assert.equal(open.status, 200);
    assert.deepEqual(open.json(), { owner: 'acme', role: 'standard' });
  });
});
