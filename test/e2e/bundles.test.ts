/**
 * The built Lambda bundles (npm run build) behind the local gateway
 * (`npm start -- --bundles`): each route's bundle, with the built layer as its
 * only `@platform/rate-limit`, answers the same events as the source does.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { signSlackBody } from '../../functions/slack/signature.ts';
import { buildAll } from '../../scripts/build.ts';
import { builtHandler } from '../../scripts/gateway.ts';
import { consumers, type TestPlatform } from '../support/consumers.ts';
import { call, loopbackAddress } from '../support/http.ts';

let platform: TestPlatform;
before(async () => {
  await buildAll();
  platform = await consumers({ gateway: { handlerModule: builtHandler } });
});
after(() => platform.close());

describe('The built bundles behind the gateway', () => {
  it('answer every route as the source does', async () => {
    const login = await call(platform.base, {
      method: 'POST',
      path: '/auth/login',
      from: loopbackAddress(),
      body: JSON.stringify({ email: 'alice@example.com', password: 'correct horse battery staple' }),
    });
    assert.equal(login.status, 200, login.body);
    assert.equal(login.headers.ratelimit, '"login-ip";r=19;t=900, "login-ip48";r=199;t=900');
    const api = await call(platform.base, {
      path: '/v1/whoami',
      from: loopbackAddress(),
      headers: { 'x-api-key': 'rk_localDemoPartnerKeyNotASecret000' },
    });
    assert.deepEqual(api.json(), { owner: 'globex', role: 'partner' });
    const body = JSON.stringify({ type: 'url_verification', challenge: 'built' });
    const slack = await call(platform.base, {
      method: 'POST',
      path: '/webhooks/slack',
      from: loopbackAddress(),
      body,
      headers: signSlackBody('local-only-slack-signing-secret', body),
    });
    assert.deepEqual(slack.json(), { challenge: 'built' });
    const telegram = await call(platform.base, {
      method: 'POST',
      path: '/webhooks/telegram/demo',
      from: loopbackAddress(),
      body: JSON.stringify({ update_id: Date.now(), message: { chat: { id: 5 } } }),
      headers: { 'X-Telegram-Bot-Api-Secret-Token': 'local-only-telegram-secret-token' },
    });
    assert.equal(telegram.status, 200, telegram.body);
  });
});
