/**
 * `npm run bench:scripts`: what each shape of check costs Redis, measured on
 * one private redis-server in one run (client pinned to CPU 0, Redis to CPU
 * 1): a token bucket in its own script, groups of 2 and 3 buckets in that
 * script, the same through
 * lua/check.lua's generic loop, the mixed shapes only check.lua decides, and
 * a flat two-bucket script with the same reply (bench/reference/, the floor)
 * and one with both buckets in one key (what a layout change could reach);
 * one and two sliding windows in their own script and through check.lua, two
 * with a webhook's once-only claim (a new event each check).
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
import { pathToFileURL } from 'node:url';
import { compilePolicies } from '@platform/rate-limit';
import { claimToken, withClaim } from '@platform/rate-limit/core';
import {
  checkCall,
  claimableCheckCall,
  genericCheckCall,
  productionScripts,
  type ResolvedLimit,
  type ScriptCall,
} from '@platform/rate-limit/lua';
import { Redis } from 'ioredis';
import { startRedis } from '../scripts/redis-process.ts';
import { pairedRatio, pinnedToCpu0, redisCpuSeconds } from './measure.ts';

const CHECKS = Number(process.env.BENCH_CHECKS ?? 150_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = 128;
const KEYS = 100_000;

const bucket = { strategy: 'tokenBucket', capacity: 1_000_000_000, refill: { tokens: 1_000_000, every: '1 s' } };
const catalogue = compilePolicies({
  a: { ...bucket, group: 'g' },
  b: { ...bucket, group: 'g' },
  d: { ...bucket, group: 'g' },
  c: { strategy: 'slidingWindow', limit: 1_000_000, window: '1 s', group: 'g' },
  e: { strategy: 'slidingWindow', limit: 1_000_000, window: '1 s', group: 'g' },
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

const ONE_KEY = readFileSync(new URL('./reference/two_buckets_one_key.lua', import.meta.url), 'utf8');
/** Two buckets in one key (bench/reference/two_buckets_one_key.lua): what a layout change could reach; the flat floor's ARGV. */
function oneKeyTwo(scope: string): { source: string; keys: string[]; args: string[] } {
  return { ...flatTwo(scope), source: ONE_KEY, keys: [`rl:{g:${scope}}:ab:${scope}`] };
}

const WINDOW_COMMANDS = readFileSync(new URL('./reference/window_commands.lua', import.meta.url), 'utf8');
/** A steady window admit's commands alone, for one window or two (bench/reference/window_commands.lua). */
const windowCommands = (count: 1 | 2) => (scope: string) => ({
  source: WINDOW_COMMANDS,
  keys: [`rl:{g:${scope}}:c:${scope}`, `rl:{g:${scope}}:e:${scope}`].slice(0, count),
  args: [String(count)],
});

const REFERENCE_BUCKET = readFileSync(new URL('./reference/token_bucket.lua', import.meta.url), 'utf8');
const REFERENCE_LOG = readFileSync(new URL('./reference/zset_log.lua', import.meta.url), 'utf8');
let member = 0;
/** The minimal references (bench/reference/): one bucket, and a sorted-set log, as the policies a and c. */
const referenceBucket = (scope: string) => {
  const { capacity, intervalUs } = catalogue.get('a') as unknown as { capacity: number; intervalUs: number };
  return { source: REFERENCE_BUCKET, keys: [`ref:{g:${scope}}`], args: [String(capacity), String(intervalUs)] };
};
const referenceLog = (scope: string) => {
  const { limit: max, windowUs } = catalogue.get('c') as unknown as { limit: number; windowUs: number };
  return {
    source: REFERENCE_LOG,
    keys: [`zlog:{g:${scope}}`],
    args: [String(max), String(windowUs), String(member++)],
  };
};

/** A check shape: the script call for one scope. */
interface Shape {
  readonly name: string;
  call(scope: string): { source: string; keys: readonly string[]; args: readonly string[] };
}

const scripts = productionScripts();
const production = (call: ScriptCall) => ({ ...call, source: scripts.named(call.script)?.source as string });
/** The check of these policies for a scope, as the layer packs it: `checkCall` (their own script when it takes them) or check.lua's. */
const packedBy =
  (pack: typeof checkCall) =>
  (...names: string[]) =>
  (scope: string) =>
    production(
      pack(
        names.map((n) => limit(n, scope)),
        true,
      ),
    );
