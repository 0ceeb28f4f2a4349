/**
 * Cost budgets (reserve, then settle) in Lua against the TypeScript model, at
 * pinned time, on both deployments: random sequences of reservations, settles
 * (under, over and exactly the estimate), crashes that never settle, late and
 * duplicate settles, and time passing across holds and refills.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { compilePolicy, InvalidCheckError } from '@platform/rate-limit';
import fc from 'fast-check';
import { BudgetModel } from '../model/budget-model.ts';
import { pinnedLimiter, recordingReplies, targets, unique } from '../support/targets.ts';

const budget = compilePolicy('llm', {
  strategy: 'tokenBucket',
  capacity: 100,
  refill: { tokens: 10, every: '1 s' },
  failureMode: 'closed',
  timeBudget: '5 s', // decisions, not latency (a loaded CI machine)
  reservation: { hold: '2 s', remember: '10 s' },
});

const command = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('reserve' as const),
      id: fc.nat({ max: 12 }),
      units: fc.integer({ min: 1, max: 60 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('settle' as const),
      id: fc.nat({ max: 14 }),
      actual: fc.integer({ min: 0, max: 120 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('advance' as const),
      us: fc.oneof(
        fc.integer({ min: 0, max: 999 }),
        fc.integer({ min: 1000, max: 1_500_000 }),
        fc.integer({ min: 1_900_000, max: 12_000_000 }),
      ),
    }),
  },
);

for (const target of targets) {
  describe(`Cost budgets and the model on a ${target.name}`, () => {
    const redis = target.client();
    const recorded = recordingReplies(redis);
    after(() => redis.disconnect());

    it('give identical replies for random reserve / settle / crash / late and duplicate settle sequences', async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 40 }), async (commands) => {
          const clock = { nowUs: 1_800_000_000_000_000 };
          const limiter = pinnedLimiter(
            { redis: recorded.client, policies: { resolve: () => budget }, onDegraded: (e) => assert.fail(e.detail) },
            clock,
          );
          const model = new BudgetModel(100, 100_000, 2_000_000, 10_000_000);
          const tenant = unique('tenant');
          for (const c of commands) {
            if (c.op === 'advance') {
              clock.nowUs += c.us;
            } else if (c.op === 'reserve') {
              const expected = model.reserve(`r${c.id}`, c.units, clock.nowUs);
              const act = limiter.reserve('llm', tenant, c.units, { id: `r${c.id}` });
              if (expected[0] === 2) {
                await assert.rejects(act, InvalidCheckError);
              } else {
                const decision = await act;
                assert.equal(decision.outcome, expected[0] === 1 ? 'allowed' : 'limited');
              }
              assert.deepEqual(recorded.last(), expected, `reserve r${c.id} ${c.units}`);
            } else {
              const expected = model.settle(`r${c.id}`, c.actual, clock.nowUs);
              const outcome = await limiter.settle('llm', tenant, `r${c.id}`, c.actual);
              assert.ok(outcome.decided);
              assert.deepEqual(recorded.last(), expected, `settle r${c.id} ${c.actual}`);
            }
          }
        }),
        { numRuns: 100 },
      );
    });
  });
}
