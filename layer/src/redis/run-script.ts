import type { Cluster, Redis } from 'ioredis';

export type RedisClient = Redis | Cluster;

/** A script as Redis caches it: its text and the SHA1 of the text (lua/scripts.ts assembles them). */
export interface CachedScript {
  readonly sha: string;
  readonly source: string;
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * One round trip: EVALSHA, and only when the server has lost the script
 * (restart, failover, SCRIPT FLUSH) a second one with EVAL, which also caches it.
 */
export function runScript(
  redis: RedisClient,
  script: CachedScript,
  keys: readonly string[],
  args: readonly string[],
): Promise<unknown> {
  return redis
    .evalsha(script.sha, keys.length, ...keys, ...args)
    .catch((error: unknown) =>
      isNoScript(error) ? redis.eval(script.source, keys.length, ...keys, ...args) : Promise.reject(error),
    );
}
