/**
 * The deadline guard gives a check's ioredis Command itself up at its
 * deadline (layer/src/redis/deadline.ts, `Abandonable`): it reads the
 * command's `isSettled`, and swaps its `resolve` and `reject` for the late
 * answer's count. That rests on how ioredis 6 makes a command; these hold
 * ioredis to it on both targets (the TLS cluster as the functions' ACL
 * user), so an upgrade that changes it fails here, not in production as
 * every answered check counted abandoned.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Command } from 'ioredis';
import { connected, targets, unique } from '../support/targets.ts';

for (const target of targets) {
  describe(`ioredis's Command as the deadline guard gives it up (${target.name})`, () => {
    const redis = target.client();
    after(() => redis.disconnect());

    it('is settled once answered, by a reply or an error reply, and not before', async () => {
      await connected(redis);
      const key = `rl:{${unique('cmd')}}`;
      const read = new Command('get', [key], { replyEncoding: 'utf8' });
      assert.equal(read.isSettled, false);
      redis.sendCommand(read);
      assert.equal(read.isSettled, false, 'in flight');
      assert.equal(await read.promise, null);
      assert.equal(read.isSettled, true);
      const lost = new Command('evalsha', ['0'.repeat(40), 1, key], { replyEncoding: 'utf8' });
      redis.sendCommand(lost);
      await assert.rejects(lost.promise, /NOSCRIPT/);
      assert.equal(lost.isSettled, true);
    });

    it('answers through its resolve and reject as they stand when the answer comes (what the guard swaps)', async () => {
      await connected(redis);
      const key = `rl:{${unique('cmd')}}`;
      const seen: string[] = [];
      const read = new Command('get', [key], { replyEncoding: 'utf8' });
      assert.ok(Object.hasOwn(read, 'resolve') && Object.hasOwn(read, 'reject'), 'its own fields');
      const resolve = read.resolve;
      read.resolve = (reply) => {
        seen.push(`reply ${reply}`);
        resolve(reply);
      };
      redis.sendCommand(read);
      await read.promise;
      const lost = new Command('evalsha', ['0'.repeat(40), 1, key], { replyEncoding: 'utf8' });
      redis.sendCommand(lost);
      const reject = lost.reject; // the cluster wraps it when sending: the wrapper is what the reply reaches
      lost.reject = (error) => {
        seen.push(`error ${error.message.split(' ')[0]}`);
        reject(error);
      };
      await assert.rejects(lost.promise, /NOSCRIPT/);
      assert.deepEqual(seen, ['reply null', 'error NOSCRIPT']);
    });
  });
}
