import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { createLimiter, type Decision } from '@platform/rate-limit';
import { COMMANDS_PER_WRITE } from '@platform/rate-limit/redis';
import { Cluster, type Redis } from 'ioredis';
import { connected, policies, targets, unique } from '../support/targets.ts';

/** The connections a client writes on: its one, or a cluster's masters'. */
function connectionsOf(redis: Redis | Cluster): Redis[] {
  return redis instanceof Cluster ? redis.nodes('master') : [redis];
}

/** The commands each write of a connection's socket carries (one chunk per command; a writev carries several). */
function writesOf(connection: Redis): number[] {
  type Writer = (this: unknown, ...args: unknown[]) => unknown;
  const socket = connection.stream as unknown as { _write: Writer; _writev: Writer };
  const writes: number[] = [];
  const write = socket._write;
  const writev = socket._writev;
  socket._write = function (...args) {
    writes.push(1);
    return write.apply(this, args);
  };
  socket._writev = function (...args) {
    writes.push((args[0] as unknown[]).length);
    return writev.apply(this, args);
  };
  return writes;
}

const corked = (connections: readonly Redis[]) => connections.filter((c) => c.stream.writableCorked > 0);

for (const target of targets) {
  describe(`Write coalescing on a ${target.name} (redis/write-coalescing.ts)`, () => {
    const redis = target.client();
    after(() => redis.disconnect());

    it('writes a check sent alone at once, and the checks sent with it in one turn together, a batch per write', async () => {
      // Prepare: the script cached (no NOSCRIPT resend), the hot key's connection found
      await connected(redis);
      const name = unique('coalesce');
      const limiter = createLimiter({
        redis,
        policies: policies({ [name]: { strategy: 'tokenBucket', capacity: 11, refill: { tokens: 1, every: '1 h' } } }),
      });
      await limiter.check({ policy: name, key: 'hot' });
      const connections = connectionsOf(redis as Redis | Cluster);
      const writes = connections.map(writesOf);
      // Act: the first check of the turn finds nothing in flight (the Lambda shape)
      const checks: Promise<Decision>[] = [limiter.check({ policy: name, key: 'hot' })];
      const corkedAlone = corked(connections).length;
      // ... the next 63 find it in flight
      for (let i = 1; i < 64; i++) checks.push(limiter.check({ policy: name, key: 'hot' }));
      const corkedTogether = corked(connections);
      const waiting = corkedTogether.map((c) => c.stream.writableLength);
      // queued behind the coalescing's own tick: by then (before any later turn: a frozen Lambda's) all is written
      await new Promise((resolve) => process.nextTick(resolve));
      const corkedAfterTick = corked(connections).length;
      const writtenAfterTick = connections.map((c) => c.stream.writableLength);
      const decisions = await Promise.all(checks);
      // Assess
      assert.equal(corkedAlone, 0, 'a check sent alone waits for nothing');
      assert.equal(corkedTogether.length, 1, "the hot key's connection holds the turn's last batch");
      assert.ok((waiting[0] ?? 0) > 0, 'its bytes wait in the socket until the turn ends');
      assert.equal(corkedAfterTick, 0, 'and are written by then');
      // over plain TCP handed to the kernel; over TLS Node may still hold them behind its write under way
      if (target.name === 'single node')
        assert.ok(
          writtenAfterTick.every((bytes) => bytes === 0),
          `${writtenAfterTick}`,
        );
      assert.equal(corked(connections).length, 0);
      const hot = writes.find((w) => w.length > 0) ?? [];
      assert.equal(hot[0], 1, 'the first check went out alone');
      assert.equal(
        hot.reduce((a, b) => a + b, 0),
        64,
      );
      assert.ok(hot.length <= 1 + Math.ceil(63 / COMMANDS_PER_WRITE), `writes ${JSON.stringify(hot)}`);
      // over plain TCP a write completes at once, so every batch is the cap's; over TLS Node itself holds
      // what is written while its previous write is under way, and sends it in one (past the cap)
      if (target.name === 'single node') assert.deepEqual(hot, [1, 16, 16, 16, 15]);
      assert.deepEqual(
        decisions.map((d) => d.outcome),
        [...Array(10).fill('allowed'), ...Array(54).fill('limited')],
        'every check answered, in order, exactly',
      );
      assert.deepEqual(
        decisions.slice(0, 10).map((d) => (d.outcome === 'allowed' ? d.binding.remaining : -1)),
        [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
      );
    });
  });
}
