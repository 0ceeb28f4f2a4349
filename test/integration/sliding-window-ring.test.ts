/**
 * The sliding window's ring through the paths random sequences rarely reach:
 * wrap-around, a raised limit after a wrap (re-layout), a long idle gap (k-ary
 * search), and memory bounded by the limit.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { type CompiledPolicy, compilePolicy } from '../../layer/src/index.ts';
import { parseCheckReply } from '../../layer/src/lua-contract.ts';
import { ReferenceModel } from '../model/reference-model.ts';
import { pinnedLimiter, targets, unique } from '../support/targets.ts';

for (const target of targets) {
  describe(`Sliding window ring on a ${target.name}`, () => {
    const redis = target.client();
    after(() => redis.disconnect());

    function harness(limit: number) {
      const state = { policy: compilePolicy('ring', { strategy: 'slidingWindow', limit, window: '1 s' }) };
      const clock = { nowUs: 1_800_000_000_000_000 };
      const limiter = pinnedLimiter({ redis, policies: { resolve: () => state.policy } }, clock);
      const model = new ReferenceModel();
      const key = unique('ring');
      return {
        clock,
        key,
        setLimit(l: number) {
          state.policy = compilePolicy('ring', { strategy: 'slidingWindow', limit: l, window: '1 s' });
        },
        async check(cost = 1) {
          const p = state.policy as CompiledPolicy;
          const decision = await limiter.check({ policy: 'ring', key, cost });
          const reply = model.check([{ kind: 'sw', key, limit: p.limit, windowUs: 1_000_000, cost }], clock.nowUs);
          assert.deepEqual(decision, parseCheckReply([p], reply));
          return decision;
        },
      };
    }

    it('keeps every in-window event when the limit is raised after the ring wrapped', async () => {
      const h = harness(4);
      for (let i = 0; i < 4; i++) {
        await h.check();
        h.clock.nowUs += 300_000;
      }
      // the first two events have left; two admits wrap the ring
      await h.check();
      h.clock.nowUs += 10_000;
      await h.check();
      h.clock.nowUs += 10_000;
      h.setLimit(8);
      // 4 events still in the window; 4 more fit, the 5th does not
      const outcomes = [];
      for (let i = 0; i < 5; i++) outcomes.push((await h.check()).outcome);
      assert.deepEqual(outcomes, ['allowed', 'allowed', 'allowed', 'allowed', 'limited']);
    });

    it('writes a cost that wraps around the end of the ring to both ends, and never past it', async () => {
      const h = harness(5);
      for (let i = 0; i < 24; i++) {
        // two events every 0.6 s in a 1 s window: 4 in the window, h steps by 2 round a ring of 5
        assert.equal((await h.check(2)).outcome, 'allowed');
        h.clock.nowUs += 600_000;
      }
      assert.equal(await redis.strlen(`rl:{ring:${h.key}}`), 32 + 8 * 5);
    });

    it('finds where the window starts after a long gap inside a large ring', async () => {
      const h = harness(200);
      for (let i = 0; i < 200; i++) {
        await h.check();
        h.clock.nowUs += 4_000; // 200 events over 0.8 s
      }
      h.clock.nowUs += 500_000; // about 130 of them have left
      for (let i = 0; i < 140; i++) await h.check();
    });

    it('spends about 8 bytes of Redis memory per event in a full window', async () => {
      const policy = compilePolicy('mem', { strategy: 'slidingWindow', limit: 1000, window: '1 m' });
      const clock = { nowUs: 1_800_000_000_000_000 };
      const limiter = pinnedLimiter({ redis, policies: { resolve: () => policy } }, clock);
      const key = unique('mem');
      for (let i = 0; i < 1000; i++) {
        assert.equal((await limiter.check({ policy: 'mem', key })).outcome, 'allowed');
        clock.nowUs += 1;
      }
      const bytes = Number(await redis.call('MEMORY', 'USAGE', `rl:{mem:${key}}`));
      // 1000 slots of 8 bytes, a 16-byte header, the key, and the allocator's rounding
      assert.ok(bytes >= 8016 && bytes <= 9000, `MEMORY USAGE ${bytes}`);
    });
  });
}
