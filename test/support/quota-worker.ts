/**
 * One OS process checking a calendar quota at pinned times around a period
 * boundary (spawned by quota.property.test.ts): `attempts` checks at times
 * before the boundary, one JSON line with their counts, then, once a line
 * arrives on stdin (every process is past phase one), `attempts` checks at
 * times after it and a second line. argv[2]: JSON { redis, catalogue,
 * policy, key, boundaryUs, attempts }.
 */
import { createInterface } from 'node:readline';
import { compilePolicies, type RedisSettings, staticPolicies } from '@platform/rate-limit';
import { pinnedLimiter, testRedisClient } from './targets.ts';

interface WorkerInput {
  redis: RedisSettings;
  catalogue: Record<string, unknown>;
  policy: string;
  key: string;
  boundaryUs: number;
  attempts: number;
}

const input = JSON.parse(process.argv[2] ?? '{}') as WorkerInput;
const redis = testRedisClient(input.redis);
const clock = { nowUs: 0 };
const limiter = pinnedLimiter({ redis, policies: staticPolicies(compilePolicies(input.catalogue)) }, clock);

async function phase(fromUs: number): Promise<{ allowed: number; limited: number; degraded: number }> {
  const counts = { allowed: 0, limited: 0, degraded: 0 };
  for (let i = 0; i < input.attempts; i++) {
    clock.nowUs = fromUs + i; // each process's own times rise; processes interleave in Redis
    counts[(await limiter.check({ policy: input.policy, key: input.key })).outcome]++;
  }
  return counts;
}

const lines = createInterface({ input: process.stdin });
const go = new Promise<void>((resolve) => lines.once('line', () => resolve()));
process.stdout.write(`${JSON.stringify(await phase(input.boundaryUs - 10_000_000))}\n`);
await go;
process.stdout.write(`${JSON.stringify(await phase(input.boundaryUs))}\n`);
lines.close();
redis.disconnect();
