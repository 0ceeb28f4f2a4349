/**
 * A lone token bucket or a group of them is decided by the token bucket's own
 * script (lua/check_token_bucket.lua, a lone bucket's debit in its short
 * form), not by lua/check.lua's generic loop: it is there for speed only, so
 * it must be check.lua to the µs. Random sequences of lone and grouped checks
 * and peeks (costs up to what is left and past it, rates that
 * do not divide evenly, an adaptive bucket whose runtime rate is set and
 * lapses, two adaptive buckets in one group) run against two key spaces, one through each script, at pinned
 * times: every reply and every stored value must be the same.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { compilePolicies } from '@platform/rate-limit';
import {
  checkCall,
  checkReplyLayout,
  genericCheckCall,
  type ResolvedLimit,
  type ScriptCall,
} from '@platform/rate-limit/lua';
import type { CompiledTokenBucket } from '@platform/rate-limit/policy';
import { setRateCall } from '@platform/rate-limit/policy';
import fc from 'fast-check';
import { connected, pinnedScripts, targets, unique } from '../support/targets.ts';

const catalogue = compilePolicies({
  small: { strategy: 'tokenBucket', capacity: 3, refill: { tokens: 1, every: '1 s' }, group: 'g' },
  // 333 333.3… µs a token: rounded up to a whole µs
  uneven: { strategy: 'tokenBucket', capacity: 7, refill: { tokens: 3, every: '1 s' }, group: 'g' },
  fast: { strategy: 'tokenBucket', capacity: 1, refill: { tokens: 6, every: '1 s' }, group: 'g' },
  adaptive: {
    strategy: 'tokenBucket',
    capacity: 4,
    refill: { tokens: 2, every: '1 s' },
    adaptive: { min: 0.5, max: 8, increaseBy: 1, decreaseFactor: 0.5, keep: '3 s' },
    group: 'g',
  },
  // a second adaptive bucket: each one's runtime-rate key must reach it, in order
  steady: {
    strategy: 'tokenBucket',
    capacity: 2,
    refill: { tokens: 1, every: '500 ms' },
    adaptive: { min: 0.25, max: 4, increaseBy: 0.5, decreaseFactor: 0.5, keep: '2 s' },
    group: 'g',
  },
});
const NAMES = ['small', 'uneven', 'fast', 'adaptive', 'steady'] as const;
const ADAPTIVE = ['adaptive', 'steady'] as const;

const command = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constantFrom('check' as const, 'peek' as const),
      limits: fc.uniqueArray(fc.record({ name: fc.constantFrom(...NAMES), cost: fc.integer({ min: 1, max: 7 }) }), {
        minLength: 1,
        maxLength: 4,
        selector: (l) => l.name,
      }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('advance' as const),
      us: fc.oneof(fc.integer({ min: 0, max: 999 }), fc.integer({ min: 1000, max: 4_000_000 })),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('rate' as const),
      name: fc.constantFrom(...ADAPTIVE),
      rate: fc.constantFrom(0.5, 1, 3, 3.5),
    }),
  },
);

for (const target of targets) {
  describe(`Grouped token buckets on a ${target.name}`, () => {
    const redis = target.client();
    before(() => connected(redis));
    after(() => redis.disconnect());

    const run = (call: ScriptCall, nowUs: number) => {
      const script = pinnedScripts.named(call.script)?.source as string;
      return redis.eval(script, call.keys.length, ...call.keys, ...call.args, String(nowUs));
    };

    it('their own script answers and writes what check.lua does, to the µs', async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 40 }), async (commands) => {
          const own = unique('own');
          const generic = unique('gen');
          let nowUs = 1_800_000_000_000_000;
          const limit = (space: string, name: string, cost: number): ResolvedLimit => ({
            policy: catalogue.get(name) as ResolvedLimit['policy'],
            key: 'k',
            counter: `rl:{g:${space}}:${name}:k`,
            cost,
          });
          for (const c of commands) {
            if (c.op === 'advance') {
              nowUs += c.us;
              continue;
            }
            if (c.op === 'rate') {
              for (const space of [own, generic]) {
                const l = limit(space, c.name, 1);
                const call = setRateCall(l.policy as CompiledTokenBucket, l.counter, { kind: 'set', rate: c.rate });
                await run({ script: 'set_rate', ...call }, nowUs);
              }
              continue;
            }
            const debit = c.op === 'check';
            const ownCall = checkCall(
              c.limits.map((l) => limit(own, l.name, l.cost)),
              debit,
            );
            assert.equal(ownCall.script, 'check_token_bucket', 'buckets take their own script');
            const [lone] = c.limits;
            if (c.limits.length === 1 && debit && lone && !ADAPTIVE.some((name) => name === lone.name)) {
              // the short form: capacity and interval, the cost first unless it is 1
              assert.equal(ownCall.args.length, lone.cost === 1 ? 2 : 3, 'a lone debit is sent in the short form');
            }
            const genericCall = genericCheckCall(
              c.limits.map((l) => limit(generic, l.name, l.cost)),
              debit,
            );
            assert.equal(genericCall.script, 'check:tb');
            // a lone bucket's reply is shorter: compared in check.lua's layout, as the limiter reads it
            const policies = c.limits.map((l) => catalogue.get(l.name) as ResolvedLimit['policy']);
            assert.deepEqual(
              checkReplyLayout(policies, await run(ownCall, nowUs)),
              await run(genericCall, nowUs),
              `${c.op} ${JSON.stringify(c.limits)}`,
            );
            for (const name of NAMES) {
              assert.equal(
                await redis.get(limit(own, name, 1).counter),
                await redis.get(limit(generic, name, 1).counter),
                `${name}'s stored state`,
              );
            }
          }
        }),
        { numRuns: 60 },
      );
    });
  });
}
