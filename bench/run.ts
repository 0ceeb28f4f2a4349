/**
 * `npm run bench`: this project's limiter side by side with its peers, in one
 * run on one private redis-server, reported as ratios. Writes
 * bench/results/<date>.{json,md} and chart.svg, and latest.md.
 *
 *   BENCH_SECONDS  seconds per measured run (default 1)
 *   BENCH_ROUNDS   interleaved rounds; each figure is the median over them (default 3)
 *   BENCH_KEYS     identifiers of the uniform scenario and the memory runs (default 100000)
 *   BENCH_OUT      results directory (default bench/results/)
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { createRedisClient } from '@platform/rate-limit';
import { Redis } from 'ioredis';
import { startRedis } from '../scripts/redis-process.ts';
import { bundleFigures, coldStartSplit } from './lambda-figures.ts';
import { benchLimiters, LIMIT, MEMORY_WINDOW_MS } from './limiters.ts';
import { measure, memoryPerKey, pinnedToCpu0, type RunFigures } from './measure.ts';
import { type BenchResults, chart, figuresOf, markdown, type Scenario } from './report.ts';
import { costRatio, measureShapes, type ShapeCost } from './script-cost.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 1);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** Fresh processes per cold-start figure (median). */
const COLD_RUNS = Number(process.env.BENCH_COLD_RUNS ?? 9);
/** Checks per grouped-check shape and round (scaled down with BENCH_SECONDS for the smoke run), and its rounds. */
const GROUPED_CHECKS = Math.round(100_000 * Math.min(1, SECONDS));
const GROUPED_ROUNDS = ROUNDS + 2;
const CONCURRENCY = [1, 16, 128];
const KEYS = Number(process.env.BENCH_KEYS ?? 100_000);
const scenarios: Record<string, () => string> = {
  'hot key': () => 'hot',
  [`${KEYS / 1000}k keys`]: () => `k${Math.floor(Math.random() * KEYS)}`,
};

const canPin = pinnedToCpu0();

/** Each figure's median over the rounds. */
function medianFigures(rounds: readonly RunFigures[]): RunFigures {
  const median = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
  const fields = Object.keys(rounds[0] ?? {}) as (keyof RunFigures)[];
  return Object.fromEntries(fields.map((f) => [f, median(rounds.map((r) => r[f]))])) as unknown as RunFigures;
}

