/**
 * The sliding window's ring through the paths random sequences rarely reach:
 * wrap-around, a raised limit after a wrap (re-layout), a long idle gap (k-ary
 * search), and memory bounded by the limit.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type CompiledPolicy, compilePolicy } from '@platform/rate-limit';
import { parseCheckReply } from '@platform/rate-limit/lua';
import { ReferenceModel } from '../model/reference-model.ts';
import { connected, pinnedLimiter, targets, unique } from '../support/targets.ts';

for (const target of targets) {
  describe(`Sliding window ring on a ${target.name}`, () => {
    const redis = target.client();
    // what the functions' user may not run (PTTL, EXISTS, STRLEN, MEMORY) is read as the administrator
    const inspect = target.admin();
    before(() => connected(inspect));
    after(() => {
      redis.disconnect();
      inspect.disconnect();
    });

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

    it('refuses at cost 1 in one integer below a window of 2^26 µs and in a table from it, each to the µs of the model', async () => {
      for (const windowMs of [67_108, 67_109]) {
        const policy = compilePolicy('edge', { strategy: 'slidingWindow', limit: 2, window: `${windowMs} ms` });
        const clock = { nowUs: 1_800_000_000_000_000 };
        const limiter = pinnedLimiter({ redis, policies: { resolve: () => policy } }, clock);
        const model = new ReferenceModel();
        const key = unique('edge');
        const outcomes = [];
        // refused 1 s in and 1 µs before the first event leaves; admitted as it does
        for (const stepUs of [0, 1_000, 1_000_000, windowMs * 1000 - 1_001_001, 1]) {
          clock.nowUs += stepUs;
          const decision = await limiter.check({ policy: 'edge', key });
          const reply = model.check([{ kind: 'sw', key, limit: 2, windowUs: windowMs * 1000, cost: 1 }], clock.nowUs);
          assert.deepEqual(decision, parseCheckReply([policy], reply), `${windowMs} ms, +${stepUs} µs`);
          outcomes.push(decision.outcome);
        }
        assert.deepEqual(outcomes, ['allowed', 'allowed', 'limited', 'limited', 'allowed'], `${windowMs} ms`);
      }
    });

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

    for (const events of [10_000, 100_000]) {
      it(`lays out a wrapped ring of ${events} events again when the limit is raised (no per-slot unpack)`, async () => {
        // Prepare: fill the ring in batches of 1000 events, 50 ms apart, in a 10 s window
        const batch = 1000;
        const big = { strategy: 'slidingWindow', window: '10 s', timeBudget: '5 s' }; // decisions, not latency
        const state = { policy: compilePolicy('big', { ...big, limit: events }) };
        const clock = { nowUs: 1_800_000_000_000_000 };
        const limiter = pinnedLimiter(
          { redis, policies: { resolve: () => state.policy }, onDegraded: (e) => assert.fail(e.detail) },
          clock,
        );
        const key = unique('big');
        const check = (cost: number) => limiter.check({ policy: 'big', key, cost });
        for (let i = 0; i < events / batch; i++) {
          assert.equal((await check(batch)).outcome, 'allowed');
          clock.nowUs += 50_000;
        }
        // the first two batches leave; two admits overwrite them: the ring has wrapped
        clock.nowUs = 1_800_000_000_000_000 + 10_000_000 + 60_000;
        assert.equal((await check(batch)).outcome, 'allowed');
        assert.equal((await check(batch)).outcome, 'allowed');
        // Act: a raised limit makes the next admit lay the ring out again
        state.policy = compilePolicy('big', { ...big, limit: events + 20_000 });
        const raised = await check(batch);
        // Assess: decided by Redis, with every in-window event kept
        assert.ok(raised.outcome === 'allowed', `after raising the limit: ${raised.outcome}`);
        assert.equal(raised.binding.remaining, events + 20_000 - events - batch);
        assert.equal(await inspect.strlen(`rl:{big:${key}}`), 32 + 8 * (events + batch));
      });
    }

    it('applies a changed window from the change on (see lua/lib/sliding_window.lua)', async () => {
      const state = { policy: compilePolicy('win', { strategy: 'slidingWindow', limit: 4, window: '1 s' }) };
      const clock = { nowUs: 1_800_000_000_000_000 };
      const limiter = pinnedLimiter({ redis, policies: { resolve: () => state.policy } }, clock);
      const lengthen = () => {
        state.policy = compilePolicy('win', { strategy: 'slidingWindow', limit: 4, window: '3 s' });
      };
      const at = (ms: number) => {
        clock.nowUs = 1_800_000_000_000_000 + ms * 1000;
      };
      // lengthened while the events are still inside the old window: they count
      const stillIn = unique('in');
      state.policy = compilePolicy('win', { strategy: 'slidingWindow', limit: 4, window: '1 s' });
      at(0);
      assert.equal((await limiter.check({ policy: 'win', key: stillIn, cost: 3 })).outcome, 'allowed');
      at(500);
      lengthen();
      at(1500);
      assert.equal((await limiter.check({ policy: 'win', key: stillIn })).outcome, 'allowed');
      at(1600);
      assert.equal((await limiter.check({ policy: 'win', key: stillIn, cost: 3 })).outcome, 'limited');

      // lengthened after an admit saw them leave the old window: they are gone
      const left = unique('left');
      state.policy = compilePolicy('win', { strategy: 'slidingWindow', limit: 4, window: '1 s' });
      at(0);
      assert.equal((await limiter.check({ policy: 'win', key: left, cost: 3 })).outcome, 'allowed');
      at(1500);
      assert.equal((await limiter.check({ policy: 'win', key: left })).outcome, 'allowed');
      lengthen();
      at(1600);
      const after = await limiter.check({ policy: 'win', key: left, cost: 3 });
      assert.ok(after.outcome === 'allowed' && after.binding.remaining === 0, 'only the event at 1.5 s counts');

      // the same when the events that left are still stored in the ring (other events kept it alive)
      const stored = unique('stored');
      state.policy = compilePolicy('win', { strategy: 'slidingWindow', limit: 4, window: '1 s' });
      at(0);
      assert.equal((await limiter.check({ policy: 'win', key: stored, cost: 2 })).outcome, 'allowed');
      at(800);
      assert.equal((await limiter.check({ policy: 'win', key: stored })).outcome, 'allowed');
      at(1500);
      assert.equal((await limiter.check({ policy: 'win', key: stored })).outcome, 'allowed');
      lengthen();
      at(1600);
      const kept = await limiter.check({ policy: 'win', key: stored });
      assert.ok(kept.outcome === 'allowed' && kept.binding.remaining === 1, 'the events at 0 s left before the change');

      // shortened: takes effect at once
      const short = unique('short');
      lengthen();
      at(0);
      assert.equal((await limiter.check({ policy: 'win', key: short, cost: 4 })).outcome, 'allowed');
      at(1200);
      assert.equal((await limiter.check({ policy: 'win', key: short })).outcome, 'limited');
      state.policy = compilePolicy('win', { strategy: 'slidingWindow', limit: 4, window: '1 s' });
      assert.equal((await limiter.check({ policy: 'win', key: short, cost: 4 })).outcome, 'allowed');
    });

    it('writes a cost that wraps around the end of the ring to both ends, and never past it', async () => {
      const h = harness(5);
      for (let i = 0; i < 24; i++) {
        // two events every 0.6 s in a 1 s window: 4 in the window, h steps by 2 round a ring of 5
        assert.equal((await h.check(2)).outcome, 'allowed');
        h.clock.nowUs += 600_000;
      }
      assert.equal(await inspect.strlen(`rl:{ring:${h.key}}`), 32 + 8 * 5);
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
      const bytes = Number(await inspect.call('MEMORY', 'USAGE', `rl:{mem:${key}}`));
      // 1000 slots of 8 bytes, a 16-byte header, the key, and the allocator's rounding
      assert.ok(bytes >= 8016 && bytes <= 9000, `MEMORY USAGE ${bytes}`);
    });
  });
}
