/**
 * `npm run bench:lambda-client`: what the limiter's check costs the client
 * in the Lambda shape (N connections × 1 check in flight), told apart from
 * what its connection and its script cost. Three rows, interleaved round by
 * round on the same Redis:
 *
 * - reference: the minimal reference bucket on plain ioredis (`reference-tb`
 *   of `npm run bench`, bench/reference/token_bucket.lua);
 * - bare script: the project's token-bucket script with a check's keys and
 *   arguments, sent by `redis.evalsha` on the layer's connection: no limiter;
 * - check: the limiter's check (`ours-tb` of `npm run bench`).
 *
 * The check's figure over the bare script's is the layer's own code (policy,
 * key, deadline, reply, decision). Each ratio is the median over the rounds
 * of that round's ratio to the reference (the host drifts between rounds,
 * not within one), with its min–max. Writes
 * bench/results/lambda-client-<time>.md and prints it.
 *
 *   BENCH_SECONDS      per round and row (default 1)
 *   BENCH_ROUNDS       interleaved rounds (default 9)
 *   BENCH_CONNECTIONS  connections, one check in flight on each (default 64)
 *   BENCH_OUT          where the result goes (default bench/results/)
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRedisClient } from '@platform/rate-limit';
import { productionScripts } from '@platform/rate-limit/lua';
import { Redis } from 'ioredis';
import { startRedis } from '../scripts/redis-process.ts';
import { type BenchLimiter, benchLimiters, LIMIT, WINDOW_MS } from './limiters.ts';
import { measure, median, pinnedToCpu0, type RunFigures } from './measure.ts';

const MS = Number(process.env.BENCH_SECONDS ?? 1) * 1000;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const OUT = process.env.BENCH_OUT ?? new URL('./results/', import.meta.url).pathname;
const ROWS = ['reference', 'bare script', 'check'] as const;
type Row = (typeof ROWS)[number];
const FIELDS = ['clientCpuUsPerCheck', 'clientUserUsPerCheck', 'checksPerSecond', 'redisCpuUsPerCheck'] as const;

const canPin = pinnedToCpu0();
const server = await startRedis(canPin ? { cpu: 1 } : {});
const admin = new Redis(server.url);
const clients: Redis[] = [admin];
try {
  const bucket = productionScripts().entries.check_token_bucket ?? assert('no check_token_bucket script');
  await admin.script('LOAD', bucket.source);
  // the short form of one bucket at cost 1: capacity, µs per token (lua/check_token_bucket.lua)
  const args = [String(LIMIT), String((WINDOW_MS * 1000) / LIMIT)];
  const lanes: Record<Row, BenchLimiter[]> = { reference: [], 'bare script': [], check: [] };
  for (let c = 0; c < CONNECTIONS; c++) {
    const ours = createRedisClient({ url: server.url });
    await ours.connect();
    const plain = new Redis(server.url);
    clients.push(ours as Redis, plain);
    const limiters = await benchLimiters(ours, plain);
    const find = (id: string) => limiters.find((l) => l.id === id) ?? assert(`no ${id} limiter`);
    lanes.reference.push(find('reference-tb'));
    lanes.check.push(find('ours-tb'));
    lanes['bare script'].push({
      id: 'bare',
      label: 'bare script',
      note: '',
      check: async (key) => ((await ours.evalsha(bucket.sha, 1, `rl:{bench-tb:${key}}`, ...args)) as number) >= 0,
    });
  }
  const scenarios: [string, () => string][] = [
    ['hot key', () => 'hot'],
    ['100k keys', () => `k${Math.floor(Math.random() * 100_000)}`],
  ];
  const lines = [
    `# The limiter's client CPU in the Lambda shape ${new Date().toISOString().slice(0, 19).replace(/:/g, '-')}`,
    '',
    `${CONNECTIONS} connections × 1 check in flight, ${ROUNDS} interleaved rounds of ${MS / 1000} s per row; ${canPin ? 'client pinned to CPU 0, Redis to CPU 1' : 'unpinned (no taskset)'}. Ratios: the median over the rounds of each round's ratio to the reference (min–max).`,
    '',
    '| scenario | row | client CPU µs/check, the median round (user + kernel) | client CPU × reference | its user part × reference | throughput × reference | Redis CPU × reference |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const [scenario, keyOf] of scenarios) {
    const rounds: Record<Row, RunFigures[]> = { reference: [], 'bare script': [], check: [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const row of round % 2 === 0 ? ROWS : [...ROWS].reverse()) {
        await admin.flushall();
        rounds[row].push(await measure(admin, lanes[row], keyOf, MS));
      }
    }
    for (const row of ROWS) {
      const ratio = (field: (typeof FIELDS)[number]) => {
        const values = rounds[row].map((f, i) => f[field] / (rounds.reference[i] as RunFigures)[field]);
        return `${median(values).toFixed(2)} (${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)})`;
      };
      // the round of the median client CPU, split: its parts add up to it
      const byCpu = [...rounds[row]].sort((a, b) => a.clientCpuUsPerCheck - b.clientCpuUsPerCheck);
      const mid = byCpu[Math.floor(byCpu.length / 2)] as RunFigures;
      const split = `${mid.clientCpuUsPerCheck.toFixed(1)} (${mid.clientUserUsPerCheck.toFixed(1)} + ${(mid.clientCpuUsPerCheck - mid.clientUserUsPerCheck).toFixed(1)})`;
      lines.push(
        `| ${scenario} | ${row} | ${split} | ${ratio('clientCpuUsPerCheck')} | ${ratio('clientUserUsPerCheck')} | ${ratio('checksPerSecond')} | ${ratio('redisCpuUsPerCheck')} |`,
      );
    }
  }
  const report = `${lines.join('\n')}\n`;
  mkdirSync(OUT, { recursive: true });
  const file = join(OUT, `lambda-client-${new Date().toISOString().slice(0, 19).replace(/:/g, '-')}.md`);
  writeFileSync(file, report);
  process.stdout.write(`${report}\nwrote ${file}\n`);
} finally {
  for (const client of clients) client.disconnect();
  await server.stop();
}

function assert(message: string): never {
  throw new Error(message);
}
