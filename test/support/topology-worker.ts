/**
 * One OS process checking limits without pause until told to stop (spawned by
 * the failover and resharding tests), recording every decision.
 * argv[2]: JSON { redis: RedisSettings, catalogue, checks: [{ requests, scope? }], inFlight }.
 * The checks are taken in turn. On the IPC message 'stop' it finishes the
 * checks in flight and sends back { times, outcomes, latencies, allowedBy, threw }:
 * per decision its end (ms since the epoch), its outcome (a: allowed,
 * l: limited, d: degraded) and how long it took; admitted checks per check
 * index; and how many checks threw (a check must never throw).
 */

import type { CheckRequest } from '@platform/rate-limit';
import { compilePolicies, createLimiter, type RedisSettings, staticPolicies } from '@platform/rate-limit';
import { testRedisClient } from './targets.ts';

interface WorkerInput {
  redis: RedisSettings;
  catalogue: Record<string, unknown>;
  checks: { requests: CheckRequest[]; scope?: string }[];
  inFlight: number;
}

export interface TopologyWorkerResult {
  times: number[];
  outcomes: string;
  latencies: number[];
  allowedBy: number[];
  threw: number;
}

const input = JSON.parse(process.argv[2] ?? '{}') as WorkerInput;
const redis = testRedisClient(input.redis);
const limiter = createLimiter({ redis, policies: staticPolicies(compilePolicies(input.catalogue)) });
const result: TopologyWorkerResult = {
  times: [],
  outcomes: '',
  latencies: [],
  allowedBy: input.checks.map(() => 0),
  threw: 0,
};
const outcomes: string[] = [];
let running = true;
let next = 0;

async function lane(): Promise<void> {
  while (running) {
    const index = next++ % input.checks.length;
    const check = input.checks[index] as WorkerInput['checks'][number];
    const started = performance.now();
    try {
      const decision = await limiter.checkAll(check.requests, check.scope === undefined ? {} : { scope: check.scope });
      result.times.push(Date.now());
      result.latencies.push(Math.round((performance.now() - started) * 10) / 10);
      outcomes.push(decision.outcome === 'allowed' ? 'a' : decision.outcome === 'limited' ? 'l' : 'd');
      if (decision.outcome === 'allowed') result.allowedBy[index] = (result.allowedBy[index] ?? 0) + 1;
    } catch (error) {
      result.threw++;
      process.stderr.write(`check threw: ${String(error)}\n`);
    }
    // a degraded answer can be immediate: yield a turn, so the parent's 'stop' is still heard
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const lanes = Array.from({ length: input.inFlight }, lane);
process.send?.('started');
process.on('message', async (message) => {
  if (message !== 'stop') return;
  running = false;
  await Promise.all(lanes);
  result.outcomes = outcomes.join('');
  process.send?.(result, () => {
    redis.disconnect();
    process.exit(0);
  });
});
