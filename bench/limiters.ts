/**
 * Every limiter of the benchmark behind one shape, on the same Redis, with the
 * same limit (1000 per second) and the same key patterns.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { RedisClient } from '@platform/rate-limit';
import { compilePolicies, createLimiter, staticPolicies } from '@platform/rate-limit';
import { Ratelimit } from '@upstash/ratelimit';
import type { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';

export const LIMIT = 1000;
/** Throughput runs: 1000 per second. */
export const WINDOW_MS = 1000;
/** Memory runs: 1000 per hour, so no state expires while it is measured. */
export const MEMORY_WINDOW_MS = 3_600_000;

export interface BenchLimiter {
  readonly id: string;
  readonly label: string;
  /** What the reader must know to compare it fairly. */
  readonly note: string;
  /** true when admitted. */
  check(key: string): Promise<boolean>;
  /** The Redis key holding one identifier's state, for MEMORY USAGE. */
  stateKey?(key: string): string;
}

function sha1(text: string): string {
  return createHash('sha1').update(text).digest('hex');
}

/** One-round-trip EVALSHA of a bench reference script (loaded up front). */
function referenceScript(redis: Redis, file: string) {
  const source = readFileSync(new URL(`./reference/${file}`, import.meta.url), 'utf8');
  const sha = sha1(source);
  return {
    load: () => redis.script('LOAD', source),
    run: (key: string, ...args: string[]) => redis.evalsha(sha, 1, key, ...args) as Promise<number>,
  };
}

/**
 * The slice of @upstash/redis that @upstash/ratelimit calls, over ioredis.
 * Upstash's scripts begin with `#!lua flags=allow-key-locking`, which Redis
 * 7.0 rejects; this shim DROPS THAT ONE LINE before EVAL, and maps Upstash's
 * SHA (of the original text) to the SHA Redis cached, so it stays at one round
 * trip per check.
 */
