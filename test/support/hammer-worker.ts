/**
 * One OS process hammering the limiter (spawned by the concurrency tests).
 * argv[2]: JSON { redis: RedisSettings, catalogue, requests, scope?, attempts, inFlight }.
 * Prints one JSON line: how many checks were allowed, limited and degraded.
 */

import type { CheckRequest } from '@platform/rate-limit';
import { compilePolicies, createLimiter, type RedisSettings, staticPolicies } from '@platform/rate-limit';
import { testRedisClient } from './targets.ts';

interface WorkerInput {
  redis: RedisSettings;
  catalogue: Record<string, unknown>;
  requests: CheckRequest[];
  scope?: string;
  attempts: number;
  inFlight: number;
}

const input = JSON.parse(process.argv[2] ?? '{}') as WorkerInput;
const redis = testRedisClient(input.redis);
const limiter = createLimiter({
  redis,
  policies: staticPolicies(compilePolicies(input.catalogue)),
  onDegraded: (e) => process.stderr.write(`${e.reason} ${e.detail}\n`),
});
const counts = { allowed: 0, limited: 0, degraded: 0 };
let started = 0;

async function lane(): Promise<void> {
  while (started < input.attempts) {
    started++;
    const decision = await limiter.checkAll(input.requests, input.scope === undefined ? {} : { scope: input.scope });
    counts[decision.outcome]++;
  }
}

await Promise.all(Array.from({ length: input.inFlight }, lane));
process.stdout.write(`${JSON.stringify(counts)}\n`);
redis.disconnect();
