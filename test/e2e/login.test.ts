/**
 * POST /auth/login through the local gateway, over real HTTP, real Redis.
 * The account backoff is shortened in this file's parameters (base 200 ms,
 * like an operator's override would) so waiting its Retry-After is quick,
 * and its email pepper is its own (its accounts' keys are no other file's).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as wait } from 'node:timers/promises';
import { consumers, type TestPlatform } from '../support/consumers.ts';
import { type Answer, call, loopbackAddress } from '../support/http.ts';

let platform: TestPlatform;
before(async () => {
  platform = await consumers({
    parameters: {
      '/ratelimit/local/overrides/login-account': { base: '200 ms', max: '800 ms' },
      // this file's own pepper, so its accounts' backoffs are its own: nothing clears a counted attempt, and
      // other files log alice in on the suite's shared Redis
      '/ratelimit/local/secrets/login/email-pepper': 'e2e-login-own-pepper-not-a-secret',
    },
  });
});
after(() => platform.close());

const attempt = (from: string, email: string, password: string, cookie?: string) =>
  call(platform.base, {
    method: 'POST',
    path: '/auth/login',
    from,
    body: JSON.stringify({ email, password }),
    ...(cookie ? { headers: { Cookie: cookie } } : {}),
  });

/** What a caller can compare between two answers: status, body and headers but the connection's own. */
function visible(answer: Answer) {
  const { date: _date, connection: _connection, 'keep-alive': _keepAlive, ...headers } = answer.headers;
  return { status: answer.status, headers, body: answer.body };
}

