/**
 * Exactness under concurrency: 4 OS processes, 16 checks in flight each, hammer
 * one key; exactly the limit is admitted. Refill is far slower than the run,
 * so the limit is the only thing that admits. The time budget is generous:
 * 4 processes and 3 cluster nodes share 2 cores here, and this measures
 * exactness, not latency (a check past its budget would be degraded).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import type { CheckRequest } from '@platform/rate-limit';
import { compilePolicies, createLimiter, type RedisSettings, staticPolicies } from '@platform/rate-limit';
import { targets, unique } from '../support/targets.ts';

const WORKER = new URL('../support/hammer-worker.ts', import.meta.url).pathname;
const PROCESSES = 4;
const ATTEMPTS = 1500; // per process: 6000 attempts against limits of a few hundred
const budget = { timeBudget: '5 s' };

type Counts = { allowed: number; limited: number; degraded: number };

async function hammer(
  redis: RedisSettings,
  catalogue: Record<string, unknown>,
  requestsOf: (worker: number) => CheckRequest[],
  scope?: string,
): Promise<Counts[]> {
  return Promise.all(
    Array.from({ length: PROCESSES }, async (_, worker) => {
      const input = { redis, catalogue, requests: requestsOf(worker), scope, attempts: ATTEMPTS, inFlight: 16 };
      const { stdout } = await promisify(execFile)(process.execPath, [WORKER, JSON.stringify(input)]);
      return JSON.parse(stdout) as Counts;
    }),
  );
}

const sum = (counts: Counts[], field: keyof Counts) => counts.reduce((total, c) => total + c[field], 0);

for (const target of targets) {
  describe(`Concurrent checks from ${PROCESSES} processes on a ${target.name}`, () => {
    const redis = target.client();
    const settings = target.settings();
    after(() => redis.disconnect());

    it('admit exactly the capacity of a token bucket', async (t) => {
      const name = unique('tb');
      const catalogue = {
        [name]: { strategy: 'tokenBucket', capacity: 500, refill: { tokens: 1, every: '1 h' }, ...budget },
      };
      const counts = await hammer(settings, catalogue, () => [{ policy: name, key: 'hot' }]);
      t.diagnostic(
        `token bucket: admitted ${sum(counts, 'allowed')} of capacity 500 in ${PROCESSES * ATTEMPTS} attempts`,
      );
      assert.equal(sum(counts, 'degraded'), 0);
      assert.equal(sum(counts, 'allowed'), 500);
      assert.equal(sum(counts, 'limited'), PROCESSES * ATTEMPTS - 500);
    });

    it('admit exactly the limit of a sliding window', async (t) => {
      const name = unique('sw');
      const catalogue = { [name]: { strategy: 'slidingWindow', limit: 500, window: '1 h', ...budget } };
      const counts = await hammer(settings, catalogue, () => [{ policy: name, key: 'hot' }]);
      t.diagnostic(
        `sliding window: admitted ${sum(counts, 'allowed')} of limit 500 in ${PROCESSES * ATTEMPTS} attempts`,
      );
      assert.equal(sum(counts, 'degraded'), 0);
      assert.equal(sum(counts, 'allowed'), 500);
    });

    it('admit exactly the tighter limit of a multi-limit check, and debit only what was admitted', async (t) => {
      // Prepare: one IP (window of 500), two accounts (buckets of 300); processes
      // 0-1 use account a, 2-3 account b. The IP binds: exactly 500 pass. The
      // IP is the coarsest dimension, so it is the check's scope (hash tag).
      const group = unique('g');
      const [ip, account] = [`${group}-ip`, `${group}-acct`];
      const catalogue = {
        [ip]: { strategy: 'slidingWindow', limit: 500, window: '1 h', group, ...budget },
        [account]: { strategy: 'tokenBucket', capacity: 300, refill: { tokens: 1, every: '1 h' }, group, ...budget },
      };
      const accountOf = (worker: number) => (worker < 2 ? 'a' : 'b');
      // Act
      const scope = '203.0.113.7';
      const counts = await hammer(
        settings,
        catalogue,
        (worker) => [
          { policy: ip, key: '203.0.113.7' },
          { policy: account, key: accountOf(worker) },
        ],
        scope,
      );
      // Assess
      const admittedA = (counts[0] as Counts).allowed + (counts[1] as Counts).allowed;
      const admittedB = (counts[2] as Counts).allowed + (counts[3] as Counts).allowed;
      t.diagnostic(
        `multi-limit: admitted ${admittedA + admittedB} of IP limit 500 (a ${admittedA}, b ${admittedB}, each ≤ 300)`,
      );
      assert.equal(sum(counts, 'degraded'), 0);
      assert.equal(admittedA + admittedB, 500);
      assert.ok(admittedA <= 300 && admittedB <= 300);
      // every account bucket was debited exactly by its admitted checks, never by a denial
      const limiter = createLimiter({ redis, policies: staticPolicies(compilePolicies(catalogue)) });
      const peekA = await limiter.peek([{ policy: account, key: 'a' }], { scope });
      const peekB = await limiter.peek([{ policy: account, key: 'b' }], { scope });
      assert.ok(peekA.outcome !== 'degraded' && peekB.outcome !== 'degraded');
      // a peek's `remaining` is what is left (nothing is debited)
      assert.equal(peekA.binding.remaining, 300 - admittedA);
      assert.equal(peekB.binding.remaining, 300 - admittedB);
    });
  });
}
