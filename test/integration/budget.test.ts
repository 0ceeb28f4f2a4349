/**
 * Cost budgets: a reservation's lifecycle at pinned time, and 8 OS processes
 * reserving against one budget at once, on both deployments.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { compilePolicies, compilePolicy, createLimiter, InvalidCheckError, staticPolicies } from '@platform/rate-limit';
import { budgetKeys, counterKey } from '@platform/rate-limit/policy';
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

    it("give back exactly what a hold charged when the budget's rate changed before its settle (an override)", async () => {
      const budget = (tokensPerHour: number) =>
        compilePolicy('llm', {
          strategy: 'tokenBucket',
          capacity: 1000,
          refill: { tokens: tokensPerHour, every: '1 h' },
          timeBudget: '5 s',
          reservation: { hold: '2 m', remember: '5 m' },
        });
      const clock = { nowUs: 1_800_000_000_000_000 };
      const at = (tokensPerHour: number) => {
        const policy = budget(tokensPerHour);
        return pinnedLimiter({ redis, policies: { resolve: () => policy } }, clock);
      };
      // Act: reserved at 1000 tokens/h, settled at nothing once the rate is 2000/h
      const faster = unique('tenant');
      assert.equal((await at(1000).reserve('llm', faster, 500, { id: 'call' })).outcome, 'allowed');
      const refunded = await at(2000).settle('llm', faster, 'call', 0);
      // Assess: the whole charge given back (half of it was, at the new rate's µs per unit)
      assert.ok(refunded.decided && refunded.result === 'settled');
      assert.equal(refunded.status.remaining, 1000);
      // Act: two calls reserved at 2000/h, one settled at nothing once the rate is 1000/h
      const slower = unique('tenant');
      assert.equal((await at(2000).reserve('llm', slower, 300, { id: 'a' })).outcome, 'allowed');
      assert.equal((await at(2000).reserve('llm', slower, 200, { id: 'b' })).outcome, 'allowed');
      const settled = await at(1000).settle('llm', slower, 'a', 0);
      // Assess: b's charge still owed (200 units at 2000/h: 100 at 1000/h); twice a's charge would have wiped it
      assert.ok(settled.decided);
      assert.equal(settled.status.remaining, 900);
      // an amount kept before amounts were kept in µs (a bare number of units) settles at the rate in force
      const older = unique('tenant');
      assert.equal((await at(1000).reserve('llm', older, 400, { id: 'old' })).outcome, 'allowed');
      const amountsKey = budgetKeys(counterKey(budget(1000), older))[2];
      await redis.hset(amountsKey, 'old', '400');
      const legacy = await at(1000).settle('llm', older, 'old', 100);
      assert.ok(legacy.decided && legacy.result === 'settled' && legacy.status.remaining === 900);
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

    it('charge a call whose process was killed mid-flight its whole estimate once its hold lapses', async (t) => {
      // Prepare: the platform's budget shape (1 000 000 µUSD per hour), a hold of 2 s, at pinned time
      const catalogue = {
        'llm-budget': {
          strategy: 'tokenBucket',
          capacity: 1_000_000,
          refill: { tokens: 1_000_000, every: '1 h' },
          timeBudget: '5 s',
          reservation: { hold: '2 s', remember: '1 m' },
        },
      };
      const tenant = unique('tenant');
      const startUs = 1_800_000_000_000_000;
      // Act: a real process reserves 325 790 µUSD, then hangs in its "provider call" and is killed
      const worker = spawn(process.execPath, [
        WORKER,
        JSON.stringify({
          phase: 'hang',
          redis: target.settings(),
          catalogue,
          tenant,
          worker: 0,
          id: 'killed-call',
          units: 325_790,
          nowUs: startUs,
        }),
      ]);
      const [line] = (await once(worker.stdout, 'data')) as [Buffer];
      assert.deepEqual(JSON.parse(line.toString()), { held: true });
      worker.kill('SIGKILL');
      const [, signal] = await once(worker, 'exit');
      assert.equal(signal, 'SIGKILL');
      // Assess: well past the hold (3 s), the budget is short of the estimate, less what refilled
      const clock = { nowUs: startUs + 3_000_000 };
      const limiter = pinnedLimiter({ redis, policies: staticPolicies(compilePolicies(catalogue)) }, clock);
      const probe = await limiter.settle('llm-budget', tenant, 'probe-unknown', 0);
      assert.ok(probe.decided && probe.result === 'unknown');
      const refilled = Math.floor(3_000_000 / 3600); // 1 µUSD per 3600 µs
      t.diagnostic(`after the kill and the hold's lapse the budget reads ${probe.status.remaining} of 1000000`);
      assert.equal(probe.status.remaining, 1_000_000 - 325_790 + refilled, 'charged: a crash refunds nothing');
    });

    it('keep the remembered ids bounded under a flood of calls, and forget them after the retention', async (t) => {
      // Prepare: a budget no flood exhausts, holds of 1 s remembered 10 s
      const policy = compilePolicy('llm', {
        strategy: 'tokenBucket',
        capacity: 100_000,
        refill: { tokens: 100_000, every: '1 s' },
        timeBudget: '5 s',
        reservation: { hold: '1 s', remember: '10 s' },
      });
      const clock = { nowUs: 1_800_000_000_000_000 };
      const limiter = pinnedLimiter({ redis, policies: { resolve: () => policy } }, clock);
      const tenant = unique('tenant');
      const [, holdsKey, amountsKey, settledKey] = budgetKeys(counterKey(policy, tenant));
      const admin = target.admin();
      t.after(() => admin.disconnect());
      const sizes = async () => ({
        holds: await admin.zcard(holdsKey),
        amounts: await admin.hlen(amountsKey),
        settled: await admin.zcard(settledKey),
      });
      // Act: 10 500 calls reserved and settled, then 10 500 reserved and never settled (crashed)
      const FLOOD = 10_500;
      for (let i = 0; i < FLOOD; i += 500) {
        await Promise.all(
          Array.from({ length: 500 }, async (_, j) => {
            const id = `s${i + j}`;
            await limiter.reserve('llm', tenant, 1, { id });
            await limiter.settle('llm', tenant, id, 1);
          }),
        );
      }
      for (let i = 0; i < FLOOD; i += 500) {
        await Promise.all(
          Array.from({ length: 500 }, (_, j) => limiter.reserve('llm', tenant, 1, { id: `c${i + j}` })),
        );
      }
      // Assess: each set at most its cap (10 000) and the hash beside the holds no bigger
      const flooded = await sizes();
      t.diagnostic(`after ${FLOOD} settled and ${FLOOD} crashed calls: ${JSON.stringify(flooded)}`);
      if (target.name === 'single node') {
        const bytes = await admin.call('MEMORY', 'USAGE', settledKey);
        t.diagnostic(`the settled set at its cap: ${bytes} bytes`);
      }
      assert.ok(flooded.settled <= 10_000 && flooded.settled >= 10_000 - 100, `settled ${flooded.settled}`);
      assert.ok(flooded.holds <= 10_000 && flooded.holds >= 10_000 - 100, `holds ${flooded.holds}`);
      assert.equal(flooded.amounts, flooded.holds);
      // past the hold and the retention, each call forgets at most 100 per set: 101 calls forget them all
      clock.nowUs += 11_000_001;
      for (let i = 0; i < 101; i++) await limiter.settle('llm', tenant, 'probe', 0);
      assert.deepEqual(await sizes(), { holds: 0, amounts: 0, settled: 0 });
    });
  });
}
