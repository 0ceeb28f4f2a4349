import { type Cluster, Command, type Redis } from 'ioredis';

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
 * (the deadline guard, `RedisAccess.script`): the EVALSHA, and the EVAL that
 * answers a NOSCRIPT (undefined for any other error), each sent now and
 * handed back as the ioredis command it is (what the guard gives up at the
 * deadline). A `.catch` layer per check would cost every check a promise and
 * a microtask turn.
 */
export function scriptSender(
  redis: RedisClient,
  script: CachedScript,
  keys: readonly string[],
  args: readonly string[],
): { send: () => Command; resend: (error: unknown) => Command | undefined } {
  return {
    send: () => sendScript(redis, 'evalsha', script.sha, keys, args),
    resend: (error) => (isNoScript(error) ? sendScript(redis, 'eval', script.source, keys, args) : undefined),
  };
}

/**
 * What `redis.evalsha(…)` does (a Command, sent), keeping the command: the
 * client's key prefix applied as its methods apply it (`showFriendlyErrorStack`'s
 * caller stacks are not taken: an error names the command, not the caller).
 */
function sendScript(
  redis: RedisClient,
  name: 'evalsha' | 'eval',
  script: string,
  keys: readonly string[],
  args: readonly string[],
): Command {
  const command = new Command(name, [script, keys.length, ...keys, ...args], {
    replyEncoding: 'utf8',
    keyPrefix: redis.options.keyPrefix,
  });
  redis.sendCommand(command);
  return command;
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