const own = packedBy(checkCall);
const generic = packedBy(genericCheckCall);
let event = 0;
/** A webhook event's check: its windows with the once-only claim of a new event (as `enforceOnce` packs it, or through check.lua). */
const claimed =
  (through: 'own' | 'generic', ...names: string[]) =>
  (scope: string) => {
    const limits = names.map((n) => limit(n, scope));
    const claim = { key: `rl:{g:${scope}}:once:${event++}`, ttlMs: 60_000, token: claimToken() };
    return production(withClaim((through === 'own' ? claimableCheckCall : genericCheckCall)(limits, true), claim));
  };

export const SHAPES = {
  one: { name: 'token bucket, its own script', call: own('a') },
  referenceBucket: { name: 'reference token bucket (minimal, bench/reference/)', call: referenceBucket },
  referenceLog: { name: 'reference sorted-set log (minimal, bench/reference/)', call: referenceLog },
  two: { name: '2 token buckets, their own script', call: own('a', 'b') },
  three: { name: '3 token buckets, their own script', call: own('a', 'b', 'd') },
  floor: { name: '2 token buckets, flat reference script (the floor)', call: flatTwo },
  oneKey: { name: '2 token buckets in one key, flat reference script (a layout change)', call: oneKeyTwo },
  oneGeneric: { name: 'token bucket, through check.lua', call: generic('a') },
  twoGeneric: { name: '2 token buckets, through check.lua', call: generic('a', 'b') },
  bucketQuota: { name: 'token bucket + monthly quota, through check.lua', call: own('a', 'q') },
  mixedThree: { name: '3 limits (2 buckets + window), through check.lua', call: own('a', 'b', 'c') },
  window: { name: 'sliding window, its own script', call: own('c') },
  windowGeneric: { name: 'sliding window, through check.lua', call: generic('c') },
  twoWindows: { name: '2 sliding windows, their own script', call: own('c', 'e') },
  windowCommands: { name: "a window admit's commands alone (reference, no logic)", call: windowCommands(1) },
  twoWindowCommands: { name: "2 windows' admit commands alone (reference, no logic)", call: windowCommands(2) },
  twoWindowsGeneric: { name: '2 sliding windows, through check.lua', call: generic('c', 'e') },
  twoWindowsClaim: {
    name: '2 sliding windows + once-only claim (a Slack or Telegram event), their own script',
    call: claimed('own', 'c', 'e'),
  },
  twoWindowsClaimGeneric: {
    name: '2 sliding windows + once-only claim, through check.lua',
    call: claimed('generic', 'c', 'e'),
  },
} as const satisfies Record<string, Shape>;
export type ShapeId = keyof typeof SHAPES;

export const SCENARIOS = {
  'hot key': () => 'hot',
  '100k keys': () => `k${Math.floor(Math.random() * KEYS)}`,
} as const;
export type ScriptScenario = keyof typeof SCENARIOS;

/** A shape's medians in one scenario: Redis CPU per check and script time per call (µs), and each round's. */
export interface ShapeCost {
  readonly cpuUs: number;
  readonly scriptUs: number;
  readonly rounds?: readonly { readonly cpuUs: number; readonly scriptUs: number }[];
}

/**
 * A shape's cost as a multiple of another's: the median over rounds of the
 * ratio within each round (the shapes of a round run back to back, so the
 * host's drift between rounds cancels; a ratio of medians does not).
 */
export function costRatio(shape: ShapeCost, base: ShapeCost, field: 'cpuUs' | 'scriptUs'): number {
  return pairedRatio(shape.rounds, base.rounds, (round) => round[field]) ?? shape[field] / base[field];
}

/**
 * Each shape's cost in each scenario on `redis` (a private server: it is
 * flushed and its stats reset), shapes interleaved round by round; medians.
 */
