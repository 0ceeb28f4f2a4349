/**
 * `npm run bench`: this project's limiter side by side with its peers, in one
 * run on one private redis-server, reported as ratios. Writes
 * bench/results/<date>.{json,md} and chart.svg, and latest.md.
 *
 * Two shapes: one connection × 128 checks in flight (a busy server process),
 * and BENCH_CONNECTIONS connections × 1 in flight (Lambda: every warm
 * container holds one connection and has one check in flight).
 *
 *   BENCH_SECONDS  seconds per measured run (default 1)
 *   BENCH_CONNECTIONS  connections of the Lambda shape (default 64)
 *   BENCH_ROUNDS   interleaved rounds; each figure is the median over them, each ratio
 *                  the median of the rounds' own ratios (default 3)
 *   BENCH_KEYS     identifiers of the uniform scenario and the memory runs (default 100000)
 *   BENCH_OUT      results directory (default bench/results/)
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { createRedisClient } from '@platform/rate-limit';
import { coalesceWrites } from '@platform/rate-limit/redis';
import { Redis } from 'ioredis';
import { startRedis } from '../scripts/redis-process.ts';
import { bundleFigures, coldStartSplit } from './lambda-figures.ts';
import { type BenchLimiter, benchLimiters, LIMIT, MEMORY_WINDOW_MS } from './limiters.ts';
import { measure, medianFigures, memoryPerKey, pinnedToCpu0, type RunFigures } from './measure.ts';
import { type BenchResults, chart, coldStartBars, figuresOf, markdown, ratioOf, type Scenario } from './report.ts';
import { costRatio, measureShapes, type ShapeCost, type ShapeId } from './script-cost.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 1);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** Fresh processes per cold-start figure (median). */
const COLD_RUNS = Number(process.env.BENCH_COLD_RUNS ?? 9);
/** Checks per grouped-check shape and round (scaled down with BENCH_SECONDS for the smoke run), and its rounds. */
const GROUPED_CHECKS = Math.round(100_000 * Math.min(1, SECONDS));
const GROUPED_ROUNDS = ROUNDS + 2;
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
/** The two shapes: connections × checks in flight on each. */
const SHAPES = [
  { shape: '1×128', connections: 1, inFlight: 128 },
  { shape: `${CONNECTIONS}×1`, connections: CONNECTIONS, inFlight: 1 },
] as const;
const KEYS = Number(process.env.BENCH_KEYS ?? 100_000);
const scenarios: Record<string, () => string> = {
  'hot key': () => 'hot',
  [`${KEYS / 1000}k keys`]: () => `k${Math.floor(Math.random() * KEYS)}`,
};

