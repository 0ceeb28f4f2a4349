/**
 * `npm run bench:pipelining`: the project's token bucket on a client with
 * ioredis's auto-pipelining and on one without (the layer's: createRedisClient
 * sets none), interleaved round by round, in the bench's two shapes (64
 * connections × 1 in flight, the Lambda shape; 1 connection × 128), over 100k
 * keys. Prints client CPU, Redis CPU, p50 and throughput per check, medians
 * of the rounds: why the layer leaves it off (docs/design.md, "What a check
 * costs").
 *
 *   BENCH_SECONDS  per round and variant (default 1)
 *   BENCH_ROUNDS   interleaved rounds (default 4)
 */
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
const VARIANTS = { off: false, on: true } as const;

/** The layer's command options (connection.ts: no offline queue, no retries), auto-pipelining as given. */
const options = (autoPipelining: boolean): RedisOptions => ({
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  enableAutoPipelining: autoPipelining,
});

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
    const lanes: Record<keyof typeof VARIANTS, BenchLimiter[]> = { off: [], on: [] };
    for (const [variant, auto] of Object.entries(VARIANTS) as [keyof typeof VARIANTS, boolean][]) {
      for (let c = 0; c < connections; c++) {
        const ours = await ready(new Redis(server.url, options(auto)));
        const plain = await ready(new Redis(server.url));
        clients.push(ours, plain);
        const limiter = (await benchLimiters(ours, plain)).find((l) => l.id === 'ours-tb');
        if (!limiter) throw new Error('no ours-tb limiter');
        for (let i = 0; i < inFlight; i++) lanes[variant].push(limiter);
      }
    }
    const figures: Record<keyof typeof VARIANTS, RunFigures[]> = { off: [], on: [] };
    for (let round = 0; round < ROUNDS; round++)
      for (const variant of round % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const))
        figures[variant].push(await measure(admin, lanes[variant], keyOf, MS));
    for (const variant of ['off', 'on'] as const) {
      const f = medianFigures(figures[variant]);
      console.log(
        `${connections}×${inFlight} auto-pipelining ${variant}: client ${f.clientCpuUsPerCheck.toFixed(1)} µs/check, Redis ${f.redisCpuUsPerCheck.toFixed(1)} µs/check, p50 ${f.p50Us.toFixed(0)} µs, ${f.checksPerSecond.toFixed(0)} checks/s`,
      );
    }
  }
} finally {
  for (const client of clients) client.disconnect();
  await server.stop();
}
