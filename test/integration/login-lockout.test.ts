/**
 * The login handler in this process, the shipped policies (config/policies.json),
 * real Redis (the cluster: production's shape) and the test-only pinned clock,
 * so an attack of hours runs at the policies' real pace without sleeping.
 * Passwords are verified by the real local store (scrypt), counted.
 *
 * What it shows (docs/consumers.md, "Login: what an attacker can do"):
 * - an attacker without the victim's device can hold the account-wide delay
 *   at its 5-minute cap, which delays only new devices;
 * - a returning victim (device cookie from an earlier login) with the right
 *   password from its own IP is admitted at its first try, during the attack;
 * - a success clears nothing (two round trips on every path): after an
 *   untrusted success the account's delay stays, and the browser it logged
 *   in is admitted at once on its new cookie;
 * - forged, foreign and revoked cookies are untrusted attempts;
 * - 40 concurrent guesses verify at most the attempts the backoff leaves free.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PolicyStore } from '@platform/rate-limit/config';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import type { CredentialStore, Verification } from '../../functions/login/credentials.ts';
import { FileCredentialStore } from '../../functions/login/credentials.ts';
import { createPlatform, usePlatform } from '../../functions/shared/platform.ts';
import { deviceCookieSet, loginEvent } from '../support/login-event.ts';
import { countingCommands, pinnedLimiter, type TestClock, targets } from '../support/targets.ts';

const PREFIX = '/ratelimit/test-login';
const USERS = new URL('../../config/local-users.json', import.meta.url).pathname;
const ALICE = { email: 'alice@example.com', password: 'correct horse battery staple' };
const BOB = { email: 'bob@example.com', password: 'tr0ub4dor&3-but-longer' };
const S = 1_000_000; // µs

/** The real store, counting how many passwords it verified. */
class CountingStore implements CredentialStore {
  verified = 0;
  readonly #inner = new FileCredentialStore(USERS);
  verify(email: string, password: string): Promise<Verification> {
    this.verified++;
    return this.#inner.verify(email, password);
  }
}

const target = targets.find((t) => t.name === 'cluster') ?? (targets[0] as (typeof targets)[number]);
const redis = target.client();
/** Commands the limiter sends (each its own round trip): scripts, and the DEL a clear would send. */
const counting = countingCommands(redis, ['evalsha', 'eval', 'del']);
const clock: TestClock = { nowUs: 1_900_000_000 * S };
const store = new CountingStore();
type Handler = (event: unknown, context: unknown) => Promise<APIGatewayProxyResult>;
let handler: Handler;
let loginModule: typeof import('../../functions/login/handler.ts');
const rejecting: CredentialStore = { verify: async () => ({ outcome: 'rejected' }) };

before(async () => {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  process.env.POWERTOOLS_LOG_LEVEL = 'ERROR';
  const policies = new PolicyStore({
    prefix: PREFIX,
    defaults: PLATFORM_POLICIES,
    source: {
      fetchAll: async () => ({
        [`${PREFIX}/secrets/login/email-pepper`]: 'test-pepper',
        [`${PREFIX}/secrets/login/device-cookie-key`]: 'test-device-cookie-key',
      }),
    },
  });
  await policies.refresh();
  const limiter = pinnedLimiter({ redis: counting.client, policies }, clock);
  usePlatform(createPlatform({ redis, policies, limiter }));
  loginModule = await import('../../functions/login/handler.ts');
  loginModule.useCredentials(store);
  handler = loginModule.handler as unknown as Handler;
});
after(() => {
  usePlatform(undefined);
  redis.disconnect();
});

interface Attempt {
  readonly status: number;
  readonly policy?: string;
  readonly retryAfterS: number;
  readonly cookie?: string;
  readonly body: string;
}

async function attempt(from: string, who: { email: string; password: string }, cookie?: string): Promise<Attempt> {
  const { event, context } = loginEvent(from, who, cookie);
  const response = await handler(event, context);
  const body = JSON.parse(response.body) as { policy?: string };
  const headers = (response.headers ?? {}) as Record<string, string>;
  const set = deviceCookieSet(headers);
  return {
    status: response.statusCode,
    ...(body.policy ? { policy: body.policy } : {}),
    retryAfterS: Number(headers['Retry-After'] ?? 0),
    ...(set ? { cookie: set } : {}),
    body: response.body,
  };
}