describe('Login (POST /auth/login)', () => {
  it('refuses the 21st attempt from one IP within 15 minutes with 429 and Retry-After, malformed ones counted', async () => {
    const from = loopbackAddress();
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) {
      const body = i % 2 === 0 ? 'not json' : JSON.stringify({ email: `u${i}@example.com`, password: 'x' });
      statuses.push((await call(platform.base, { method: 'POST', path: '/auth/login', from, body })).status);
    }
    assert.deepEqual([...new Set(statuses)].sort(), [400, 401]);
    const refused = await attempt(from, 'alice@example.com', 'correct horse battery staple');
    assert.equal(refused.status, 429);
    assert.ok(Number(refused.headers['retry-after']) > 0);
    assert.equal(refused.json().policy, 'login-ip');
  });

  it("takes only JSON: a page on another site (a form, text/plain) spends none of the visitor's limits and sets no cookie", async () => {
    // Act: what a cross-site page can make the visitor's browser post without a preflight, 25 times: a login
    // to the attacker's own account (whose success would set its device cookie in the visitor's browser)
    const from = loopbackAddress();
    const drive = JSON.stringify({ email: 'alice@example.com', password: 'correct horse battery staple', x: '=' });
    const answers: Answer[] = [];
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=b']) {
      for (let i = 0; i < 8; i++) {
        const headers = { 'Content-Type': type, 'Sec-Fetch-Site': 'cross-site' };
        answers.push(await call(platform.base, { method: 'POST', path: '/auth/login', from, body: drive, headers }));
      }
    }
    const untyped = { 'Content-Type': '' };
    answers.push(
      await call(platform.base, { method: 'POST', path: '/auth/login', from, body: drive, headers: untyped }),
    );
    // Assess: each refused as it was sent, nothing counted, no cookie set
    assert.deepEqual([...new Set(answers.map((a) => a.status))], [415]);
    assert.ok(answers.every((a) => a.headers['set-cookie'] === undefined && a.headers.ratelimit === undefined));
    assert.equal(answers[0]?.json().error, 'unsupported_media_type');
    const next = await attempt(from, 'nobody-typed@example.com', 'x');
    assert.equal(next.status, 401);
    assert.equal(next.headers.ratelimit, '"login-ip";r=19;t=900, "login-ip48";r=199;t=900', 'its JSON attempt only');
  });

  it("makes an account wait longer after each failure past the free ones; a success's new cookie counts that browser's next attempts on its own device", async () => {
    const from = loopbackAddress();
    const email = 'alice@example.com';
    for (let i = 0; i < 3; i++) assert.equal((await attempt(from, email, 'wrong')).status, 401, 'free failures');
    assert.equal((await attempt(from, email, 'wrong')).status, 401, 'the 4th failure is recorded');
    const first = await attempt(from, email, 'correct horse battery staple');
    assert.equal(first.status, 429, 'in backoff even with the right password');
    assert.equal(first.json().policy, 'login-account');
    await wait(200); // the backoff's Retry-After (200 ms, rounded up to 1 s in the header)
    assert.equal((await attempt(from, email, 'wrong')).status, 401, 'the 5th failure');
    const longer = await attempt(from, email, 'wrong');
    assert.equal(longer.status, 429);
    await wait(400);
    const success = await attempt(from, email, 'correct horse battery staple');
    assert.equal(success.status, 200, 'success after the wait');
    // nothing was cleared (the account's count stays until it is forgotten): the new cookie is a device of its own
    const setCookie = success.headers['set-cookie'] as unknown as string | string[];
    const header = Array.isArray(setCookie) ? (setCookie[0] as string) : setCookie;
    const cookie = header.slice(0, header.indexOf(';'));
    for (let i = 0; i < 3; i++)
      assert.equal((await attempt(from, email, 'wrong', cookie)).status, 401, "the device's own free failures");
  });

  it('answers a known and an unknown account byte for byte alike, in every state', async () => {
    const [fromKnown, fromUnknown] = [loopbackAddress(), loopbackAddress()];
    const sequence = ['wrong', 'wrong', 'wrong', 'wrong', 'wrong', 'wrong'];
    for (const password of sequence) {
      const known = await attempt(fromKnown, 'bob@example.com', password);
      const unknown = await attempt(fromUnknown, 'nobody-here@example.com', password);
      assert.deepEqual(visible(known), visible(unknown));
    }
  });

  it('answers 400 with a reason for a body over 8 KiB, and still counts it per IP', async () => {
    const from = loopbackAddress();
    const big = JSON.stringify({ email: 'alice@example.com', password: 'x'.repeat(9000) });
    const answer = await call(platform.base, { method: 'POST', path: '/auth/login', from, body: big });
    assert.equal(answer.status, 400);
    assert.equal(answer.json().message, 'the body is larger than 8 KiB');
    assert.equal(answer.headers.ratelimit, '"login-ip";r=19;t=900, "login-ip48";r=199;t=900');
  });

  it('answers 400 naming the bound an over-long email or password passes', async () => {
    for (const [body, reason] of [
      [{ email: `${'a'.repeat(320)}@example.com`, password: 'pw' }, /email .*longer than 320 characters/],
      [{ email: 'alice@example.com', password: 'p'.repeat(1025) }, /password .*longer than 1024 characters/],
    ] as const) {
      const from = loopbackAddress();
      const answer = await call(platform.base, {
        method: 'POST',
        path: '/auth/login',
        from,
        body: JSON.stringify(body),
      });
      assert.equal(answer.status, 400);
      assert.match(String(answer.json().message), reason);
    }
  });

  it('a success sets a device cookie (HttpOnly, Secure, SameSite, host-only) that lets its device in while the account is in backoff', async () => {
    const from = loopbackAddress();
    const email = 'bob@example.com';
    let first = await attempt(from, email, 'tr0ub4dor&3-but-longer');
    // an earlier test left bob in his (shortened, ≤ 800 ms) backoff: wait what it says
    while (first.status === 429) {
      await wait(Number(first.json().retryAfterSeconds) * 1000);
      first = await attempt(from, email, 'tr0ub4dor&3-but-longer');
    }
    assert.equal(first.status, 200);
    const setCookie = first.headers['set-cookie'] as unknown as string | string[];
    const header = Array.isArray(setCookie) ? (setCookie[0] as string) : setCookie;
    assert.match(
      header,
      /^__Host-login-device=v1\.[\w-]{22}\.\d+\.[\w-]{43}; Max-Age=604800; Path=\/; Secure; HttpOnly; SameSite=Strict$/,
    );
    const cookie = header.slice(0, header.indexOf(';'));
    const attacker = loopbackAddress();
    for (let i = 0; i < 5; i++) await attempt(attacker, email, `guess-${i}`);
    const untrusted = await attempt(loopbackAddress(), email, 'tr0ub4dor&3-but-longer');
    assert.equal(untrusted.status, 429, 'a new device waits the account-wide delay');
    assert.equal(untrusted.json().policy, 'login-account');
    const trusted = await attempt(from, email, 'tr0ub4dor&3-but-longer', cookie);
    assert.equal(trusted.status, 200, 'the returning device is admitted at its first try');
    const foreign = await attempt(loopbackAddress(), 'alice@example.com', 'wrong', cookie);
    const none = await attempt(loopbackAddress(), 'nobody@example.com', 'wrong', cookie);
    assert.equal(foreign.status, none.status, "another account's cookie is untrusted, as for an unknown account");
  });

  it('40 concurrent guesses from 2 IPs, the right password 38th: at most 4 verified, the right one refused until the backoff allows it', async () => {
    const email = 'alice@example.com';
    const ips = [loopbackAddress(), loopbackAddress()];
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        attempt(ips[i % 2] as string, email, i === 37 ? 'correct horse battery staple' : `wrong-${i}`),
      ),
    );
    const verified = answers.filter((a) => a.status === 401 || a.status === 200).length;
    assert.ok(verified <= 4, `verified ${verified}`);
    assert.equal(answers.filter((a) => a.status === 429).length, 40 - verified);
    if (answers[37]?.status !== 200) {
      const owner = loopbackAddress();
      const early = await attempt(owner, email, 'correct horse battery staple');
      assert.equal(early.status, 429, 'the right password is refused inside the wait');
      await wait(Number(early.json().retryAfterSeconds) * 1000); // the backoff's Retry-After (200 ms here, said as 1 s)
      assert.equal((await attempt(owner, email, 'correct horse battery staple')).status, 200);
    }
  });
});