const canPin = pinnedToCpu0();

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
/** Plain ioredis with the layer's write coalescing: the reference bucket on it tells what the coalescing saves. */
function coalescedClient(): Redis {
  const client = new Redis(server.url);
  coalesceWrites(client);
  return client;
}
const coalesced = coalescedClient();
const ours = createRedisClient({ url: server.url });
await ours.connect();
// the Lambda shape: every limiter once per connection pair (the layer's client, the peers')
const lambda = await Promise.all(
  Array.from({ length: CONNECTIONS }, async () => {
    const client = createRedisClient({ url: server.url });
    await client.connect();
    return { ours: client, plain: new Redis(server.url), coalesced: coalescedClient() };
  }),
);
try {
  const limiters = await benchLimiters(ours, plain, undefined, coalesced);
  const perConnection = await Promise.all(lambda.map((c) => benchLimiters(c.ours, c.plain, undefined, c.coalesced)));
  /** A limiter's lanes in a shape: the one instance 128 times, or one instance per connection. */
  const lanesOf = (limiter: BenchLimiter, connections: number, inFlight: number): BenchLimiter[] =>
    connections === 1
      ? Array.from({ length: inFlight }, () => limiter)
      : perConnection.map((set) => set.find((l) => l.id === limiter.id) as BenchLimiter);
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
  // are interleaved, and each figure is the median over the rounds; a ratio is
  // the median of the rounds' own ratios (ratioOf: a round's limiters ran seconds apart).
  for (const [scenario, keyOf] of Object.entries(scenarios) as [Scenario, () => string][]) {
    for (const { shape, connections, inFlight } of SHAPES) {
      const rounds = new Map<string, RunFigures[]>(limiters.map((l) => [l.id, []]));
      for (let round = 0; round < ROUNDS; round++) {
        for (const limiter of limiters) {
          await plain.flushall();
          const lanes = lanesOf(limiter, connections, inFlight);
          rounds.get(limiter.id)?.push(await measure(plain, lanes, keyOf, SECONDS * 1000));
        }
      }
      for (const limiter of limiters) {
        const figures = medianFigures(rounds.get(limiter.id) ?? []);
        const perRound = rounds.get(limiter.id) ?? [];
        results.runs.push({
          limiter: limiter.id,
          scenario,
          shape,
          concurrency: connections * inFlight,
          figures,
          perRound,
        });
        console.log(
          `${scenario.padEnd(9)} ${shape.padEnd(6)} ${limiter.id.padEnd(14)} ${Math.round(figures.checksPerSecond).toString().padStart(7)} checks/s  p50 ${figures.p50Us.toFixed(0)} µs  redis ${figures.redisCpuUsPerCheck.toFixed(1)} µs/check  script ${figures.scriptUsPerCheck.toFixed(1)} µs  client ${figures.clientCpuUsPerCheck.toFixed(1)} µs`,
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
    ['one', 'referenceBucket', 'two', 'three', 'floor', 'window', 'referenceLog', 'twoWindows', 'twoWindowsClaim'],
    GROUPED_CHECKS,
    GROUPED_ROUNDS,
  );

  const at = (id: string, s: Scenario, shape: string) => figuresOf(results, id, s, shape);
  const bar = (shape: string, text: string, figure: string, met: boolean) =>
    results.bars.push({ shape, bar: text, figure, met });
  const x = (n: number) => `${n.toFixed(2)} ×`;
  // per shape: each figure of the project's limiters as a ratio to the minimal reference of the same run
  for (const { shape } of SHAPES) {
    for (const s of Object.keys(scenarios) as Scenario[]) {
      const ratio = (id: string, ref: string, field: keyof RunFigures) => ratioOf(results, id, ref, s, shape, field);
      const tput = ratio('ours-tb', 'reference-tb', 'checksPerSecond');
      bar(shape, `${s}: token bucket throughput ≥ 0.9 × reference`, x(tput), tput >= 0.9);
      const cpu = ratio('ours-tb', 'reference-tb', 'redisCpuUsPerCheck');
      bar(shape, `${s}: token bucket Redis CPU per check ≤ 1.1 × reference`, x(cpu), cpu <= 1.1);
      const script = ratio('ours-tb', 'reference-tb', 'scriptUsPerCheck');
      bar(shape, `${s}: token bucket script time per call ≤ 1.1 × reference`, x(script), script <= 1.1);
      const clientMax = shape === '1×128' ? 1.3 : 1.1;
      const client = ratio('ours-tb', 'reference-tb', 'clientCpuUsPerCheck');
      bar(shape, `${s}: token bucket client CPU per check ≤ ${clientMax} × reference`, x(client), client <= clientMax);
      const swScript = ratio('ours-sw', 'reference-zset', 'scriptUsPerCheck');
      bar(shape, `${s}: sliding window script time per call ≤ 1.1 × sorted-set log`, x(swScript), swScript <= 1.1);
      const swCpu = ratio('ours-sw', 'reference-zset', 'redisCpuUsPerCheck');
      bar(shape, `${s}: sliding window Redis CPU per check ≤ 1.1 × sorted-set log`, x(swCpu), swCpu <= 1.1);
      const two = ratio('ours-2limit', 'ours-tb', 'scriptUsPerCheck');
      bar(shape, `${s}: 2 buckets' script time ≤ 1.35 × one bucket's`, x(two), two <= 1.35);
      for (const peer of ['rlf', 'upstash-tb']) {
        const ours = at('ours-tb', s, shape).redisCpuUsPerCheck;
        const theirs = at(peer, s, shape).redisCpuUsPerCheck;
        const against = ratio('ours-tb', peer, 'redisCpuUsPerCheck');
        bar(
          shape,
          `${s}: token bucket Redis CPU per check below ${peer}'s`,
          `${x(against)} (medians ${ours.toFixed(1)} vs ${theirs.toFixed(1)} µs)`,
          against < 1,
        );
      }
    }
  }
  const perEvent = results.memory.bytesPerInWindowEvent['ours-sw'] ?? Number.NaN;
  const zsetPerEvent = results.memory.bytesPerInWindowEvent['reference-zset'] ?? Number.NaN;
  bar(
    'both',
    'sliding window bytes per in-window event ≤ 16',
    `${perEvent.toFixed(1)} (sorted set ${zsetPerEvent.toFixed(1)})`,
    perEvent <= 16,
  );
  const overhead = results.middlewareOverheadUs;
  bar(
    'both',
    'middleware overhead per invocation, Redis excluded: p50 ≤ 40 µs',
    `${overhead.p50.toFixed(1)} µs (p99 ${overhead.p99.toFixed(1)} µs)`,
    overhead.p50 <= 40,
  );
  // script time on the admit path (bench/script-cost.ts, 1 connection × 128, every check admitted):
  // each ratio is the median of the rounds' own ratios (costRatio)
  for (const [scenario, byShape] of Object.entries(results.grouped)) {
    const { one, referenceBucket, two, three, floor, window, referenceLog, twoWindows, twoWindowsClaim } =
      byShape as Record<ShapeId, ShapeCost>;
    const script = (shape: ShapeCost, base: ShapeCost) => costRatio(shape, base, 'scriptUs');
    const cpu = (shape: ShapeCost, base: ShapeCost) => costRatio(shape, base, 'cpuUs').toFixed(2);
    const admitted = (text: string, shape: ShapeCost, base: ShapeCost, max: number, extra = '') =>
      bar(
        'admitted',
        `${scenario}: ${text} ≤ ${max} ×`,
        `${x(script(shape, base))} (${shape.scriptUs.toFixed(1)} vs ${base.scriptUs.toFixed(1)} µs; Redis CPU ${cpu(shape, base)} ×${extra})`,
        script(shape, base) <= max,
      );
    admitted('one bucket: script time per call vs the minimal reference', one, referenceBucket, 1.1);
    admitted('one window: script time per call vs the sorted-set log', window, referenceLog, 1.1);
    admitted("two buckets: script time vs one bucket's", two, one, 1.35, `; flat floor ${x(script(floor, one))}`);
    admitted("three buckets: script time vs one bucket's", three, one, 1.7);
    // the webhooks' grouped check: two sliding windows (workspace + channel, bot + chat)
    admitted("two windows (a Slack or Telegram event): script time vs one window's", twoWindows, window, 1.5);
    // …and as the webhooks send it, with the event's once-only claim (a GET and a SET more)
    admitted("two windows + the once-only claim: script time vs one window's", twoWindowsClaim, window, 1.5);
  }
  results.bars.push(...coldStartBars(coldStartSplit(results.bundles)));
  const idle = results.memory.bytesPerKey['ours-tb'] ?? Number.NaN;
  bar('both', 'idle, not-full token-bucket key ≤ 120 bytes', `${idle.toFixed(0)} bytes`, idle <= 120);

  const dir = process.env.BENCH_OUT
    ? new URL(`file://${process.env.BENCH_OUT.replace(/\/?$/, '/')}`)
    : new URL('./results/', import.meta.url);
  mkdirSync(dir, { recursive: true });
  writeFileSync(new URL(`${results.date}.json`, dir), `${JSON.stringify(results, null, 2)}\n`);
  // the newest bench:load's round trips per route, listed beside this run's bars
  const newestLoad = readdirSync(dir)
    .filter((f) => /^load-.*\.json$/.test(f))
    .sort()
    .at(-1);
  const load = newestLoad ? JSON.parse(readFileSync(new URL(newestLoad, dir), 'utf8')) : undefined;
  writeFileSync(new URL(`${results.date}.md`, dir), markdown(results, load));
  writeFileSync(new URL('chart.svg', dir), await chart(results));
  copyFileSync(new URL(`${results.date}.md`, dir), new URL('latest.md', dir));
  console.log(
    `\n${results.bars.map((b) => `${b.met ? 'met ' : 'MISS'}  [${b.shape}] ${b.bar}: ${b.figure}`).join('\n')}`,
  );
  console.log(`\nwrote bench/results/${results.date}.md (and latest.md)`);
} finally {
  plain.disconnect();
  ours.disconnect();
  coalesced.disconnect();
  for (const c of lambda) {
    c.ours.disconnect();
    c.plain.disconnect();
    c.coalesced.disconnect();
  }
  await server.stop();
}
