/** Runs one limiter at one concurrency for a fixed time and measures it. */
import { spawnSync } from 'node:child_process';
import { createHistogram } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import type { BenchLimiter } from './limiters.ts';

export interface RunFigures {
  checksPerSecond: number;
  admittedShare: number;
  p50Us: number;
  p99Us: number;
  p999Us: number;
  clientCpuUsPerCheck: number;
  /** The user-space part of clientCpuUsPerCheck (the rest is the kernel's: syscalls, the loopback's network work). */
  clientUserUsPerCheck: number;
  redisCpuUsPerCheck: number;
  /** Redis' time in the commands a check sends (INFO commandstats, all but the benchmark's own): for a script, its script time. */
  scriptUsPerCheck: number;
}

/** The commands the benchmark itself sends between runs, left out of a check's command time. */
const OWN_COMMANDS = new Set(['info', 'config', 'flushall', 'script', 'ping', 'client', 'hello', 'select']);

/** Redis' µs in the commands of the checks since the last RESETSTAT (INFO commandstats). */
async function commandUs(redis: Redis): Promise<number> {
  let us = 0;
  for (const [, name, usec] of (await redis.info('commandstats')).matchAll(
    /cmdstat_([^:|]+)[^:]*:calls=\d+,usec=(\d+)/g,
  )) {
    if (!OWN_COMMANDS.has(name as string)) us += Number(usec);
  }
  return us;
}

/**
 * Client and Redis each get a core of their own (2-core machine): without it
 * the scheduler, not the code, decides who is fast. Re-runs this process
 * pinned to CPU 0 (the caller starts Redis on CPU 1) and exits with its status;
 * answers whether the figures are pinned.
 */
export function pinnedToCpu0(): boolean {
  const canPin = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
  if (canPin && process.env.BENCH_PINNED !== '1') {
    const pinned = spawnSync('taskset', ['-c', '0', process.execPath, ...process.argv.slice(1)], {
      stdio: 'inherit',
      env: { ...process.env, BENCH_PINNED: '1' },
    });
    process.exit(pinned.status ?? 1);
  }
  return canPin;
}

/** Redis main-thread CPU seconds (user + system), from INFO. */
export async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? Number.NaN);
  const main = field('used_cpu_user_main_thread') + field('used_cpu_sys_main_thread');
  return Number.isNaN(main) ? field('used_cpu_user') + field('used_cpu_sys') : main;
}

async function drive(
  lanes: readonly BenchLimiter[],
  keyOf: () => string,
  ms: number,
  record?: (ns: number) => void,
): Promise<{ checks: number; admitted: number }> {
  const until = performance.now() + ms;
  let checks = 0;
  let admitted = 0;
  const lane = async (limiter: BenchLimiter) => {
    while (performance.now() < until) {
      const started = process.hrtime.bigint();
      const ok = await limiter.check(keyOf());
      record?.(Number(process.hrtime.bigint() - started));
      checks++;
      if (ok) admitted++;
    }
  };
  await Promise.all(lanes.map(lane));
  return { checks, admitted };
}

/**
 * One limiter for `ms`: `lanes` checks in flight, one per lane, each lane
 * on its own limiter (its own connection: the Lambda shape, N connections ×
 * 1 in flight) or all on one (one connection × N in flight).
 */
export async function measure(
  redis: Redis,
  lanes: readonly BenchLimiter[],
  keyOf: () => string,
  ms: number,
): Promise<RunFigures> {
  await drive(lanes, keyOf, Math.min(500, ms / 4)); // warm-up: JIT, script cache, connection
  const histogram = createHistogram();
  await redis.config('RESETSTAT');
  const cpuBefore = process.cpuUsage();
  const redisBefore = await redisCpuSeconds(redis);
  const started = performance.now();
  const { checks, admitted } = await drive(lanes, keyOf, ms, (ns) => histogram.record(Math.max(1, ns)));
  const elapsedMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const redisCpu = (await redisCpuSeconds(redis)) - redisBefore;
  const scriptUs = await commandUs(redis);
  return {
    checksPerSecond: (checks * 1000) / elapsedMs,
    admittedShare: admitted / checks,
    p50Us: histogram.percentile(50) / 1000,
    p99Us: histogram.percentile(99) / 1000,
    p999Us: histogram.percentile(99.9) / 1000,
    clientCpuUsPerCheck: (cpu.user + cpu.system) / checks,
    clientUserUsPerCheck: cpu.user / checks,
    redisCpuUsPerCheck: (redisCpu * 1e6) / checks,
    scriptUsPerCheck: scriptUs / checks,
  };
}

/** The median of a list: its middle value, the mean of the middle two for an even count. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/**
 * One figure against another as the median of the rounds' own ratios (round i
 * of `rounds` against round i of `base`: they ran seconds apart, the rounds a
 * minute or more); undefined when the two have no rounds to pair.
 */
export function pairedRatio<Round>(
  rounds: readonly Round[] | undefined,
  base: readonly Round[] | undefined,
  value: (round: Round) => number,
): number | undefined {
  if (!rounds || !base || rounds.length === 0 || rounds.length !== base.length) return undefined;
  return median(rounds.map((round, i) => value(round) / value(base[i] as Round)));
}

/** Each figure's median over the rounds. */
export function medianFigures(rounds: readonly RunFigures[]): RunFigures {
  const fields = Object.keys(rounds[0] ?? {}) as (keyof RunFigures)[];
  return Object.fromEntries(fields.map((f) => [f, median(rounds.map((r) => r[f]))])) as unknown as RunFigures;
}

/** Redis `used_memory` growth per identifier after one check each of `count` identifiers. */
export async function memoryPerKey(redis: Redis, limiter: BenchLimiter, count: number): Promise<number> {
  await redis.flushall();
  const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1]);
  const before = await usedMemory();
  let next = 0;
  const lane = async () => {
    while (next < count) await limiter.check(`m${next++}`);
  };
  await Promise.all(Array.from({ length: 64 }, lane));
  return ((await usedMemory()) - before) / count;
}