export class UpstashShim {
  readonly #redis: Redis;
  readonly #loaded = new Map<string, string>();
  constructor(redis: Redis) {
    this.#redis = redis;
  }
  async evalsha(sha: string, keys: string[], args: unknown[]): Promise<unknown> {
    return this.#redis.evalsha(this.#loaded.get(sha) ?? sha, keys.length, ...keys, ...args.map(String));
  }
  async eval(script: string, keys: string[], args: unknown[]): Promise<unknown> {
    const stripped = script.replace(/^#!lua[^\n]*\n/, '');
    this.#loaded.set(sha1(script), sha1(stripped));
    return this.#redis.eval(stripped, keys.length, ...keys, ...args.map(String));
  }
}

/**
 * The limiters on `ours` (the layer's client), `plain` (the peers' and the
 * references': ordinary ioredis settings) and, when given, `coalesced` (plain
 * ioredis with the layer's write coalescing, redis/write-coalescing.ts: the
 * reference bucket again, to tell what the coalescing saves from what the
 * layer costs).
 */
export async function benchLimiters(
  ours: RedisClient,
  plain: Redis,
  windowMs = WINDOW_MS,
  coalesced?: Redis,
): Promise<BenchLimiter[]> {
  const usPerToken = String((windowMs * 1000) / LIMIT);
  const catalogue = staticPolicies(
    compilePolicies({
      'bench-tb': { strategy: 'tokenBucket', capacity: LIMIT, refill: { tokens: LIMIT, every: `${windowMs} ms` } },
      'bench-sw': { strategy: 'slidingWindow', limit: LIMIT, window: `${windowMs} ms` },
      'bench-ip': {
        strategy: 'tokenBucket',
        capacity: LIMIT,
        refill: { tokens: LIMIT, every: `${windowMs} ms` },
        group: 'bench',
      },
      'bench-key': {
        strategy: 'tokenBucket',
        capacity: LIMIT,
        refill: { tokens: LIMIT, every: `${windowMs} ms` },
        group: 'bench',
      },
    }),
  );
  const limiter = createLimiter({ redis: ours, policies: catalogue, onDegraded: () => {} });
  const tbRef = referenceScript(plain, 'token_bucket.lua');
  const zsetRef = referenceScript(plain, 'zset_log.lua');
  const tbCoalesced = coalesced && referenceScript(coalesced, 'token_bucket.lua');
  await Promise.all([tbRef.load(), zsetRef.load(), tbCoalesced?.load()]);
  let member = 0;

  const rlf = new RateLimiterRedis({ storeClient: plain, points: LIMIT, duration: windowMs / 1000, keyPrefix: 'rlf' });
  const shim = new UpstashShim(plain) as unknown as ConstructorParameters<typeof Ratelimit>[0]['redis'];
  const upstashTb = new Ratelimit({
    redis: shim,
    limiter: Ratelimit.tokenBucket(LIMIT, `${windowMs} ms`, LIMIT),
    prefix: 'up-tb',
    ephemeralCache: false,
    analytics: false,
  });
  const upstashSw = new Ratelimit({
    redis: shim,
    limiter: Ratelimit.slidingWindow(LIMIT, `${windowMs} ms`),
    prefix: 'up-sw',
    ephemeralCache: false,
    analytics: false,
  });

  return [
    {
      id: 'reference-tb',
      label: 'reference token bucket',
      note: 'hand-written one-round-trip EVALSHA, returns only allowed/denied: the best-possible-client line',
      check: async (key) => (await tbRef.run(`ref:${key}`, String(LIMIT), usPerToken)) === 1,
      stateKey: (key) => `ref:${key}`,
    },
    ...(tbCoalesced
      ? [
          {
            id: 'reference-tb-coalesced',
            label: 'reference token bucket, writes coalesced',
            note: "the reference on a client with the layer's write coalescing (a turn's commands in one write while others are in flight)",
            check: async (key: string) => (await tbCoalesced.run(`ref:${key}`, String(LIMIT), usPerToken)) === 1,
          },
        ]
      : []),
    {
      id: 'ours-tb',
      label: 'this project: token bucket',
      note: 'full decision (remaining, retry-after, reset), input validation, 100 ms deadline',
      check: async (key) => (await limiter.check({ policy: 'bench-tb', key })).allowed,
      stateKey: (key) => `rl:{bench-tb:${key}}`,
    },
    {
      id: 'ours-2limit',
      label: 'this project: 2-limit all-or-nothing',
      note: 'two token buckets of one group decided and debited together in one script',
      check: async (key) =>
        (
          await limiter.checkAll(
            [
              { policy: 'bench-ip', key },
              { policy: 'bench-key', key },
            ],
            { scope: key },
          )
        ).allowed,
    },
    {
      id: 'ours-sw',
      label: 'this project: exact sliding window',
      note: 'exact count; ring of admission times, 8 bytes per event',
      check: async (key) => (await limiter.check({ policy: 'bench-sw', key })).allowed,
      stateKey: (key) => `rl:{bench-sw:${key}}`,
    },
    {
      id: 'reference-zset',
      label: 'reference sorted-set log',
      note: 'the plain exact sliding window: ZREMRANGEBYSCORE + ZCARD + ZADD + PEXPIRE in one script',
      check: async (key) =>
        (await zsetRef.run(`zlog:${key}`, String(LIMIT), String(windowMs * 1000), String(member++))) === 1,
      stateKey: (key) => `zlog:${key}`,
    },
    {
      id: 'rlf',
      label: 'rate-limiter-flexible RateLimiterRedis',
      note: 'a FIXED-window counter (not a token bucket, not exact over a sliding window); denial is a rejected promise',
      check: async (key) => {
        try {
          await rlf.consume(key);
          return true;
        } catch (error) {
          if (error instanceof RateLimiterRes) return false;
          throw error;
        }
      },
      stateKey: (key) => `rlf:${key}`,
    },
    {
      id: 'upstash-tb',
      label: '@upstash/ratelimit tokenBucket',
      note: 'its own Lua via an ioredis shim (shebang line dropped); client clock (Date.now); ephemeral cache off',
      check: async (key) => (await upstashTb.limit(key)).success,
    },
    {
      id: 'upstash-sw',
      label: '@upstash/ratelimit slidingWindow',
      note: 'approximate (two fixed windows weighted), not exact; same shim; ephemeral cache off',
      check: async (key) => (await upstashSw.limit(key)).success,
    },
  ];
}
