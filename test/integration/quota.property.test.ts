/**
 * The calendar quota (lua/lib/quota.lua) against its reference model
 * (test/model/reference-model.ts, whose calendar is JavaScript's Date.UTC, not
 * the Lua's day arithmetic), at pinned times that straddle the boundaries
 * where calendars go wrong: the end of a 31-day month, February 29th of a leap
 * year, a year's end, a Sunday night, and a fixed offset from UTC. Checks
 * alone, peeks, and the quota together with a token bucket (burst + monthly
 * cap, all-or-nothing) give the model's replies to the µs.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { after, describe, it } from 'node:test';
import { type CompiledPolicy, compilePolicy, InvalidPolicyError } from '@platform/rate-limit';
import { checkReplyLayout, parseCheckReply } from '@platform/rate-limit/lua';
import fc from 'fast-check';
import { type ModelLimit, modelInterval, quotaPeriodUs, ReferenceModel } from '../model/reference-model.ts';
import { pinnedLimiter, recordingReplies, targets, unique } from '../support/targets.ts';

const at = (iso: string) => Date.parse(iso) * 1000;
/** Instants 1 s before the boundaries that calendars get wrong. */
const EDGES = [
  at('2027-01-31T23:59:59Z'), // the end of a 31-day month
  at('2028-02-28T23:59:59Z'), // the eve of a leap day
  at('2028-02-29T23:59:59Z'), // a leap day's end
  at('2026-12-31T23:59:59Z'), // a year's end
  at('2026-12-06T23:59:59Z'), // a Sunday night (ISO weeks start on Monday)
  at('2027-03-31T18:29:59Z'), // 23:59:59 at +05:30 on the 31st
];
const DAY_US = 86_400_000_000;

const PERIODS = ['day', 'week', 'month'] as const;
const OFFSETS = [undefined, '+05:30', '-08:00', '+14:00'] as const;

const command = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('check' as const), cost: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('peek' as const), cost: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('both' as const), cost: fc.integer({ min: 1, max: 2 }) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('advance' as const),
      us: fc.oneof(fc.integer({ min: 0, max: 2_000_000 }), fc.integer({ min: 0, max: 40 * DAY_US })),
    }),
  },
  // exactly to the boundary, or 1 µs before it: the reset must be exact
  { weight: 2, arbitrary: fc.record({ op: fc.constant('toBoundary' as const), early: fc.constantFrom(0, 1) }) },
);

for (const target of targets) {
  describe(`The calendar quota and its model on a ${target.name}`, () => {
    const redis = target.client();
    const recorded = recordingReplies(redis);
    after(() => redis.disconnect());

    it('give identical replies across month ends, leap days, week starts and offsets', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...EDGES),
          fc.constantFrom(...PERIODS),
          fc.constantFrom(...OFFSETS),
          fc.integer({ min: 1, max: 6 }),
          fc.array(command, { minLength: 1, maxLength: 40 }),
          async (edge, period, utcOffset, limit, commands) => {
            const group = unique('q');
            const quota = compilePolicy('p-qt', {
              strategy: 'quota',
              limit,
              period,
              ...(utcOffset ? { utcOffset } : {}),
              group,
              timeBudget: '5 s',
            });
            const bucket = compilePolicy('p-tb', {
              strategy: 'tokenBucket',
              capacity: 3,
              refill: { tokens: 1, every: '1 s' },
              group,
              timeBudget: '5 s',
            });
            const byName = new Map<string, CompiledPolicy>([
              ['p-qt', quota],
              ['p-tb', bucket],
            ]);
            const clock = { nowUs: edge };
            const limiter = pinnedLimiter(
              {
                redis: recorded.client,
                policies: { resolve: (name) => byName.get(name) },
                onDegraded: (e) => assert.fail(`degraded: ${e.detail}`),
              },
              clock,
            );
            const model = new ReferenceModel();
            const offsetUs = quota.strategy === 'quota' ? quota.offsetUs : 0;
            const qt = (cost: number): ModelLimit => ({ kind: 'qt', key: 'k', limit, period, offsetUs, cost });
            const tb = (cost: number): ModelLimit => ({
              kind: 'tb',
              key: 't',
              capacity: 3,
              intervalUs: modelInterval(1_000_000, 1),
              cost,
            });
            for (const c of commands) {
              if (c.op === 'advance') clock.nowUs += c.us;
              else if (c.op === 'toBoundary') clock.nowUs = quotaPeriodUs(clock.nowUs, period, offsetUs)[1] - c.early;
              else if (c.cost > limit) {
                await assert.rejects(limiter.check({ policy: 'p-qt', key: 'k', cost: c.cost }, { scope: group }));
              } else {
                const both = c.op === 'both';
                const requests = both
                  ? [
                      { policy: 'p-tb', key: 't', cost: c.cost },
                      { policy: 'p-qt', key: 'k', cost: c.cost },
                    ]
                  : [{ policy: 'p-qt', key: 'k', cost: c.cost }];
                const policies = both ? [bucket, quota] : [quota];
                const decision =
                  c.op === 'peek'
                    ? await limiter.peek(requests, { scope: group })
                    : await limiter.checkAll(requests, { scope: group });
                const reply = model.check(both ? [tb(c.cost), qt(c.cost)] : [qt(c.cost)], clock.nowUs, c.op !== 'peek');
                assert.deepEqual(checkReplyLayout(policies, recorded.last()), reply, 'replies (µs) differ');
                assert.deepEqual(decision, parseCheckReply(policies, reply));
              }
            }
          },
        ),
        { numRuns: 60 },
      );
    });

    it('admit exactly the limit in a month, refuse until its last µs, and admit again at the first µs of the next', async () => {
      const clock = { nowUs: at('2028-02-01T00:00:00Z') };
      const name = unique('monthly');
      const policy = compilePolicy(name, { strategy: 'quota', limit: 3, period: 'month', timeBudget: '5 s' });
      const limiter = pinnedLimiter({ redis, policies: { resolve: () => policy } }, clock);
      for (let i = 0; i < 3; i++) assert.equal((await limiter.check({ policy: name, key: 'k' })).outcome, 'allowed');
      clock.nowUs = at('2028-02-29T23:59:59.999Z') + 999; // the last µs of a leap February
      const refused = await limiter.check({ policy: name, key: 'k' });
      assert.equal(refused.outcome, 'limited');
      assert.equal(refused.retryAfterMs, 1, 'retry at the boundary, 1 µs away, rounded up to 1 ms');
      clock.nowUs = at('2028-03-01T00:00:00Z');
      const next = await limiter.check({ policy: name, key: 'k' });
      assert.equal(next.outcome, 'allowed');
      assert.equal(next.allowed && next.binding.resetAfterMs, 31 * 86_400_000, 'March resets in 31 days');
    });
  });
}

