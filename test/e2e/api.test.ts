/**
 * The public API (/v1/{proxy+}) through the local gateway, over real HTTP:
 * quotas per role, a per-key override that beats the role, headers on every
 * answer, unknown keys refused and key guessing itself limited.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { quotaPeriodUs } from '../model/reference-model.ts';
import { consumers, type TestPlatform } from '../support/consumers.ts';
import { call, loopbackAddress } from '../support/http.ts';

let platform: TestPlatform;
// globex's partner key: a monthly quota of 10 (per-key override), so the month's cap is reached here
const MONTHLY = 10;
before(async () => {
  platform = await consumers({
    parameters: {
      '/ratelimit/local/overrides/api-partner-month/AJT_L9bntpyZN94M9c3rVNozcjkUB-I77s_Ntin38eY': { limit: MONTHLY },
    },
  });
});
after(() => platform.close());

const get = (path: string, apiKey: string | undefined, from = loopbackAddress()) =>
  call(platform.base, { path, from, headers: apiKey === undefined ? {} : { 'x-api-key': apiKey } });

describe('Public API (/v1)', () => {
  it('answers with the quota of the key role, and the per-key override beats the role', async () => {
    const standard = await get('/v1/whoami', 'rk_localDemoStandardKeyNotASecret00');
    assert.equal(standard.status, 200);
    assert.deepEqual(standard.json(), { owner: 'acme', role: 'standard' });
    assert.equal(standard.headers['ratelimit-policy'], '"api-key";q=120;w=120');
    // the monthly quota's window is this UTC month's length (the request may fall either side of a month's end)
    const monthSeconds = () => {
      const [start, end] = quotaPeriodUs(Date.now() * 1000, 'month', 0);
      return (end - start) / 1e6;
    };
    const months = [monthSeconds()];
    const partner = await get('/v1/items', 'rk_localDemoPartnerKeyNotASecret000');
    months.push(monthSeconds());
    assert.equal(partner.status, 200);
    assert.ok(
      months.some(
        (w) =>
          partner.headers['ratelimit-policy'] === `"api-partner";q=600;w=120, "api-partner-month";q=${MONTHLY};w=${w}`,
      ),
      `the partner role: its bucket and its monthly quota: ${partner.headers['ratelimit-policy']}`,
    );
    const premium = await get('/v1/whoami', 'rk_localDemoPremiumKeyNotASecret000');
    assert.equal(premium.headers['ratelimit-policy'], '"api-key";q=1200;w=120', 'override of the role policy');
  });

  it('refuses a key over its quota with 429, Retry-After and RateLimit headers, and no other key', async () => {
    let last = await get('/v1/items', 'rk_localDemoStandardKeyNotASecret00');
    let admitted = 1;
    while (last.status === 200 && admitted < 200) {
      last = await get('/v1/items', 'rk_localDemoStandardKeyNotASecret00');
      if (last.status === 200) admitted++;
    }
    assert.equal(last.status, 429);
    assert.ok(admitted >= 118 && admitted <= 121, `admitted ${admitted} of a bucket of 120 (earlier tests took some)`);
    assert.ok(Number(last.headers['retry-after']) >= 1);
    assert.match(last.headers.ratelimit ?? '', /^"api-key";r=0;t=\d+$/);
    assert.equal(
      (await get('/v1/items', 'rk_localDemoPartnerKeyNotASecret000')).status,
      200,
      'another key still passes',
    );
  });

  it('answers 401 to a missing or unknown key, and 429 once one IP has guessed 10 keys in 15 minutes', async () => {
    const from = loopbackAddress();
    assert.equal((await get('/v1/items', undefined, from)).status, 401);
    const statuses = [];
    for (let i = 0; i < 11; i++) statuses.push((await get('/v1/items', `guess-${i}`, from)).status);
    assert.deepEqual(statuses, [...Array(10).fill(401), 429]);
    assert.equal((await get('/v1/items', 'guess-x', loopbackAddress())).status, 401, 'another IP is not limited');
  });

  it('answers a malformed key exactly as an unknown one (401, counted by api-unknown-key-ip)', async () => {
    const from = loopbackAddress();
    const unknown = await get('/v1/items', `rk_${'A'.repeat(32)}`, from);
    assert.equal(unknown.status, 401);
    const answers = [];
    for (const key of [
      'demo-standard-key', // the old demo keys: no prefix, no 128 random bits
      `rk_${'A'.repeat(31)}`,
      `rk_${'A'.repeat(33)}`,
      `RK_${'A'.repeat(32)}`,
      `rk_${'A'.repeat(31)}+`,
      'rk_localDemoStandardKeyNotASecret00'.toUpperCase(),
    ]) {
      answers.push(await get('/v1/items', key, from));
    }
    for (const [i, answer] of answers.entries()) {
      assert.equal(answer.status, 401, `key ${i}`);
      assert.deepEqual(answer.json(), unknown.json(), 'the same reason as an unknown key');
      assert.match(answer.headers.ratelimit ?? '', new RegExp(`^"api-unknown-key-ip";r=${8 - i};`), 'counted the same');
    }
  });

  it('answers 404 with a reason for an unknown resource, still with the RateLimit headers', async () => {
    const answer = await get('/v1/nothing-here', 'rk_localDemoPartnerKeyNotASecret000');
    assert.equal(answer.status, 404);
    assert.equal(answer.json().error, 'not_found');
    assert.match(answer.headers.ratelimit ?? '', /^"api-partner";r=\d+;t=\d+, "api-partner-month";r=\d+;t=\d+$/);
  });
});

describe('A role with a monthly quota (partner)', () => {
  it('is refused at the month total with 429 from api-partner-month and a Retry-After to the 1st, taking no token', async () => {
    let answer = await get('/v1/items', 'rk_localDemoPartnerKeyNotASecret000');
    for (let i = 0; answer.status === 200 && i < MONTHLY + 5; i++)
      answer = await get('/v1/items', 'rk_localDemoPartnerKeyNotASecret000');
    assert.equal(answer.status, 429, answer.body);
    assert.equal(answer.json().policy, 'api-partner-month');
    const now = new Date();
    const firstOfNextMonth = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    const retryAfter = Number(answer.headers['retry-after']);
    assert.ok(
      Math.abs(Date.now() + retryAfter * 1000 - firstOfNextMonth) < 5_000,
      `Retry-After ${retryAfter} s: the 1st`,
    );
    assert.match(answer.headers.ratelimit ?? '', /"api-partner-month";r=0;/);
    const bucketLeft = (a: typeof answer) => Number(/"api-partner";r=(\d+)/.exec(a.headers.ratelimit ?? '')?.[1]);
    const again = await get('/v1/items', 'rk_localDemoPartnerKeyNotASecret000');
    assert.equal(again.status, 429);
    assert.ok(bucketLeft(again) >= bucketLeft(answer), 'a request the month refuses takes no token from the bucket');
  });
});
