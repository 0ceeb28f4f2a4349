/**
 * One OS process taking and giving back leases of an in-flight limit
 * (spawned by concurrency-limit.property.test.ts). argv[2]: JSON { redis,
 * catalogue, policy, key, ms }. Prints one JSON line: each hold as [from, to]
 * in µs on the machine's monotonic clock (from the acquire's answer to the release's
 * sending), and how many acquires were refused or degraded.
 *
 * The clock is CLOCK_MONOTONIC (process.hrtime), one clock for every process
 * on the machine. `performance.timeOrigin + performance.now()` is not: each
 * process pairs its own wall-clock sample with its monotonic start, and on a
 * loaded machine two processes' pairings can differ by more than the gap between
 * one release and the next acquire: a fourth lease held that never was (CI, stop 47).
 */
import { compilePolicies, createLimiter, type RedisSettings, staticPolicies } from '@platform/rate-limit';
import { testRedisClient } from './targets.ts';

interface WorkerInput {
  redis: RedisSettings;
  catalogue: Record<string, unknown>;
  policy: string;
  key: string;
  ms: number;
}

const input = JSON.parse(process.argv[2] ?? '{}') as WorkerInput;
const redis = testRedisClient(input.redis);
const limiter = createLimiter({ redis, policies: staticPolicies(compilePolicies(input.catalogue)) });
// µs since boot: exact in a double for centuries of uptime
const clock = () => Number(process.hrtime.bigint() / 1000n);
const held: [number, number][] = [];
let refused = 0;
let degraded = 0;
const until = clock() + input.ms * 1000;
while (clock() < until) {
  const decision = await limiter.check({ policy: input.policy, key: input.key });
  if (decision.outcome === 'allowed') {
    const from = clock();
    // hold it a few ms, as a slow call would
    await new Promise((resolve) => setTimeout(resolve, 2 + Math.random() * 8));
    const to = clock();
    await limiter.release(input.policy, input.key, decision.binding.lease as string);
    held.push([from, to]);
  } else {
    if (decision.outcome === 'degraded') degraded++;
    else refused++;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
process.stdout.write(`${JSON.stringify({ held, refused, degraded })}\n`);
redis.disconnect();
