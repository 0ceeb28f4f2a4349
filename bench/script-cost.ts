/**
 * `npm run bench:scripts`: what each shape of check costs Redis, measured on
 * one private redis-server in one run: a strategy's own single-limit script
 * (its one-integer reply) against the same limit through lua/check.lua, and
 * grouped checks of 2 and 3 limits against one. Per shape: Redis CPU per
 * check (INFO cpu, user + sys of the main thread, over the run: parsing,
 * the script and the reply) and the script time alone (INFO commandstats),
 * as ratios to the single-limit script. Every check admits (the write path).
 *
 *   BENCH_CHECKS  checks per shape and round (default 200000)
 *   BENCH_ROUNDS  interleaved rounds, medians reported (default 3)
 */
import { Redis } from 'ioredis';
import { compilePolicies } from '../layer/src/index.ts';
import { checkCall, type ResolvedLimit } from '../layer/src/lua-contract.ts';
import { type LuaScript, productionScripts } from '../layer/src/scripts.ts';
import { startRedis } from '../scripts/redis-process.ts';
import { redisCpuSeconds } from './measure.ts';

const CHECKS = Number(process.env.BENCH_CHECKS ?? 200_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = 128;
const KEYS = 100_000;

const catalogue = compilePolicies({
  a: { strategy: 'tokenBucket', capacity: 1_000_000_000, refill: { tokens: 1_000_000, every: '1 s' }, group: 'g' },
  b: { strategy: 'tokenBucket', capacity: 1_000_000_000, refill: { tokens: 1_000_000, every: '1 s' }, group: 'g' },
  c: { strategy: 'slidingWindow', limit: 1_000_000, window: '1 s', group: 'g' },
  w: { strategy: 'slidingWindow', limit: 1_000_000, window: '1 s', group: 'g' },
});

function limit(policy: string, scope: string): ResolvedLimit {
  const compiled = catalogue.get(policy) as ResolvedLimit['policy'];
  return { policy: compiled, key: scope, counter: `rl:{g:${scope}}:${policy}:${scope}`, cost: 1 };
}

/** A check shape: the script call for one scope. */
interface Shape {
  readonly name: string;
  call(scope: string): { script: string; keys: readonly string[]; args: readonly string[] };
}

/** The generic script for one limit: what a strategy without its own script runs. */
function genericOne(l: ResolvedLimit) {
  const grouped = checkCall([l, limit('w', l.key)], true);
  // the same record layout, N = 1: drop the second limit's key and record
  const recordLength = 3 + 4; // kind, cost, field count, then 4 token-bucket fields
  return { script: grouped.script, keys: [l.counter], args: ['1', '1', ...grouped.args.slice(2, 2 + recordLength)] };
}

const SHAPES: readonly Shape[] = [
  { name: 'token bucket, its own script', call: (s) => checkCall([limit('a', s)], true) },
  { name: 'token bucket, through check.lua', call: (s) => genericOne(limit('a', s)) },
  { name: '2 token buckets, all-or-nothing', call: (s) => checkCall([limit('a', s), limit('b', s)], true) },
  {
    name: '3 limits (2 buckets + window), all-or-nothing',
    call: (s) => checkCall([limit('a', s), limit('b', s), limit('c', s)], true),
  },
  { name: 'sliding window, its own script', call: (s) => checkCall([limit('c', s)], true) },
];

const scripts = productionScripts();
const server = await startRedis();
const redis = new Redis(server.url, { enableAutoPipelining: false });

async function run(shape: Shape, keyOf: () => string): Promise<{ cpuUs: number; scriptUs: number }> {
  await redis.config('RESETSTAT');
  const before = await redisCpuSeconds(redis);
  let sent = 0;
  const lane = async () => {
    while (sent < CHECKS) {
      sent++;
      const { script, keys, args } = shape.call(keyOf());
      const lua = scripts[script] as LuaScript;
      await redis.evalsha(lua.sha, keys.length, ...keys, ...args);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  const cpu = (await redisCpuSeconds(redis)) - before;
  const stats = await redis.info('commandstats');
  const usecPerCall = Number(/cmdstat_evalsha:calls=\d+,usec=\d+,usec_per_call=([\d.]+)/.exec(stats)?.[1]);
  return { cpuUs: (cpu * 1e6) / sent, scriptUs: usecPerCall };
}

try {
  for (const script of Object.values(scripts)) await redis.script('LOAD', script.source);
  const scenarios = { 'hot key': () => 'hot', '100k keys': () => `k${Math.floor(Math.random() * KEYS)}` };
  const lines = [
    `# What each check shape costs Redis (${new Date().toISOString()})`,
    '',
    `${CHECKS} admitted checks per shape, concurrency ${CONCURRENCY}, ${ROUNDS} interleaved rounds (medians); ratios to the token bucket's own script.`,
    '',
  ];
  for (const [scenario, keyOf] of Object.entries(scenarios)) {
    const figures = new Map<string, { cpuUs: number[]; scriptUs: number[] }>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const shape of SHAPES) {
        await redis.flushall();
        const f = await run(shape, keyOf);
        const entry = figures.get(shape.name) ?? { cpuUs: [], scriptUs: [] };
        entry.cpuUs.push(f.cpuUs);
        entry.scriptUs.push(f.scriptUs);
        figures.set(shape.name, entry);
      }
    }
    const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] as number;
    const base = figures.get(SHAPES[0]?.name as string) as { cpuUs: number[]; scriptUs: number[] };
    lines.push(
      `## ${scenario}`,
      '',
      '| shape | Redis CPU µs/check | × | script µs/call | × |',
      '|---|---|---|---|---|',
    );
    for (const shape of SHAPES) {
      const f = figures.get(shape.name) as { cpuUs: number[]; scriptUs: number[] };
      const cpu = median(f.cpuUs);
      const script = median(f.scriptUs);
      lines.push(
        `| ${shape.name} | ${cpu.toFixed(2)} | ${(cpu / median(base.cpuUs)).toFixed(2)} | ${script.toFixed(2)} | ${(script / median(base.scriptUs)).toFixed(2)} |`,
      );
    }
    lines.push('');
  }
  console.log(lines.join('\n'));
} finally {
  redis.disconnect();
  await server.stop();
}
