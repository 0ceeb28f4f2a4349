/**
 * `npm run bench:scripts`: what each shape of check costs Redis, measured on
 * one private redis-server in one run (client pinned to CPU 0, Redis to CPU
 * 1): a token bucket in its own script, groups of 2 and 3 buckets in that
 * script (every Slack and Telegram event is a group of 2), the same through
 * lua/check.lua's generic loop, the mixed shapes only check.lua decides, and
 * a flat two-bucket script with the same reply (bench/reference/, the floor).
 * Per shape: Redis CPU per check (INFO cpu, user + sys of the main thread,
 * over the run: reading, parsing, the script and the reply, what a shard's
 * capacity depends on) and the script time alone (INFO commandstats), as
 * ratios to the one-bucket script. Every check admits (the write path).
 *
 *   BENCH_CHECKS  checks per shape and round (default 150000)
 *   BENCH_ROUNDS  interleaved rounds, medians reported (default 3)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { compilePolicies } from '../layer/src/index.ts';
import { checkCall, genericCheckCall, type ResolvedLimit, type ScriptCall } from '../layer/src/lua-contract.ts';
import { productionScripts } from '../layer/src/scripts.ts';
import { startRedis } from '../scripts/redis-process.ts';
import { pinnedToCpu0, redisCpuSeconds } from './measure.ts';

const CHECKS = Number(process.env.BENCH_CHECKS ?? 150_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = 128;
const KEYS = 100_000;
const canPin = pinnedToCpu0();

const bucket = { strategy: 'tokenBucket', capacity: 1_000_000_000, refill: { tokens: 1_000_000, every: '1 s' } };
const catalogue = compilePolicies({
  a: { ...bucket, group: 'g' },
  b: { ...bucket, group: 'g' },
  d: { ...bucket, group: 'g' },
  c: { strategy: 'slidingWindow', limit: 1_000_000, window: '1 s', group: 'g' },
  q: { strategy: 'quota', limit: 1_000_000_000, period: 'month', group: 'g' },
});

function limit(policy: string, scope: string): ResolvedLimit {
  const compiled = catalogue.get(policy) as ResolvedLimit['policy'];
  return { policy: compiled, key: scope, counter: `rl:{g:${scope}}:${policy}:${scope}`, cost: 1 };
}

const FLAT = readFileSync(new URL('./reference/two_buckets_flat.lua', import.meta.url), 'utf8');
/** The flat two-bucket floor: its own KEYS/ARGV (bench/reference/two_buckets_flat.lua's header). */
function flatTwo(scope: string): { source: string; keys: string[]; args: string[] } {
  const [a, b] = [limit('a', scope), limit('b', scope)];
  const [pa, pb] = [a.policy, b.policy] as { capacity: number; intervalUs: number }[] as [
    { capacity: number; intervalUs: number },
    { capacity: number; intervalUs: number },
  ];
  const args = ['1', '1', pa.capacity, pb.capacity, pa.intervalUs, pb.intervalUs].map(String);
  return { source: FLAT, keys: [a.counter, b.counter], args };
}

/** A check shape: the script call for one scope. */
interface Shape {
  readonly name: string;
  call(scope: string): { source: string; keys: readonly string[]; args: readonly string[] };
}

const scripts = productionScripts();
const production = (call: ScriptCall) => ({ ...call, source: scripts.named(call.script)?.source as string });
const own =
  (...names: string[]) =>
  (s: string) =>
    production(
      checkCall(
        names.map((n) => limit(n, s)),
        true,
      ),
    );
const generic =
  (...names: string[]) =>
  (s: string) =>
    production(
      genericCheckCall(
        names.map((n) => limit(n, s)),
        true,
      ),
    );

const SHAPES: readonly Shape[] = [
  { name: 'token bucket, its own script', call: own('a') },
  { name: '2 token buckets, their own script', call: own('a', 'b') },
  { name: '3 token buckets, their own script', call: own('a', 'b', 'd') },
  { name: '2 token buckets, flat reference script (the floor)', call: flatTwo },
  { name: 'token bucket, through check.lua', call: generic('a') },
  { name: '2 token buckets, through check.lua', call: generic('a', 'b') },
  { name: 'token bucket + monthly quota, through check.lua', call: own('a', 'q') },
  { name: '3 limits (2 buckets + window), through check.lua', call: own('a', 'b', 'c') },
  { name: 'sliding window, its own script', call: own('c') },
];

const server = await startRedis(canPin ? { cpu: 1 } : {});
const redis = new Redis(server.url, { enableAutoPipelining: false });
const shaOf = new Map<string, string>();

async function run(shape: Shape, keyOf: () => string): Promise<{ cpuUs: number; scriptUs: number }> {
  await drive(shape, keyOf, CHECKS / 10); // warm-up: the client's JIT, Redis' script and keyspace
  await redis.config('RESETSTAT');
  const before = await redisCpuSeconds(redis);
  const sent = await drive(shape, keyOf, CHECKS);
  const cpu = (await redisCpuSeconds(redis)) - before;
  const stats = await redis.info('commandstats');
  const usecPerCall = Number(/cmdstat_evalsha:calls=\d+,usec=\d+,usec_per_call=([\d.]+)/.exec(stats)?.[1]);
  return { cpuUs: (cpu * 1e6) / sent, scriptUs: usecPerCall };
}

async function drive(shape: Shape, keyOf: () => string, checks: number): Promise<number> {
  let sent = 0;
  const lane = async () => {
    while (sent < checks) {
      sent++;
      const { source, keys, args } = shape.call(keyOf());
      await redis.evalsha(shaOf.get(source) as string, keys.length, ...keys, ...args);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  return sent;
}

try {
  for (const source of [...SHAPES.map((shape) => shape.call('x').source), FLAT]) {
    shaOf.set(source, (await redis.script('LOAD', source)) as string);
  }
  const scenarios = { 'hot key': () => 'hot', '100k keys': () => `k${Math.floor(Math.random() * KEYS)}` };
  const lines = [
    `# What each check shape costs Redis (${new Date().toISOString()})`,
    '',
    `${CHECKS} admitted checks per shape, concurrency ${CONCURRENCY}, ${ROUNDS} interleaved rounds (medians); ${canPin ? 'client pinned to CPU 0, Redis to CPU 1' : 'unpinned (no taskset)'}; ratios to one token bucket in its own script.`,
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
  const out = process.env.BENCH_OUT ?? new URL('./results/', import.meta.url).pathname;
  const file = join(out, `scripts-${new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19)}.md`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  console.log(`${lines.join('\n')}\nwritten to ${file}`);
} finally {
  redis.disconnect();
  await server.stop();
}
