/**
 * Cost budgets: a reservation's lifecycle at pinned time, and 8 OS processes
 * reserving against one budget at once, on both deployments.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { compilePolicies, compilePolicy, createLimiter, staticPolicies } from '../../layer/src/index.ts';
import { pinnedLimiter, targets, unique } from '../support/targets.ts';

const WORKER = new URL('../support/budget-worker.ts', import.meta.url).pathname;

for (const target of targets) {
  describe(`Cost budgets on a ${target.name}`, () => {
    const redis = target.client();
    after(() => redis.disconnect());

    it('release a reservation never settled after its hold, apply a late settle once, ignore a second settle', async () => {
      // Prepare: 100 units refilling 10 per second; holds last 2 s
      const policy = compilePolicy('llm', {
        strategy: 'tokenBucket',
        capacity: 100,
        refill: { tokens: 10, every: '1 s' },
        timeBudget: '5 s',
        reservation: { hold: '2 s', remember: '1 h' },
      });
      const clock = { nowUs: 1_800_000_000_000_000 };
      const limiter = pinnedLimiter({ redis, policies: { resolve: () => policy } }, clock);
      const tenant = unique('tenant');
      // Act + Assess: a caller reserves 80 and crashes
      assert.equal((await limiter.reserve('llm', tenant, 80, { id: 'crashed' })).outcome, 'allowed');
      const short = await limiter.reserve('llm', tenant, 30, { id: 'next' });
      assert.ok(short.outcome === 'limited' && short.retryAfterMs === 1000, 'waits for 10 more units');
      clock.nowUs += 2_000_000; // the hold passes (and 20 units refilled meanwhile)
      const freed = await limiter.reserve('llm', tenant, 100, { id: 'after' });
      assert.ok(freed.outcome === 'allowed', 'the crashed hold was given back: the whole budget is free');
      assert.equal(freed.binding.remaining, 0);
      // the crashed caller comes back and settles: its actual cost is debited now, once
      const late = await limiter.settle('llm', tenant, 'crashed', 30);
      assert.ok(late.decided && late.result === 'late');
      assert.equal(late.status.remaining, -30, 'owed: later reservations wait until it is paid back');
      const again = await limiter.settle('llm', tenant, 'crashed', 30);
      assert.ok(again.decided && again.result === 'duplicate' && again.status.remaining === -30);
      // settling the full hold at a lower cost refunds the difference
      const refund = await limiter.settle('llm', tenant, 'after', 40);
      assert.ok(refund.decided && refund.result === 'settled' && refund.status.remaining === 30);
      // waiting exactly the retry-after admits, while owing
      const wait = await limiter.reserve('llm', tenant, 50, { id: 'waits' });
      assert.ok(wait.outcome === 'limited' && wait.retryAfterMs === 2000);
      clock.nowUs += 1_999_000;
      assert.equal((await limiter.reserve('llm', tenant, 50, { id: 'waits' })).outcome, 'limited');
      clock.nowUs += 1_000;
      assert.equal((await limiter.reserve('llm', tenant, 50, { id: 'waits' })).outcome, 'allowed');
      assert.equal((await limiter.settle('llm', tenant, 'never-reserved', 5)).decided && 'unknown', 'unknown');
    });

    it('never hold more than the budget under 8 processes, and spend exactly the actual costs', async (t) => {
      const tenant = unique('tenant');
      const catalogue = {
        'llm-budget': {
          strategy: 'tokenBucket',
          capacity: 5000,
          refill: { tokens: 1, every: '1 h' }, // no refill worth a unit during the run
          timeBudget: '5 s',
        },
      };
      const run = <T>(phase: 'reserve' | 'settle', worker: number, extra: object = {}) =>
        promisify(execFile)(process.execPath, [
          WORKER,
          JSON.stringify({ phase, redis: target.settings(), catalogue, tenant, worker, ...extra }),
        ]).then(({ stdout }) => JSON.parse(stdout) as T);
      // every process reserves until refused; only then do they settle
      const reserved = await Promise.all(
        Array.from({ length: 8 }, (_, w) => run<{ held: { id: string; units: number }[] }>('reserve', w)),
      );
      const settled = await Promise.all(reserved.map((r, w) => run<{ actual: number }>('settle', w, { held: r.held })));
      const results = reserved.map((r, w) => ({
        held: r.held.reduce((a, h) => a + h.units, 0),
        actual: (settled[w] as { actual: number }).actual,
      }));
      const held = results.reduce((a, r) => a + r.held, 0);
      const actual = results.reduce((a, r) => a + r.actual, 0);
      t.diagnostic(`8 processes held ${held} of a budget of 5000 at the peak; settled actual costs ${actual}`);
      assert.ok(held <= 5000, `held ${held}`);
      assert.ok(held > 5000 - 40, `the budget was used up (${held})`);
      // settling an unknown id changes nothing, and tells where the budget stands
      const real = createLimiter({ redis, policies: staticPolicies(compilePolicies(catalogue)) });
      const after = await real.settle('llm-budget', tenant, 'probe-unknown', 0);
      assert.ok(after.decided && after.result === 'unknown');
      assert.equal(after.status.remaining, 5000 - actual, 'spent exactly the sum of the actual costs');
    });
  });
}
