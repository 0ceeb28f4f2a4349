/**
 * A trusted login whose device check Redis runs but does not answer in time
 * (a slow shard, a failover): the attempt is answered 503 and its browser
 * retries as told, yet each of those checks may have counted it on the
 * device. The handler forgives each on the device after it (the same
 * connection, in order), so retries never revoke the device; and never out
 * of the device's wait, so a revoked device is not freed by a stalled check.
 * Real Redis behind a delaying proxy: the replies come later than the
 * device's 100 ms budget, the scripts still run.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createLimiter } from '@platform/rate-limit';
import { PolicyStore } from '@platform/rate-limit/config';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { FileCredentialStore, type Verification } from '../../functions/login/credentials.ts';
import { createPlatform, usePlatform } from '../../functions/shared/platform.ts';
import { type ProxiedNode, proxiedNode } from '../support/cut-after-run.ts';
import { deviceCookieSet, loginEvent } from '../support/login-event.ts';

const PREFIX = '/ratelimit/test-login-stall';
const USERS = new URL('../../config/local-users.json', import.meta.url).pathname;
const ALICE = { email: 'alice@example.com', password: 'correct horse battery staple' };
/** The IP windows wait longer than the proxy's delay (they are not what this file is about); the device does not. */
const PATIENT = { timeBudget: '3 s' };
const DELAY_MS = 300;

type Handler = (event: unknown, context: unknown) => Promise<APIGatewayProxyResult>;

/** The real local store, or (`down`) a directory that does not answer. */
const store = {
  down: false,
  inner: new FileCredentialStore(USERS),
  verify(email: string, password: string): Promise<Verification> {
    return this.down
      ? Promise.resolve({ outcome: 'unavailable', retryAfterMs: 1000 })
      : this.inner.verify(email, password);
  },
};
let handler: Handler;
let node: ProxiedNode;
const cleanups: (() => unknown)[] = [];

before(async () => {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  process.env.POWERTOOLS_LOG_LEVEL = 'ERROR';
  node = await proxiedNode({ after: (fn) => void cleanups.push(fn) });
  const defaults = {
    ...PLATFORM_POLICIES,
    'login-ip': { ...(PLATFORM_POLICIES['login-ip'] as object), ...PATIENT },
    'login-ip48': { ...(PLATFORM_POLICIES['login-ip48'] as object), ...PATIENT },
  };
  const policies = new PolicyStore({
    prefix: PREFIX,
    defaults,
    source: {
      fetchAll: async () => ({
        [`${PREFIX}/secrets/login/email-pepper`]: 'test-pepper',
        [`${PREFIX}/secrets/login/device-cookie-key`]: 'test-device-cookie-key',
      }),
    },
  });
  await policies.refresh();
  const limiter = createLimiter({ redis: node.redis, policies });
  usePlatform(createPlatform({ redis: node.redis, policies, limiter, ready: Promise.resolve() }));
  const login = await import('../../functions/login/handler.ts');
  login.useCredentials(store);
  handler = login.handler as unknown as Handler;
});
after(async () => {
  usePlatform(undefined);
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function attempt(from: string, who: { email: string; password: string }, cookie?: string) {
  const { event, context } = loginEvent(from, who, cookie);
  const response = await handler(event, context);
  return { status: response.statusCode, cookie: deviceCookieSet(response.headers) };
}

/** The device's failures as Redis holds them, once every command sent so far has run (a reply after them). */
async function deviceFailures(): Promise<number> {
  node.proxy.latencyMs = 0;
  await node.redis.ping(); // answered after every earlier command on the connection: they have all run
  let cursor = '0';
  const keys: string[] = [];
  do {
    const [next, found] = await node.admin.scan(cursor, 'MATCH', '*login-device*', 'COUNT', 1000);
    cursor = next;
    keys.push(...found);
  } while (cursor !== '0');
  assert.equal(keys.length, 1, `one device: ${keys.join(', ')}`);
  return Number((await node.admin.hget(keys[0] as string, 'n')) ?? 0);
}

/**
 * One trusted attempt through a directory outage, answered in time: the check's and the forgiveness's
 * scripts are then in this fresh server's cache. A stalled EVALSHA whose NOSCRIPT comes back past the
 * deadline is given up before ioredis sends the script itself, so on a cold cache the stalled check does
 * not run at all, which would prove nothing here.
 */
async function warmScripts(from: string, who: { email: string; password: string }, cookie: string): Promise<void> {
  store.down = true;
  assert.equal((await attempt(from, who, cookie)).status, 503);
  store.down = false;
}

describe('Login while Redis runs the device check but answers too late', () => {
  it("never revokes a device whose browser retries as told: each stalled check's count is forgiven", {
    timeout: 60_000,
  }, async () => {
    const cookie = (await attempt('198.51.100.7', ALICE)).cookie;
    assert.ok(cookie, 'signed in: a device cookie');
    await warmScripts('198.51.100.7', ALICE, cookie);
    node.proxy.latencyMs = DELAY_MS;
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) statuses.push((await attempt('198.51.100.7', ALICE, cookie)).status);
    assert.deepEqual([...new Set(statuses)], [503], 'each answered: try again');
    assert.equal(await deviceFailures(), 0, 'no stalled check left its count (10 would have revoked it)');
  });

  it('does not free a device already revoked: its stalled check counted on the account, not on it', {
    timeout: 60_000,
  }, async () => {
    // Prepare: alice's device from above forgotten, so bob's is the one device; revoked by ten failures
    const earlier = await node.admin.keys('*login-device*');
    if (earlier.length > 0) await node.admin.del(...earlier);
    const signedIn = await attempt('198.51.100.8', { email: 'bob@example.com', password: 'tr0ub4dor&3-but-longer' });
    assert.ok(signedIn.cookie, String(signedIn.status));
    await warmScripts('198.51.100.8', { email: 'bob@example.com', password: 'x' }, signedIn.cookie);
    const wrong = { email: 'bob@example.com', password: 'not-it' };
    for (let i = 0; i < 10; i++) assert.equal((await attempt('198.51.100.8', wrong, signedIn.cookie)).status, 401);
    assert.equal(await deviceFailures(), 10, 'revoked');
    // Act: its next attempt's check stalls (it runs, and falls to the account: the device waits)
    node.proxy.latencyMs = DELAY_MS;
    assert.equal((await attempt('198.51.100.8', wrong, signedIn.cookie)).status, 503);
    assert.equal(await deviceFailures(), 10, 'still revoked');
  });
});
