/**
 * Sliding windows, one or a group, with or without a once-only claim, are
 * decided by the window's own script (lua/check_sliding_window.lua), not by
 * lua/check.lua's generic loop: it is there for speed only, so it must be
 * check.lua to the µs. Random sequences of checks, peeks and claimed checks
 * (costs of one, the flat path's, and more; windows refused, left whole,
 * partly left after a gap; a policy edited under a stored ring: a raised
 * limit, a shortened window; claims taken, repeated, kept on refusal or not)
 * run against two key spaces, one through each script, at pinned times: every
 * reply, every stored ring and every claim must be the same. And the common
 * cases of a group are decided before lib/sliding_window's functions are
 * built (the flat path), not by the fallback.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { compilePolicies } from '@platform/rate-limit';
import { withClaim } from '@platform/rate-limit/core';
import {
  checkCall,
  checkReplyLayout,
  claimableCheckCall,
  genericCheckCall,
  type ResolvedLimit,
  type ScriptCall,
} from '@platform/rate-limit/lua';
import fc from 'fast-check';
import { connected, pinnedScripts, targets, unique } from '../support/targets.ts';

// Two policies of a name share its counter: the second is the first edited.
const catalogue = compilePolicies({
  a0: { strategy: 'slidingWindow', limit: 3, window: '1 s', group: 'g' },
  a1: { strategy: 'slidingWindow', limit: 5, window: '1 s', group: 'g' }, // raised
  b0: { strategy: 'slidingWindow', limit: 2, window: '1500 ms', group: 'g' },
  b1: { strategy: 'slidingWindow', limit: 2, window: '500 ms', group: 'g' }, // shortened
  c0: { strategy: 'slidingWindow', limit: 1, window: '250 ms', group: 'g' },
  c1: { strategy: 'slidingWindow', limit: 1, window: '250 ms', group: 'g' },
  // long enough for a partial gap to need the k-ary search
  d0: { strategy: 'slidingWindow', limit: 40, window: '2 s', group: 'g' },
  d1: { strategy: 'slidingWindow', limit: 30, window: '2 s', group: 'g' }, // lowered
  // a's window: checked with a, both refused by events of the same times (the binding one is the first of equals)
  e0: { strategy: 'slidingWindow', limit: 3, window: '1 s', group: 'g' },
  e1: { strategy: 'slidingWindow', limit: 2, window: '1 s', group: 'g' },
});
const BASES = ['a', 'b', 'c', 'd', 'e'] as const;
/** An expiry no script sets (the pinned clock's are an hour and seconds): set before a check, kept if it writes none. */
const MARK_MS = 1_000_000_000;

const limitsOf = (minLength: number) =>
  fc.uniqueArray(
    fc.record({
      base: fc.constantFrom(...BASES),
      edited: fc.constantFrom(false, false, false, true),
      cost: fc.oneof(
        { weight: 4, arbitrary: fc.constant(1) },
        { weight: 1, arbitrary: fc.integer({ min: 2, max: 7 }) },
      ),
    }),
    { minLength, maxLength: 4, selector: (l) => l.base },
  );

const command = fc.oneof(
  { weight: 5, arbitrary: fc.record({ op: fc.constantFrom('check' as const, 'peek' as const), limits: limitsOf(1) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('claimed' as const),
      limits: limitsOf(1),
      event: fc.constantFrom('e1', 'e2', 'e3', 'e4'),
      keepOnRefusal: fc.boolean(),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('advance' as const),
      us: fc.oneof(
        fc.integer({ min: 0, max: 999 }),
        fc.integer({ min: 1000, max: 400_000 }),
        fc.integer({ min: 400_000, max: 3_000_000 }),
      ),
    }),
  },
);

