/**
 * One OS process against a cost budget (spawned by the budget concurrency
 * test, in two phases so every process has reserved before any settles).
 * argv[2]: JSON { phase, redis, catalogue, tenant, worker, held? }.
 *   reserve: reserves, 4 in flight, until refused 20 times; prints { held: [{ id, units }] }
 *   settle:  settles each hold with an actual cost under, at and over its estimate; prints { actual }
 */
import { compilePolicies, createLimiter, type RedisSettings, staticPolicies } from '../../layer/src/index.ts';
import { testRedisClient } from './targets.ts';

const input = JSON.parse(process.argv[2] ?? '{}') as {
  phase: 'reserve' | 'settle';
  redis: RedisSettings;
  catalogue: Record<string, unknown>;
  tenant: string;
  worker: number;
  held?: { id: string; units: number }[];
};
const redis = testRedisClient(input.redis);
const limiter = createLimiter({ redis, policies: staticPolicies(compilePolicies(input.catalogue)) });

async function reserveAll(): Promise<{ id: string; units: number }[]> {
  const held: { id: string; units: number }[] = [];
  let refusals = 0;
  let n = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (refusals < 20) {
        const id = `w${input.worker}-${n++}`;
        const units = 1 + ((n * 7919 + input.worker * 104729) % 40);
        const decision = await limiter.reserve('llm-budget', input.tenant, units, { id });
        if (decision.outcome === 'allowed') held.push({ id, units });
        else if (decision.outcome === 'limited') refusals++;
        else throw new Error(`degraded: ${decision.reason}`);
      }
    }),
  );
  return held;
}

async function settleAll(held: { id: string; units: number }[]): Promise<number> {
  let actual = 0;
  for (const [i, hold] of held.entries()) {
    const units = Math.round((hold.units * (i % 3)) / 2); // under, exactly at, and over the estimate
    const outcome = await limiter.settle('llm-budget', input.tenant, hold.id, units);
    if (!outcome.decided || outcome.result !== 'settled')
      throw new Error(`settle ${hold.id}: ${JSON.stringify(outcome)}`);
    actual += units;
  }
  return actual;
}

const result = input.phase === 'reserve' ? { held: await reserveAll() } : { actual: await settleAll(input.held ?? []) };
process.stdout.write(`${JSON.stringify(result)}\n`);
redis.disconnect();
