/**
 * One OS process standing for a function in one region (the multi-region
 * tests): argv[2] is JSON { env, catalogue, policy, key, active: [[fromMs, toMs], …] }.
 * It connects as the layer does from `env` (its region's store as the
 * functions' ACL user over TLS, the home store through the link), prints
 * `ready`, reads the start time (epoch ms) from stdin, then checks the limit
 * back to back, one at a time, while the time since the start is inside an
 * active span. Prints one JSON line: the store's time (µs) of each admission,
 * and the number of refusals.
 */
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { compilePolicies, createRedisClient, staticPolicies } from '@platform/rate-limit';
import { readSettings } from '@platform/rate-limit/config';
import { productionScripts } from '@platform/rate-limit/lua';
import { parseRedisCredentials, useRedisCredentials } from '@platform/rate-limit/redis';
import { productionRegionScripts, RegionalLimiter } from '@platform/rate-limit/regions';

const input = JSON.parse(process.argv[2] ?? '{}') as {
  env: Record<string, string>;
  catalogue: Record<string, unknown>;
  policy: string;
  key: string;
  active: [number, number][];
};
Object.assign(process.env, input.env);
const settings = readSettings();
const credentials = parseRedisCredentials(readFileSync(settings.redisAuthSecretFile as string, 'utf8'));
const client = (redis: typeof settings.redis) => {
  const c = createRedisClient(redis);
  useRedisCredentials(c, credentials);
  c.connect().catch(() => {});
  return c;
};
const regional = client(settings.redis);
const home = settings.home ? client(settings.home.redis) : regional;
const admitted: number[] = [];
let refused = 0;
let degraded = 0;
const limiter = new RegionalLimiter(
  {
    redis: home,
    policies: staticPolicies(compilePolicies(input.catalogue)),
    onDegraded: () => {},
    regional: {
      redis: regional,
      regions: settings.regions,
      scripts: productionRegionScripts(),
      onDecided: (decision, nowUs) => {
        if (decision.allowed) admitted.push(nowUs);
      },
    },
  },
  { scripts: productionScripts(), timeArgs: () => [] },
);

process.stdout.write('ready\n');
const lines = createInterface({ input: process.stdin });
const start = Number(await new Promise<string>((resolve) => lines.once('line', resolve)));
const end = Math.max(...input.active.map(([, to]) => to));
for (;;) {
  const t = Date.now() - start;
  if (t >= end) break;
  const span = input.active.find(([from, to]) => t >= from && t < to);
  if (!span) {
    // idle until the next span starts: the schedule's own pace
    const next = Math.min(...input.active.map(([from]) => from).filter((from) => from > t));
    await new Promise((resolve) => setTimeout(resolve, Math.max(1, next - t)));
    continue;
  }
  const decision = await limiter.check({ policy: input.policy, key: input.key });
  if (decision.degraded) degraded++;
  else if (!decision.allowed) refused++;
}
process.stdout.write(`${JSON.stringify({ admitted, refused, degraded })}\n`);
lines.close();
regional.disconnect();
home.disconnect();