/** A fresh account-sized scenario: the clock moves on far enough that every earlier window and backoff is forgotten. */
function freshWindow(): void {
  clock.nowUs += 8 * 24 * 3600 * S;
}

/** A logged-in victim's device: its cookie from a successful login at its own IP. */
async function returningDevice(from: string, who = ALICE): Promise<string> {
  const login = await attempt(from, who);
  assert.equal(login.status, 200, login.body);
  assert.ok(login.cookie);
  return login.cookie;
}

/**
 * An attacker pushes the account's backoff up with 8 guesses (from
 * 203.0.113.<first>…), then the returning victim's device is admitted at once.
 */
async function admittedDespiteAttack(victimIp: string, cookie: string, first: number): Promise<void> {
  for (let i = 0; i < 8; i++) {
    await attempt(`203.0.113.${first + i}`, { email: ALICE.email, password: `guess-${i}` });
    clock.nowUs += 1000;
  }
  const back = await attempt(victimIp, ALICE, cookie);
  assert.equal(back.status, 200, back.body);
}

/**
 * An attacker guessing the victim's password from `ips` in turn, as fast as
 * the limits let it, for `durationS`; `onTick` runs every `everyS` of
 * simulated time (the victim's tries). Returns the guesses verified.
 */
async function attack(
  ips: readonly string[],
  durationS: number,
  victim?: { everyS: number; onTick: () => Promise<void> },
): Promise<{ verified: number; refusedBy: Set<string> }> {
  const end = clock.nowUs + durationS * S;
  let verified = 0;
  const refusedBy = new Set<string>();
  let nextVictim = clock.nowUs + (victim?.everyS ?? 0) * S;
  let i = 0;
  let nextAttackUs = clock.nowUs;
  while (clock.nowUs < end) {
    if (victim && nextVictim <= nextAttackUs) {
      clock.nowUs = Math.max(clock.nowUs, nextVictim);
      await victim.onTick();
      nextVictim += victim.everyS * S;
      continue;
    }
    clock.nowUs = Math.max(clock.nowUs, nextAttackUs);
    const guess = await attempt(ips[i++ % ips.length] as string, { email: ALICE.email, password: `guess-${i}` });
    assert.notEqual(guess.status, 200);
    if (guess.status === 429) {
      refusedBy.add(guess.policy as string);
      nextAttackUs = clock.nowUs + guess.retryAfterS * S; // waits exactly what it is told
    } else {
      assert.equal(guess.status, 401);
      verified++;
      nextAttackUs = clock.nowUs + 1000; // the next guess right away
    }
  }
  return { verified, refusedBy };
}