export async function measureShapes(
  redis: Redis,
  ids: readonly ShapeId[],
  checks = CHECKS,
  rounds = ROUNDS,
): Promise<Record<ScriptScenario, Record<string, ShapeCost>>> {
  const shaOf = new Map<string, string>();
  for (const source of [...ids.map((id) => SHAPES[id].call('x').source)]) {
    shaOf.set(source, (await redis.script('LOAD', source)) as string);
  }
  const drive = async (shape: Shape, keyOf: () => string, count: number): Promise<number> => {
    let sent = 0;
    const lane = async () => {
      while (sent < count) {
        sent++;
        const { source, keys, args } = shape.call(keyOf());
        await redis.evalsha(shaOf.get(source) as string, keys.length, ...keys, ...args);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, lane));
    return sent;
  };
  const run = async (shape: Shape, keyOf: () => string): Promise<ShapeCost> => {
    await redis.flushall();
    await drive(shape, keyOf, checks / 10); // warm-up: the client's JIT, Redis' script and keyspace
    await redis.config('RESETSTAT');
    const before = await redisCpuSeconds(redis);
    const sent = await drive(shape, keyOf, checks);
    const cpu = (await redisCpuSeconds(redis)) - before;
    const stats = await redis.info('commandstats');
    const usecPerCall = Number(/cmdstat_evalsha:calls=\d+,usec=\d+,usec_per_call=([\d.]+)/.exec(stats)?.[1]);
    return { cpuUs: (cpu * 1e6) / sent, scriptUs: usecPerCall };
  };
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] as number;
  const out = {} as Record<ScriptScenario, Record<string, ShapeCost>>;
  for (const [scenario, keyOf] of Object.entries(SCENARIOS) as [ScriptScenario, () => string][]) {
    const samples = new Map<ShapeId, ShapeCost[]>();
    for (let round = 0; round < rounds; round++) {
      for (const id of ids) samples.set(id, [...(samples.get(id) ?? []), await run(SHAPES[id], keyOf)]);
    }
    out[scenario] = Object.fromEntries(
      ids.map((id) => {
        const runs = samples.get(id) as ShapeCost[];
        return [
          id,
          { cpuUs: median(runs.map((r) => r.cpuUs)), scriptUs: median(runs.map((r) => r.scriptUs)), rounds: runs },
        ];
      }),
    );
  }
  return out;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const canPin = pinnedToCpu0();
  const server = await startRedis(canPin ? { cpu: 1 } : {});
  const redis = new Redis(server.url, { enableAutoPipelining: false });
  try {
    // BENCH_SHAPES: a comma list of shape ids (default: all)
    const ids = (process.env.BENCH_SHAPES?.split(',') ?? Object.keys(SHAPES)) as ShapeId[];
    const costs = await measureShapes(redis, ids);
    const lines = [
      `# What each check shape costs Redis (${new Date().toISOString()})`,
      '',
      `${CHECKS} admitted checks per shape, concurrency ${CONCURRENCY}, ${ROUNDS} interleaved rounds (medians); ${canPin ? 'client pinned to CPU 0, Redis to CPU 1' : 'unpinned (no taskset)'}; ratios to one token bucket in its own script (the median of each round's ratio).`,
      '',
    ];
    for (const [scenario, byShape] of Object.entries(costs)) {
      const base = byShape.one as ShapeCost;
      // the windows' bar is against one window: its column when the window was measured
      const window = byShape.window;
      const perWindow = (cost: ShapeCost) => (window ? ` ${costRatio(cost, window, 'scriptUs').toFixed(2)} |` : '');
      lines.push(
        `## ${scenario}`,
        '',
        `| shape | Redis CPU µs/check | × | script µs/call | × |${window ? ' script × one window |' : ''}`,
        `|---|---|---|---|---|${window ? '---|' : ''}`,
        ...ids.map((id) => {
          const { cpuUs, scriptUs } = byShape[id] as ShapeCost;
          const cost = byShape[id] as ShapeCost;
          return `| ${SHAPES[id].name} | ${cpuUs.toFixed(2)} | ${costRatio(cost, base, 'cpuUs').toFixed(2)} | ${scriptUs.toFixed(2)} | ${costRatio(cost, base, 'scriptUs').toFixed(2)} |${perWindow(cost)}`;
        }),
        '',
      );
    }
    const out = process.env.BENCH_OUT ?? new URL('./results/', import.meta.url).pathname;
    const file = join(out, `scripts-${new Date().toISOString().replace(/:/g, '-').slice(0, 19)}.md`);
    writeFileSync(file, `${lines.join('\n')}\n`);
    console.log(`${lines.join('\n')}\nwritten to ${file}`);
  } finally {
    redis.disconnect();
    await server.stop();
  }
}
