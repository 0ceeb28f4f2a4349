/**
 * One OS process taking and giving back leases of an in-flight limit
 * (spawned by concurrency-limit.property.test.ts). argv[2]: JSON { redis,
 * catalogue, policy, key, ms }. Prints one JSON line: each hold as [from, to]
 * in ms on the machine's clock (from the acquire's answer to the release's
 * sending), and how many acquires were refused or degraded.
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
const clock = () => performance.timeOrigin + performance.now();
const held: [number, number][] = [];
let refused = 0;
let degraded = 0;
const until = clock() + input.ms;
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