for (const target of targets) {
  describe(`Sliding windows in their own script on a ${target.name}`, () => {
    const redis = target.client();
    // what the functions' user may not run (PTTL, PEXPIRE outside a script) is done as the administrator
    const inspect = target.admin();
    before(() => Promise.all([connected(redis), connected(inspect)]));
    after(() => {
      redis.disconnect();
      inspect.disconnect();
    });
    /** Whether a check left a key's marked expiry, or what it set (ms, as Redis reports it): -2 for no key. */
    const expiryOf = async (key: string) => {
      const ttl = await inspect.pttl(key);
      return ttl > MARK_MS - 600_000 ? 'kept' : ttl;
    };

    const run = (call: ScriptCall, nowUs: number, source = pinnedScripts.named(call.script)?.source as string) =>
      redis.eval(source, call.keys.length, ...call.keys, ...call.args, String(nowUs));
    const limit = (space: string, base: string, edited: boolean, cost: number): ResolvedLimit => {
      const policy = catalogue.get(`${base}${edited ? 1 : 0}`) as ResolvedLimit['policy'];
      return { policy, key: 'k', counter: `rl:{g:${space}}:${base}:k`, cost: Math.min(cost, policy.maxCost) };
    };

    it('their own script answers and writes what check.lua does, to the µs, claims included', async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 40 }), async (commands) => {
          const own = unique('own');
          const generic = unique('gen');
          let nowUs = 1_800_000_000_000_000;
          for (const c of commands) {
            if (c.op === 'advance') {
              nowUs += c.us;
              continue;
            }
            const debit = c.op !== 'peek';
            const limits = (space: string) => c.limits.map((l) => limit(space, l.base, l.edited, l.cost));
            const claim = (space: string) =>
              c.op === 'claimed'
                ? {
                    key: `rl:{g:${space}}:once:${c.event}`,
                    ttlMs: 60_000,
                    keepOnRefusal: c.keepOnRefusal,
                    token: 'attempt1',
                  }
                : undefined;
            const ownClaim = claim(own);
            const genericClaim = claim(generic);
            const ownCall = ownClaim
              ? withClaim(claimableCheckCall(limits(own), debit), ownClaim)
              : checkCall(limits(own), debit);
            assert.equal(ownCall.script, 'check_sliding_window', 'windows take their own script');
            const [lone] = c.limits;
            if (c.op === 'check' && c.limits.length === 1 && lone) {
              // the short form: limit and window, the cost first unless it is 1
              const cost = limits(own)[0]?.cost;
              assert.equal(ownCall.args.length, cost === 1 ? 2 : 3, 'a lone debit is sent in the short form');
            }
            const genericCall = genericClaim
              ? withClaim(genericCheckCall(limits(generic), debit), genericClaim)
              : genericCheckCall(limits(generic), debit);
            assert.equal(genericCall.script, 'check:sw');
            const counters = (space: string) => BASES.map((base) => limit(space, base, false, 1).counter);
            for (const key of [...counters(own), ...counters(generic)]) await inspect.pexpire(key, MARK_MS);
            const [ownReply, genericReply] = [await run(ownCall, nowUs), await run(genericCall, nowUs)];
            const what = `${c.op} ${JSON.stringify(c.limits)} at ${nowUs}`;
            if (c.limits.length > 1 || (Array.isArray(genericReply) && genericReply.length === 1)) {
              assert.deepEqual(ownReply, genericReply, what); // check.lua's reply, or { 2 } for a taken claim
            } else {
              // one window answers its own short reply: the same decision in check.lua's layout
              const policies = limits(own).map((l) => l.policy);
              assert.deepEqual(checkReplyLayout(policies, ownReply), genericReply, what);
            }
            for (const base of BASES) {
              assert.equal(
                await redis.get(limit(own, base, false, 1).counter),
                await redis.get(limit(generic, base, false, 1).counter),
                `${base}'s stored ring after ${what}`,
              );
            }
            for (const [i, key] of counters(own).entries()) {
              const [ownTtl, genericTtl] = [await expiryOf(key), await expiryOf(counters(generic)[i] as string)];
              // an expiry set by both: to the same pinned time, written a few ms apart in real time
              if (typeof ownTtl === 'number' && typeof genericTtl === 'number' && ownTtl > 0 && genericTtl > 0) {
                assert.ok(
                  Math.abs(ownTtl - genericTtl) < 1000,
                  `${key}'s expiry ${ownTtl} vs ${genericTtl} after ${what}`,
                );
              } else {
                assert.equal(ownTtl, genericTtl, `${key}'s expiry after ${what}`);
              }
            }
            if (ownClaim && genericClaim) {
              assert.equal(await redis.get(ownClaim.key), await redis.get(genericClaim.key), `the claim after ${what}`);
            }
          }
        }),
        { numRuns: 60 },
      );
    });

    it('decides a group of steady windows in the flat path, before the fallback is reached', async () => {
      const source = pinnedScripts.named('check_sliding_window')?.source as string;
      const cut = source.indexOf('-- <fragments>');
      assert.ok(cut > 0);
      const flatOnly = `${source.slice(0, cut)}\nreturn 'fell through'\n`;
      const space = unique('flat');
      let nowUs = 1_800_000_000_000_000;
      const replies: unknown[] = [];
      // a 2-window group: fresh windows, growing rings, refusals, the oldest leaving, a wrapped ring, an idle gap
      for (let i = 0; i < 40; i++) {
        const limits = [limit(space, 'a', false, 1), limit(space, 'b', false, 1)];
        const claimed = i % 3 === 0;
        const call = claimed
          ? withClaim(claimableCheckCall(limits, true), {
              key: `rl:{g:${space}}:once:${i}`,
              ttlMs: 60_000,
              token: 'attempt1',
            })
          : checkCall(limits, i % 5 !== 4);
        replies.push(await run(call, nowUs, flatOnly));
        nowUs += i === 20 ? 5_000_000 : 180_000;
      }
      assert.deepEqual(
        replies.filter((r) => r === 'fell through'),
        [],
        'every steady check of the group decided by the flat path',
      );
      assert.ok(
        replies.some((r) => Array.isArray(r) && r[0] === 0),
        'some were refused',
      );
    });
  });
}