/** Runs bench/middleware-overhead.ts in a child: its EMF metrics go to a discarded stdout. */
async function middlewareOverhead(url: string): Promise<{ p50: number; p99: number }> {
  const script = new URL('./middleware-overhead.ts', import.meta.url).pathname;
  const child = spawn(process.execPath, [script, url], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  for await (const chunk of child.stderr) stderr += String(chunk);
  return JSON.parse(stderr.trim().split('\n').at(-1) ?? '{}') as { p50: number; p99: number };
}

const server = await startRedis(canPin ? { cpu: 1 } : {});
const plain = new Redis(server.url); // the peers' client: ordinary ioredis settings
const ours = createRedisClient({ url: server.url });
await ours.connect();
try {
  const limiters = await benchLimiters(ours, plain);
  const results: BenchResults = {
    date: new Date().toISOString().slice(0, 19).replace(/:/g, '-'),
    machine: `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}, ${canPin ? 'client pinned to CPU 0, Redis to CPU 1' : 'client and Redis unpinned (no taskset)'}`,
    redis: `Redis ${/redis_version:(\S+)/.exec(await plain.info('server'))?.[1]}`,
    durationMsPerRun: SECONDS * 1000,
    rounds: ROUNDS,
    limiters: limiters.map(({ id, label, note }) => ({ id, label, note })),
    runs: [],
    memory: { bytesPerKey: {}, bytesPerInWindowEvent: {} },
    bundles: [],
    bars: [],
  };

  // The machine is shared and drifts: every limiter runs once per round, rounds
  // are interleaved, and each figure is the median over the rounds.
  for (const [scenario, keyOf] of Object.entries(scenarios) as [Scenario, () => string][]) {
    for (const concurrency of CONCURRENCY) {
      const rounds = new Map<string, RunFigures[]>(limiters.map((l) => [l.id, []]));
      for (let round = 0; round < ROUNDS; round++) {
        for (const limiter of limiters) {
          await plain.flushall();
          rounds.get(limiter.id)?.push(await measure(plain, limiter, keyOf, concurrency, SECONDS * 1000));
        }
      }
      for (const limiter of limiters) {
        const figures = medianFigures(rounds.get(limiter.id) ?? []);
        results.runs.push({ limiter: limiter.id, scenario, concurrency, figures });
        console.log(
          `${scenario.padEnd(9)} c=${String(concurrency).padEnd(3)} ${limiter.id.padEnd(14)} ${Math.round(figures.checksPerSecond).toString().padStart(7)} checks/s  p50 ${figures.p50Us.toFixed(0)} µs  redis ${figures.redisCpuUsPerCheck.toFixed(1)} µs/check`,
        );
      }
    }
  }

  for (const limiter of await benchLimiters(ours, plain, MEMORY_WINDOW_MS)) {
    results.memory.bytesPerKey[limiter.id] = await memoryPerKey(plain, limiter, KEYS);
    if (limiter.stateKey && (limiter.id === 'ours-sw' || limiter.id === 'reference-zset')) {
      await plain.flushall();
      for (let i = 0; i < LIMIT; i++) await limiter.check('filled');
      const bytes = Number(await plain.call('MEMORY', 'USAGE', limiter.stateKey('filled'), 'SAMPLES', '0'));
      results.memory.bytesPerInWindowEvent[limiter.id] = bytes / LIMIT;
    }
  }
  results.bundles = await bundleFigures(COLD_RUNS);
  results.middlewareOverheadUs = await middlewareOverhead(server.url);
  results.grouped = await measureShapes(
    plain,
    ['one', 'two', 'three', 'floor', 'window', 'twoWindows'],
    GROUPED_CHECKS,
    GROUPED_ROUNDS,
  );

  const at = (id: string, s: Scenario, c: number) => figuresOf(results, id, s, c);
  const bar = (text: string, figure: string, met: boolean) => results.bars.push({ bar: text, figure, met });
  for (const s of Object.keys(scenarios) as Scenario[]) {
    const tb = at('ours-tb', s, 128).checksPerSecond;
    const ref = at('reference-tb', s, 128).checksPerSecond;
    bar(`${s}: token bucket at c=128 ≥ 0.9 × reference`, `${(tb / ref).toFixed(2)} ×`, tb >= 0.9 * ref);
    for (const peer of ['rlf', 'upstash-tb']) {
      const p = at(peer, s, 128).checksPerSecond;
      bar(`${s}: token bucket at c=128 ahead of ${peer}`, `${(tb / p).toFixed(2)} ×`, tb > p);
    }
    const p50 = at('ours-tb', s, 1).p50Us / at('reference-tb', s, 1).p50Us;
    bar(`${s}: token bucket p50 at c=1 ≤ 1.1 × reference`, `${p50.toFixed(2)} ×`, p50 <= 1.1);
    const cpu = at('ours-tb', s, 128).redisCpuUsPerCheck / at('reference-tb', s, 128).redisCpuUsPerCheck;
    bar(`${s}: Redis CPU per check (c=128) ≤ 1.1 × reference`, `${cpu.toFixed(2)} ×`, cpu <= 1.1);
    for (const c of [1, 128]) {
      const client = at('ours-tb', s, c).clientCpuUsPerCheck / at('reference-tb', s, c).clientCpuUsPerCheck;
      bar(`${s}: client CPU per check at c=${c} ≤ 1.1 × reference`, `${client.toFixed(2)} ×`, client <= 1.1);
    }
    const two = at('ours-2limit', s, 128).checksPerSecond / tb;
    bar(`${s}: 2-limit check at c=128 ≥ 0.8 × single limit`, `${two.toFixed(2)} ×`, two >= 0.8);
    const sw = at('ours-sw', s, 128).checksPerSecond / at('reference-zset', s, 128).checksPerSecond;
    bar(`${s}: sliding window at c=128 ≥ 0.9 × sorted-set log`, `${sw.toFixed(2)} ×`, sw >= 0.9);
    const swCpu = at('ours-sw', s, 128).redisCpuUsPerCheck / at('reference-zset', s, 128).redisCpuUsPerCheck;
    bar(`${s}: sliding window Redis CPU per check (c=128) ≤ 1.0 × sorted-set log`, `${swCpu.toFixed(2)} ×`, swCpu <= 1);
  }
  const perEvent = results.memory.bytesPerInWindowEvent['ours-sw'] ?? Number.NaN;
  const zsetPerEvent = results.memory.bytesPerInWindowEvent['reference-zset'] ?? Number.NaN;
  bar(
    'sliding window bytes per in-window event ≤ 16',
    `${perEvent.toFixed(1)} (sorted set ${zsetPerEvent.toFixed(1)})`,
    perEvent <= 16,
  );
  const overhead = results.middlewareOverheadUs;
  bar(
    'middleware overhead per invocation, Redis excluded: p50 ≤ 40 µs',
    `${overhead.p50.toFixed(1)} µs (p99 ${overhead.p99.toFixed(1)} µs)`,
    overhead.p50 <= 40,
  );
  // grouped checks: each ratio is the median of the rounds' own ratios (costRatio)
  for (const [scenario, byShape] of Object.entries(results.grouped)) {
    const { one, two, three, floor, window, twoWindows } = byShape as Record<
      'one' | 'two' | 'three' | 'floor' | 'window' | 'twoWindows',
      ShapeCost
    >;
    const cpu = (shape: ShapeCost, base = one) => costRatio(shape, base, 'cpuUs');
    const script = (shape: ShapeCost, base = one) => costRatio(shape, base, 'scriptUs').toFixed(2);
    bar(
      `${scenario}: 2-limit check (2 buckets) Redis CPU ≤ 1.35 × one`,
      `${cpu(two).toFixed(2)} × (script time ${script(two)} ×; flat floor ${cpu(floor).toFixed(2)} ×)`,
      cpu(two) <= 1.35,
    );
    bar(
      `${scenario}: 3-limit check (3 buckets) Redis CPU ≤ 1.7 × one`,
      `${cpu(three).toFixed(2)} × (script time ${script(three)} ×)`,
      cpu(three) <= 1.7,
    );
    // the webhooks' grouped check: two sliding windows (workspace + channel, bot + chat)
    bar(
      `${scenario}: 2-limit check (2 windows, a Slack or Telegram event) Redis CPU ≤ 1.35 × one window`,
      `${cpu(twoWindows, window).toFixed(2)} × (script time ${script(twoWindows, window)} ×)`,
      cpu(twoWindows, window) <= 1.35,
    );
  }
  const { layerMs, redisClientMs, layerOwnMs, slowest } = coldStartSplit(results.bundles);
  bar(
    "cold start: the layer's own part (limiter + middleware + config, ioredis loaded first) ≤ 10 ms",
    `${layerOwnMs.toFixed(1)} ms (the whole part ${layerMs.toFixed(1)} ms; ioredis alone ${redisClientMs.toFixed(1)} ms, ${((100 * redisClientMs) / layerMs).toFixed(0)} %)`,
    layerOwnMs <= 10,
  );
  bar(
    'cold start: every function bundle (+ layer) imports in ≤ 80 ms',
    `slowest ${slowest.name.replace('function: ', '')} ${slowest.coldImportMs.toFixed(1)} ms`,
    slowest.coldImportMs <= 80,
  );
  const idle = results.memory.bytesPerKey['ours-tb'] ?? Number.NaN;
  bar('idle, not-full token-bucket key ≤ 120 bytes', `${idle.toFixed(0)} bytes`, idle <= 120);

  const dir = process.env.BENCH_OUT
    ? new URL(`file://${process.env.BENCH_OUT.replace(/\/?$/, '/')}`)
    : new URL('./results/', import.meta.url);
  mkdirSync(dir, { recursive: true });
  writeFileSync(new URL(`${results.date}.json`, dir), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(new URL(`${results.date}.md`, dir), markdown(results));
  writeFileSync(new URL('chart.svg', dir), await chart(results));
  copyFileSync(new URL(`${results.date}.md`, dir), new URL('latest.md', dir));
  console.log(`\n${results.bars.map((b) => `${b.met ? 'met ' : 'MISS'}  ${b.bar}: ${b.figure}`).join('\n')}`);
  console.log(`\nwrote bench/results/${results.date}.md (and latest.md)`);
} finally {
  plain.disconnect();
  ours.disconnect();
  await server.stop();
}
