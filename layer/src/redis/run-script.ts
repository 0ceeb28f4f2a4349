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
 * `runScript` as its two halves, for a caller that chains its own handlers
 * (the limiter's deadline guard, DeadlineGuard.run): the EVALSHA, and the
 * EVAL that answers a NOSCRIPT (undefined for any other error). A `.catch`
 * layer per check would cost every check a promise and a microtask turn.
 */
export function scriptSender(
  redis: RedisClient,
  script: CachedScript,
  keys: readonly string[],
  args: readonly string[],
): { send: () => Promise<unknown>; resend: (error: unknown) => Promise<unknown> | undefined } {
  return {
    send: () => redis.evalsha(script.sha, keys.length, ...keys, ...args),
    resend: (error) => (isNoScript(error) ? redis.eval(script.source, keys.length, ...keys, ...args) : undefined),
  };
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