describe('Login lockout: an attacker delays new devices, never a returning one', () => {
  it('an attacker at the real pace from one IP verifies ≤ 25 guesses an hour, the returning victim is admitted at its first try every time', async () => {
    freshWindow();
    const victimIp = '198.51.100.7';
    let cookie = await returningDevice(victimIp);
    const tries: number[] = [];
    const { verified, refusedBy } = await attack(['203.0.113.5'], 3600, {
      everyS: 7 * 60 + 3,
      onTick: async () => {
        let n = 0;
        for (;;) {
          n++;
          const login = await attempt(victimIp, ALICE, cookie);
          if (login.status === 200) {
            cookie = login.cookie as string;
            break;
          }
          assert.ok(n < 5, `victim refused ${n} times: ${login.body}`);
        }
        tries.push(n);
      },
    });
    // 4 attempts without a wait, 9 more waiting 1 s … 256 s (511 s), then one per 5 minutes
    assert.ok(verified <= 25, `verified ${verified}`);
    assert.ok(verified >= 20, `the attacker did guess at the pace the policy allows (${verified})`);
    assert.ok(refusedBy.has('login-account'));
    assert.equal(tries.length, 8);
    assert.deepEqual(new Set(tries), new Set([1]), 'admitted at the first try, every time');
    console.log(`# one IP, 1 h: ${verified} guesses verified; victim tries per login: ${tries.join(',')}`);
  });

  it('from 12 IPs (IPv4 and IPv6 of different /48s) the attacker gets no more guesses, and the victim still gets in at once', async () => {
    freshWindow();
    const ips = [
      ...Array.from({ length: 6 }, (_, i) => `192.0.2.${10 + i}`),
      ...Array.from({ length: 6 }, (_, i) => `2001:db8:${(i + 1).toString(16)}::1`),
    ];
    const victimIp = '2001:db8:ff:1::42';
    let cookie = await returningDevice(victimIp);
    const tries: number[] = [];
    const { verified } = await attack(ips, 3600, {
      everyS: 11 * 60,
      onTick: async () => {
        const login = await attempt(victimIp, ALICE, cookie);
        assert.equal(login.status, 200, login.body);
        cookie = login.cookie as string;
        tries.push(1);
      },
    });
    assert.ok(verified <= 25, `verified ${verified}`);
    assert.ok(tries.length >= 5);
    console.log(
      `# 12 IPs, 1 h: ${verified} guesses verified; victim admitted ${tries.length}/${tries.length} at the first try`,
    );
  });

  it('a new device during the attack is delayed by the account-wide backoff (≤ 5 minutes a try), and admitted once it is its turn', async () => {
    freshWindow();
    await attack(['203.0.113.9'], 1800);
    const newDevice = '198.51.100.99';
    const delayed = await attempt(newDevice, ALICE);
    assert.equal(delayed.status, 429);
    assert.equal(delayed.policy, 'login-account');
    assert.ok(delayed.retryAfterS > 0 && delayed.retryAfterS <= 300, `Retry-After ${delayed.retryAfterS}`);
    clock.nowUs += delayed.retryAfterS * S;
    const admitted = await attempt(newDevice, ALICE);
    assert.equal(admitted.status, 200, 'first after the wait: the right password gets in');
  });

  it('an untrusted success clears nothing: the delay the attacker pushed up stays on the account, and the browser it logged in is admitted at once on its new cookie', async () => {
    freshWindow();
    await attack(['203.0.113.10'], 1800);
    const newDevice = '198.51.100.98';
    const delayed = await attempt(newDevice, ALICE);
    assert.equal(delayed.status, 429);
    clock.nowUs += delayed.retryAfterS * S;
    const success = await attempt(newDevice, ALICE); // no cookie: the account's backoff admitted and counted it
    assert.equal(success.status, 200);
    assert.ok(success.cookie);
    const other = await attempt('198.51.100.97', ALICE);
    assert.equal(other.status, 429, 'another new device still waits: the success did not clear the account');
    assert.equal(other.policy, 'login-account');
    assert.ok(other.retryAfterS >= 60, `the attacker's delay, not a fresh one (Retry-After ${other.retryAfterS})`);
    // the attacker keeps the account at its cap; the logged-in browser comes back on its cookie, at once each time
    let cookie = success.cookie;
    const { refusedBy } = await attack(['203.0.113.10'], 1800, {
      everyS: 5 * 60 + 7,
      onTick: async () => {
        const again = await attempt(newDevice, ALICE, cookie);
        assert.equal(again.status, 200, again.body);
        cookie = again.cookie as string;
      },
    });
    assert.ok(refusedBy.has('login-account'), 'the account stayed in its backoff all along');
  });

  it('a returning victim retrying through a directory outage as told keeps its device: the attacker still cannot delay it', async (t) => {
    freshWindow();
    const victimIp = '198.51.100.70';
    const cookie = await returningDevice(victimIp);
    clock.nowUs += 20 * 60 * S; // the login's own counted attempt forgotten by the account
    // Act: the directory is down (throttled by a flood, say); the browser retries every second, as told, 12 times
    loginModule.useCredentials({ verify: async () => ({ outcome: 'unavailable', retryAfterMs: 1000 }) });
    t.after(() => loginModule.useCredentials(store));
    for (let i = 0; i < 12; i++) {
      const retry = await attempt(victimIp, ALICE, cookie);
      assert.equal(retry.status, 503, retry.body);
      assert.equal(retry.retryAfterS, 1);
      clock.nowUs += S;
    }
    loginModule.useCredentials(store);
    // Assess: the device was not revoked by the outage, so its own backoff decides
    await admittedDespiteAttack(victimIp, cookie, 20);
  });

  it("a returning victim refused by the directory's own lockout (an attacker keeps it engaged) keeps its device, told to wait; an untrusted attempt hears a wrong password", async (t) => {
    freshWindow();
    const victimIp = '198.51.100.71';
    const cookie = await returningDevice(victimIp);
    clock.nowUs += 20 * 60 * S; // the login's own counted attempt forgotten by the account
    // Act: Cognito holds the account locked (5 failures by someone) while the victim tries, every 10 minutes, 12 times
    loginModule.useCredentials({ verify: async () => ({ outcome: 'locked' }) });
    t.after(() => loginModule.useCredentials(store));
    for (let i = 0; i < 12; i++) {
      const held = await attempt(victimIp, ALICE, cookie);
      assert.equal(held.status, 429, held.body);
      assert.equal(JSON.parse(held.body).error, 'directory_lockout');
      assert.equal(JSON.parse(held.body).retryAfterSeconds, loginModule.DIRECTORY_LOCKOUT_RETRY_S, 'as in any 429');
      assert.equal(held.retryAfterS, loginModule.DIRECTORY_LOCKOUT_RETRY_S);
      clock.nowUs += 10 * 60 * S;
    }
    const untrusted = await attempt('203.0.113.40', ALICE);
    assert.equal(
      untrusted.status,
      401,
      'no cookie: the same answer as a wrong password (no account, no password told)',
    );
    loginModule.useCredentials(store);
    // Assess: not revoked (12 answers would have been past its 10 failures), so its own backoff decides
    await admittedDespiteAttack(victimIp, cookie, 50);
  });

  it('forged, foreign (another account) and revoked cookies are untrusted attempts', async () => {
    freshWindow();
    const victimIp = '198.51.100.20';
    const aliceCookie = await returningDevice(victimIp);
    const bobCookie = await returningDevice('198.51.100.21', BOB);
    await attack(['203.0.113.20'], 900); // the account is in its backoff now
    const [id, issued] = aliceCookie.split('.').slice(1, 3);
    const forged = `v1.${id}.${issued}.${'A'.repeat(43)}`;
    for (const [what, cookie] of [
      ['forged', forged],
      ['foreign', bobCookie],
      ['garbage', 'x'.repeat(500)],
    ] as const) {
      const answer = await attempt(victimIp, ALICE, cookie);
      assert.equal(answer.status, 429, what);
      assert.equal(answer.policy, 'login-account', what);
    }

    // a stolen cookie: 10 wrong guesses through it, then it is revoked
    const thief = '203.0.113.21';
    let throughDevice = 0;
    for (let i = 0; i < 12; i++) {
      const guess = await attempt(thief, { email: ALICE.email, password: `stolen-${i}` }, aliceCookie);
      if (guess.status === 401) throughDevice++;
      else assert.equal(guess.policy, 'login-account', 'revoked: the account-wide delay again');
      clock.nowUs += 2 * S;
    }
    assert.equal(throughDevice, 10, 'the device backoff admits 10 failures, then revokes the cookie');
    const victim = await attempt(victimIp, ALICE, aliceCookie);
    assert.equal(victim.status, 429, 'the revoked cookie is untrusted for its owner too');
    assert.equal(victim.policy, 'login-account');
  });

  it('no enumeration: an unknown account answers as a known one, with or without a cookie', async () => {
    freshWindow();
    const cookie = await returningDevice('198.51.100.30');
    const visible = (a: Attempt) => ({ status: a.status, policy: a.policy, retryAfterS: a.retryAfterS, body: a.body });
    for (let i = 0; i < 6; i++) {
      const known = await attempt('198.51.100.31', { email: 'bob@example.com', password: 'wrong' }, cookie);
      const unknown = await attempt('198.51.100.32', { email: 'nobody@example.com', password: 'wrong' }, cookie);
      assert.deepEqual(visible(known), visible(unknown));
    }
  });
});

