/**
 * One OS process against a cost budget (spawned by the budget concurrency
 * test, in two phases so every process has reserved before any settles).
 * argv[2]: JSON { phase, redis, catalogue, tenant, worker, held? }.
 *   reserve: reserves, 4 in flight, until refused 20 times; prints { held: [{ id, units }] }
 *   settle:  settles each hold with an actual cost under, at and over its estimate; prints { actual }
 *   hang:    reserves `units` under `id` at the pinned time `nowUs`, prints { held }, then waits for
 *            ever, as a process whose provider call never returns (the test kills it)
 */
import { compilePolicies, createLimiter, type RedisSettings, staticPolicies } from '@platform/rate-limit';
import { pinnedLimiter, testRedisClient } from './targets.ts';

const input = JSON.parse(process.argv[2] ?? '{}') as {
  phase: 'reserve' | 'settle' | 'hang';
  redis: RedisSettings;
  catalogue: Record<string, unknown>;
  tenant: string;
  worker: number;
  held?: { id: string; units: number }[];
  id?: string;
  units?: number;
  nowUs?: number;
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

if (input.phase === 'hang') {
  const pinned = pinnedLimiter(
    { redis, policies: staticPolicies(compilePolicies(input.catalogue)) },
    { nowUs: input.nowUs ?? 0 },
  );
  const decision = await pinned.reserve('llm-budget', input.tenant, input.units ?? 1, { id: input.id ?? 'hang' });
  process.stdout.write(`${JSON.stringify({ held: decision.outcome === 'allowed' })}\n`);
  setInterval(() => undefined, 60_000); // the provider call that never returns
} else {
  const result =
    input.phase === 'reserve' ? { held: await reserveAll() } : { actual: await settleAll(input.held ?? []) };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  redis.disconnect();
}
