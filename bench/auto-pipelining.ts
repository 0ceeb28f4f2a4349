/**
 * `npm run bench:pipelining`: the project's token bucket on three clients,
 * interleaved round by round, in the bench's two shapes (64 connections × 1
 * in flight, the Lambda shape; 1 connection × 128), over 100k keys: each
 * command written alone (plain ioredis), a turn's commands coalesced (the
 * layer's: redis/write-coalescing.ts), and ioredis's auto-pipelining. Prints
 * client CPU, Redis CPU, p50 and throughput per check, medians of the
 * rounds: why the layer coalesces and leaves auto-pipelining off
 * (docs/design.md, "What a check costs").
 *
 *   BENCH_SECONDS  per round and variant (default 1)
 *   BENCH_ROUNDS   interleaved rounds (default 4)
 */
import { coalesceWrites } from '@platform/rate-limit/redis';
import { Redis, type RedisOptions } from 'ioredis';
import { startRedis } from '../scripts/redis-process.ts';
import { type BenchLimiter, benchLimiters } from './limiters.ts';
import { measure, medianFigures, type RunFigures } from './measure.ts';

const MS = Number(process.env.BENCH_SECONDS ?? 1) * 1000;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const SHAPES = [
  { connections: 64, inFlight: 1 },
  { connections: 1, inFlight: 128 },
] as const;
const VARIANTS = ['alone', 'coalesced', 'auto-pipelining'] as const;
type Variant = (typeof VARIANTS)[number];

/** The layer's command options (connection.ts: no offline queue, no retries), auto-pipelining as given. */
const options = (variant: Variant): RedisOptions => ({
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  enableAutoPipelining: variant === 'auto-pipelining',
});

function client(url: string, variant: Variant): Redis {
  const redis = new Redis(url, options(variant));
  if (variant === 'coalesced') coalesceWrites(redis);
  return redis;
}

async function ready(client: Redis): Promise<Redis> {
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
  return client;
}

const server = await startRedis();
const clients: Redis[] = [];
try {
  const admin = await ready(new Redis(server.url));
  clients.push(admin);
  let n = 0;
  const keyOf = () => `k${(n++ * 7919) % 100_000}`;
  for (const { connections, inFlight } of SHAPES) {
    const lanes = Object.fromEntries(VARIANTS.map((v) => [v, [] as BenchLimiter[]])) as Record<Variant, BenchLimiter[]>;
    for (const variant of VARIANTS) {
      for (let c = 0; c < connections; c++) {
        const ours = await ready(client(server.url, variant));
        const plain = await ready(new Redis(server.url));
        clients.push(ours, plain);
        const limiter = (await benchLimiters(ours, plain)).find((l) => l.id === 'ours-tb');
        if (!limiter) throw new Error('no ours-tb limiter');
        for (let i = 0; i < inFlight; i++) lanes[variant].push(limiter);
      }
    }
    const figures = Object.fromEntries(VARIANTS.map((v) => [v, [] as RunFigures[]])) as Record<Variant, RunFigures[]>;
    for (let round = 0; round < ROUNDS; round++)
      for (const variant of round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse())
        figures[variant].push(await measure(admin, lanes[variant], keyOf, MS));
    for (const variant of VARIANTS) {
      const f = medianFigures(figures[variant]);
      console.log(
        `${connections}×${inFlight} ${variant.padEnd(15)}: client ${f.clientCpuUsPerCheck.toFixed(1)} µs/check, Redis ${f.redisCpuUsPerCheck.toFixed(1)} µs/check, p50 ${f.p50Us.toFixed(0)} µs, ${f.checksPerSecond.toFixed(0)} checks/s`,
      );
    }
  }
} finally {
  for (const client of clients) client.disconnect();
  await server.stop();
}