describe('Login: attempts are counted before they are verified', () => {
  it('40 concurrent guesses from 2 IPs, the right one 38th: 4 verified (3 free failures and the 4th that starts the wait), the right one refused until the backoff allows it', async () => {
    freshWindow();
    const ips = ['192.0.2.200', '2001:db8:beef::1'];
    const before = store.verified;
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        attempt(ips[i % 2] as string, i === 37 ? ALICE : { email: ALICE.email, password: `wrong-${i}` }),
      ),
    );
    const verified = store.verified - before;
    const statuses = answers.map((a) => a.status);
    assert.equal(verified, 4, `verified ${verified}`);
    assert.equal(statuses.filter((s) => s === 429).length, 36);
    assert.ok(answers.filter((a) => a.status === 429).every((a) => a.policy === 'login-account'));
    console.log(`# 40 concurrent guesses: ${verified} verified`);
    // each connection answers in order: the 38th is behind 18 guesses of its own IP, past the 4 admitted
    assert.equal(answers[37]?.status, 429, 'the right password, 38th, is refused: the backoff has no room for it');
    const owner = '192.0.2.201'; // the two IPs spent their windows (20 each) on the burst
    const early = await attempt(owner, ALICE);
    assert.equal(early.status, 429, 'the right password is refused inside the wait');
    assert.equal(early.policy, 'login-account');
    clock.nowUs += early.retryAfterS * S - 1_000_000;
    assert.equal((await attempt(owner, ALICE)).status, 429, 'a second before its Retry-After: still refused');
    clock.nowUs += 1_000_000;
    assert.equal((await attempt(owner, ALICE)).status, 200, 'and admitted once it has passed');
  });
});

