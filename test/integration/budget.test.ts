/**
 * Cost budgets: a reservation's lifecycle at pinned time, and 8 OS processes
 * reserving against one budget at once, on both deployments.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import {
  compilePolicies,
  compilePolicy,
  createLimiter,
  InvalidCheckError,
  staticPolicies,
} from '../../layer/src/index.ts';
import { pinnedLimiter, targets, unique } from '../support/targets.ts';

const WORKER = new URL('../support/budget-worker.ts', import.meta.url).pathname;

for (const target of targets) {
  describe(`Cost budgets on a ${target.name}`, () => {
    const redis = target.client();
    after(() => redis.disconnect());

    it('keep a reservation never settled charged after its hold lapses, true it up by a late settle once, ignore a second settle', async () => {
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
      clock.nowUs += 2_000_000; // the hold lapses (and 20 units refilled meanwhile)
      const whole = await limiter.reserve('llm', tenant, 100, { id: 'whole' });
      assert.ok(whole.outcome === 'limited', 'the lapsed hold stays charged: the budget is not whole again');
      const rest = await limiter.reserve('llm', tenant, 40, { id: 'after' });
      assert.ok(
        rest.outcome === 'allowed' && rest.binding.remaining === 0,
        'only what refilled is free: 100 - 80 + 20',
      );
      await assert.rejects(limiter.reserve('llm', tenant, 10, { id: 'crashed' }), InvalidCheckError, 'no second hold');
      // the crashed caller comes back and settles: its hold is trued up to the actual cost now, once
      const late = await limiter.settle('llm', tenant, 'crashed', 30);
      assert.ok(late.decided && late.result === 'late');
      assert.equal(late.status.remaining, 50, '80 charged, 30 spent: 50 given back');
      const again = await limiter.settle('llm', tenant, 'crashed', 30);
      assert.ok(again.decided && again.result === 'duplicate' && again.status.remaining === 50);
      // a settle above the hold debits the extra, past empty
      const over = await limiter.settle('llm', tenant, 'after', 140);
      assert.ok(over.decided && over.result === 'settled' && over.status.remaining === -50);
      // waiting exactly the retry-after admits, while owing
      const wait = await limiter.reserve('llm', tenant, 50, { id: 'waits' });
      assert.ok(wait.outcome === 'limited' && wait.retryAfterMs === 10_000);
      clock.nowUs += 9_999_000;
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