describe('A quota policy', () => {
  it('is refused with its reason when its period or offset is not one', () => {
    for (const [config, reason] of [
      [{ strategy: 'quota', limit: 10, period: 'year' }, /period must be "day", "week" or "month"/],
      [{ strategy: 'quota', limit: 10, period: 'day', utcOffset: '+15:00' }, /utcOffset/],
      [{ strategy: 'quota', limit: 0, period: 'day' }, /limit must be at least 1/],
    ] as const) {
      assert.throws(
        () => compilePolicy('q', config),
        (e: unknown) => e instanceof InvalidPolicyError && reason.test(e.message),
      );
    }
  });
});

describe('8 processes on one monthly quota across its boundary', () => {
  it('admit exactly the limit before the 1st and exactly the limit after it, never more', async (t) => {
    const target = targets[1] ?? (targets[0] as (typeof targets)[number]); // the production-shaped cluster
    const name = unique('month8');
    const limit = 50;
    const input = {
      redis: target.settings(),
      catalogue: { [name]: { strategy: 'quota', limit, period: 'month', timeBudget: '5 s' } },
      policy: name,
      key: 'tenant',
      boundaryUs: at('2027-01-01T00:00:00Z'),
      attempts: 40, // 8 × 40 = 320 attempts a period for a limit of 50
    };
    const workers = Array.from({ length: 8 }, () =>
      spawn(
        process.execPath,
        [new URL('../support/quota-worker.ts', import.meta.url).pathname, JSON.stringify(input)],
        {
          stdio: ['pipe', 'pipe', 'inherit'],
        },
      ),
    );
    const lineReaders = workers.map((w) => createInterface({ input: w.stdout })[Symbol.asyncIterator]());
    const next = async () =>
      Promise.all(lineReaders.map(async (r) => JSON.parse((await r.next()).value as string) as Record<string, number>));
    const before = await next(); // every process has finished its checks before the boundary
    for (const w of workers) w.stdin.write('go\n');
    const afterBoundary = await next();
    for (const w of workers) w.stdin.end();
    const sum = (phase: Record<string, number>[], field: string) => phase.reduce((n, c) => n + (c[field] ?? 0), 0);
    t.diagnostic(
      `December: ${sum(before, 'allowed')} admitted of ${8 * 40}; January: ${sum(afterBoundary, 'allowed')} admitted of ${8 * 40}`,
    );
    assert.equal(sum(before, 'degraded') + sum(afterBoundary, 'degraded'), 0);
    assert.equal(sum(before, 'allowed'), limit, 'December: exactly its limit');
    assert.equal(sum(afterBoundary, 'allowed'), limit, 'January: exactly its limit, counted afresh');
  });
});