describe('Login: Redis round trips per attempt', () => {
  it('2 on every path: a refused or failed attempt, a success with or without a device cookie, a challenge, an outage, a revoked cookie', async (t) => {
    freshWindow();
    const roundTrips = async (run: () => Promise<Attempt>, expected: number) => {
      const before = counting.sent();
      const answer = await run();
      assert.equal(counting.sent() - before, expected, answer.body);
      return answer;
    };
    await attempt('198.51.100.80', ALICE); // scripts loaded (a NOSCRIPT retry is not a round trip of the design)
    await roundTrips(() => attempt('198.51.100.80', { ...ALICE, password: 'wrong' }), 2);
    // no clear: the pending failure stays on the account, the new cookie takes this browser off it
    const ok = await roundTrips(() => attempt('198.51.100.80', ALICE), 2);
    assert.equal(ok.status, 200);
    await roundTrips(() => attempt('198.51.100.80', { ...ALICE, password: 'wrong' }, ok.cookie), 2);
    // the device's backoff decides; its pending failure stays with the device the new cookie replaces
    const again = await roundTrips(() => attempt('198.51.100.80', ALICE, ok.cookie), 2);
    assert.equal(again.status, 200);
    assert.notEqual(again.cookie, ok.cookie, 'a new device cookie');
    loginModule.useCredentials(rejecting);
    t.after(() => loginModule.useCredentials(store));
    // the account forgets the three attempts above (successes included, none cleared) 15 minutes after the last
    clock.nowUs += 16 * 60 * S;
    for (let i = 0; i < 10; i++) await attempt(`198.51.100.${90 + i}`, ALICE, ok.cookie); // revokes it
    // the device's backoff refuses, the account's admits: one script tries both
    const revoked = await roundTrips(() => attempt('198.51.100.81', ALICE, ok.cookie), 2);
    assert.equal(revoked.status, 401, 'untrusted now: the account backoff admitted and counted it');
    // a right password the directory answers with a challenge, and an outage: with a cookie or without
    freshWindow();
    loginModule.useCredentials(store);
    const trusted = await roundTrips(() => attempt('198.51.100.82', ALICE), 2);
    const challenging: CredentialStore = {
      verify: async () => ({ outcome: 'challenge', challenge: 'NEW_PASSWORD_REQUIRED' }),
    };
    const down: CredentialStore = { verify: async () => ({ outcome: 'unavailable', retryAfterMs: 1000 }) };
    for (const [directory, status, trustedTrips] of [
      [challenging, 403, 2],
      [down, 503, 3], // the device's counted attempt forgiven: the one path with a third
    ] as const) {
      loginModule.useCredentials(directory);
      const withCookie = await roundTrips(() => attempt('198.51.100.82', ALICE, trusted.cookie), trustedTrips);
      assert.equal(withCookie.status, status);
      assert.equal((await roundTrips(() => attempt('198.51.100.83', ALICE), 2)).status, status);
    }
    console.log(
      '# round trips per login attempt: failure 2, success 2 with a device cookie and 2 without, challenge 2, outage 2 (3 with a device cookie: its attempt forgiven), revoked cookie 2',
    );
  });
});

