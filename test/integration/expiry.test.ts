/**
 * Every key expires as soon as it carries no information, on the real Redis
 * clock: a bucket when it is full again, a window when its newest event leaves,
 * a backoff when its failures are forgotten. Reads and denials write nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createLimiter } from '@platform/rate-limit';
import { counterKey } from '@platform/rate-limit/policy';
import { connected, policies, targets, unique } from '../support/targets.ts';

for (const target of targets) {
  describe(`Key expiry on a ${target.name}`, () => {
    const redis = target.client();
    // what the functions' user may not run (PTTL, EXISTS, STRLEN, MEMORY) is read as the administrator
    const inspect = target.admin();
    before(() => connected(inspect));
    after(() => {
      redis.disconnect();
      inspect.disconnect();
    });
    const names = { tb: unique('tb'), sw: unique('sw'), bo: unique('bo') };
    const catalogue = policies({
      [names.tb]: { strategy: 'tokenBucket', capacity: 10, refill: { tokens: 1, every: '1 s' } },
      [names.sw]: { strategy: 'slidingWindow', limit: 2, window: '30 s' },
      [names.bo]: { strategy: 'failureBackoff', freeFailures: 0, base: '1 s', max: '1 m', memory: '10 m' },
    });
    const limiter = createLimiter({ redis, policies: catalogue });
    const keyOf = (name: string, key: string) => counterKey(catalogue.resolve(name) ?? assert.fail(), key);

    it('gives a bucket the time until it is full again', async () => {
      await connected(redis);
      for (let i = 0; i < 3; i++) await limiter.check({ policy: names.tb, key: 'k' });
      const decision = await limiter.check({ policy: names.tb, key: 'k' });
      const ttl = await inspect.pttl(keyOf(names.tb, 'k'));
      assert.ok(decision.outcome === 'allowed');
      assert.ok(
        ttl > 3000 && ttl <= decision.binding.resetAfterMs,
        `pttl ${ttl} vs reset ${decision.binding.resetAfterMs}`,
      );
    });

    it('gives a window one to two windows after its newest event (the end of the next epoch)', async () => {
      await limiter.check({ policy: names.sw, key: 'k' });
      const ttl = await inspect.pttl(keyOf(names.sw, 'k'));
      assert.ok(ttl > 29_000 && ttl <= 60_000, `pttl ${ttl}`);
      const epochEnd = (Math.floor(Date.now() / 30_000) + 2) * 30_000;
      assert.ok(Math.abs(Date.now() + ttl - epochEnd) < 1_000, `expires at ${Date.now() + ttl}, epoch end ${epochEnd}`);
    });

    it("leaves a window's expiry as it is within an epoch, and sets it for a key written before the epochs", async () => {
      const hour = unique('sw-hour');
      const hourly = policies({ [hour]: { strategy: 'slidingWindow', limit: 100, window: '1 h' } });
      const hourLimiter = createLimiter({ redis, policies: hourly });
      const key = counterKey(hourly.resolve(hour) ?? assert.fail(), 'k');
      const epochOf = (ms: number) => Math.floor(ms / 3_600_000);
      const started = Date.now();
      await hourLimiter.check({ policy: hour, key: 'k' });
      // an expiry the script did not set: a later admission in the same epoch keeps it
      await inspect.pexpire(key, 7_200_000 - 5_000);
      await hourLimiter.check({ policy: hour, key: 'k' });
      const kept = await inspect.pttl(key);
      // a key as the script before the epochs wrote it: w without its flag bit (header bytes 12..15), expiry one window
      const w = (await inspect.getrangeBuffer(key, 12, 15)).readUInt32BE(0);
      assert.equal(w, 3_600_000 + 2 ** 31, 'w carries the window and the flag');
      const old = Buffer.alloc(4);
      old.writeUInt32BE(3_600_000);
      await inspect.setrange(key, 12, old);
      await inspect.pexpire(key, 10_000);
      await hourLimiter.check({ policy: hour, key: 'k' });
      const set = await inspect.pttl(key);
      if (epochOf(started) !== epochOf(Date.now())) return; // an epoch began mid-test: both admissions moved it
      assert.ok(kept > 7_190_000 && kept <= 7_195_000, `kept ${kept}`);
      const epochEnd = (epochOf(Date.now()) + 2) * 3_600_000;
      assert.ok(
        Math.abs(Date.now() + set - epochEnd) < 1_000,
        `set to ${set} ms, epoch end in ${epochEnd - Date.now()}`,
      );
    });

    it('gives a backoff its memory after the last failure', async () => {
      await limiter.recordFailure(names.bo, 'k');
      const ttl = await inspect.pttl(keyOf(names.bo, 'k'));
      assert.ok(ttl > 590_000 && ttl <= 600_000, `pttl ${ttl}`);
    });

    it('creates no key for a peek, and changes none for a denial', async () => {
      await limiter.peek([{ policy: names.sw, key: 'peeked' }]);
      assert.equal(await inspect.exists(keyOf(names.sw, 'peeked')), 0);
      await limiter.check({ policy: names.sw, key: 'full' });
      await limiter.check({ policy: names.sw, key: 'full' });
      const before = await redis.getBuffer(keyOf(names.sw, 'full'));
      assert.equal((await limiter.check({ policy: names.sw, key: 'full' })).outcome, 'limited');
      assert.deepEqual(await redis.getBuffer(keyOf(names.sw, 'full')), before);
    });
  });
}