describe('Login: the IPv6 /48 window beside the /64 one', () => {
  it('one /48 gets 200 attempts per 15 minutes over all its /64s (20 each), another /48 is untouched; IPv4-mapped is IPv4', async (t) => {
    freshWindow();
    loginModule.useCredentials(rejecting); // the windows are the subject: no scrypt for 230 wrong passwords
    t.after(() => loginModule.useCredentials(store));
    const statuses: number[] = [];
    let refusal: Attempt | undefined;
    for (let i = 0; i < 210; i++) {
      // a new /64 every 10 attempts: the /64 window (20) never binds
      const from = `2001:db8:48:${Math.floor(i / 10).toString(16)}::${(i % 10) + 1}`;
      const answer = await attempt(from, { email: `u${i}@example.com`, password: 'wrong' });
      statuses.push(answer.status);
      if (answer.status === 429) refusal ??= answer;
    }
    assert.equal(statuses.filter((s) => s === 401).length, 200);
    assert.equal(statuses.filter((s) => s === 429).length, 10);
    assert.equal(refusal?.policy, 'login-ip48');
    assert.ok((refusal?.retryAfterS ?? 0) > 0);
    assert.equal((await attempt('2001:db8:49::1', { email: 'v@example.com', password: 'wrong' })).status, 401);
    clock.nowUs += 15 * 60 * S;
    assert.equal((await attempt('2001:db8:48:ff::1', { email: 'v@example.com', password: 'wrong' })).status, 401);

    const v4 = '192.0.2.77';
    for (let i = 0; i < 20; i++) {
      const from = [v4, `::ffff:${v4}`, '::ffff:c000:24d'][i % 3] as string;
      assert.equal((await attempt(from, { email: `m${i}@example.com`, password: 'wrong' })).status, 401);
    }
    const mapped = await attempt('0:0:0:0:0:ffff:c000:24d', { email: 'm@example.com', password: 'wrong' });
    assert.equal(mapped.status, 429, 'every form of one IPv4 address shares its window');
    assert.equal(mapped.policy, 'login-ip');
  });
});

describe('Login: what the user directory answered', () => {
  const answering = (verification: Verification): CredentialStore => ({ verify: async () => verification });
  const module = { useCredentials: (s: CredentialStore) => loginModule.useCredentials(s) };
  after(() => module.useCredentials(store));

  it('200 with the tokens and a device cookie; 403 for a challenge; 503 with a short Retry-After when it cannot answer', async () => {
    freshWindow();
    const tokens = { IdToken: 'id', AccessToken: 'access', RefreshToken: 'refresh', ExpiresIn: 3600 };
    module.useCredentials(answering({ outcome: 'accepted', tokens }));
    const ok = await attempt('198.51.100.60', ALICE);
    assert.equal(ok.status, 200);
    assert.deepEqual(JSON.parse(ok.body), { authenticated: true, email: ALICE.email, ...tokens });
    assert.ok(ok.cookie);

    module.useCredentials(answering({ outcome: 'challenge', challenge: 'NEW_PASSWORD_REQUIRED' }));
    const challenge = await attempt('198.51.100.61', ALICE);
    assert.equal(challenge.status, 403);
    assert.equal(JSON.parse(challenge.body).challenge, 'NEW_PASSWORD_REQUIRED');
    assert.equal(challenge.cookie, undefined);

    freshWindow(); // the success and the challenge above each left their counted attempt on the account
    module.useCredentials(answering({ outcome: 'unavailable', retryAfterMs: 1000 }));
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const answer = await attempt('198.51.100.62', ALICE);
      statuses.push(answer.status);
      if (answer.status === 503) assert.equal(answer.retryAfterS, 1);
    }
    // the outage's attempts stay counted: 4 answered 503, then the account waits (no refund to whoever caused it)
    assert.deepEqual(statuses, [503, 503, 503, 503, 429]);
  });
});
