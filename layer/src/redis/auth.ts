/**
 * Credentials for a Redis that requires them (ElastiCache's RBAC user of
 * the function's role, MemoryDB's ACL user; a bare AUTH token, without a
 * username, still works), read once per container from Secrets Manager
 * (`REDIS_AUTH_SECRET_ARN`, settings.ts) and set on the client before its
 * first connection. Never in an environment variable, never logged.
 */
import { Cluster, type Redis } from 'ioredis';
import * as v from 'valibot';
import { InvalidSettingError } from '../core/errors.ts';
import { AWS_CLIENT_OPTIONS } from './aws-clients.ts';
import type { RedisClient } from './run-script.ts';

export interface RedisCredentials {
  readonly password: string;
  /** An ACL user (ElastiCache RBAC, MemoryDB); absent for an AUTH token (a default user). */
  readonly username?: string;
}

/** The secret's text by its id; the default reads Secrets Manager (its SDK loaded on first use). */
export type SecretReader = (secretId: string) => Promise<string>;

const Credentials = v.object({
  password: v.pipe(v.string(), v.minLength(1)),
  username: v.optional(v.pipe(v.string(), v.minLength(1))),
});

/** `{ "password": …, "username"?: … }`; anything else is an InvalidSettingError that never quotes the secret. */
export function parseRedisCredentials(text: string): RedisCredentials {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new InvalidSettingError('REDIS_AUTH_SECRET_ARN', 'the secret is not JSON ({"password": …})');
  }
  const parsed = v.safeParse(Credentials, json);
  if (!parsed.success) {
    throw new InvalidSettingError(
      'REDIS_AUTH_SECRET_ARN',
      'the secret has no "password" string (and "username", if any, must be a string)',
    );
  }
  return parsed.output;
}

export const readSecretFromSecretsManager: SecretReader = async (secretId) => {
  const { GetSecretValueCommand, SecretsManagerClient } = await import('@aws-sdk/client-secrets-manager');
  const { SecretString } = await new SecretsManagerClient(AWS_CLIENT_OPTIONS).send(
    new GetSecretValueCommand({ SecretId: secretId }),
  );
  if (SecretString === undefined)
    throw new InvalidSettingError('REDIS_AUTH_SECRET_ARN', 'the secret has no string value');
  return SecretString;
};

/** The local stand-in for Secrets Manager: the secret's text in a file, read anew each time (a rotation rewrites it). */
export function fileSecretReader(path: string): SecretReader {
  // node:fs/promises loads on first use: it costs a cold start ~3 ms, and only local runs read a file
  return async () => (await import('node:fs/promises')).readFile(path, 'utf8');
}

/** Secrets Manager, or the file that stands in for it (REDIS_AUTH_SECRET_FILE). */
export function secretReader(settings: { redisAuthSecretFile: string | undefined }): SecretReader {
  return settings.redisAuthSecretFile === undefined
    ? readSecretFromSecretsManager
    : fileSecretReader(settings.redisAuthSecretFile);
}

/** The connection options that carry the credentials (no username: the default user, an AUTH token). */
function authOptions(credentials: RedisCredentials): { password: string; username?: string } {
  return { password: credentials.password, ...(credentials.username ? { username: credentials.username } : {}) };
}

/**
 * Sets the credentials every connection of `redis` will authenticate with
 * (the client connects lazily, so call this before its first command). On a
 * cluster they go to the options each node's connection is made from.
 */
export function useRedisCredentials(redis: RedisClient, credentials: RedisCredentials): void {
  const auth = authOptions(credentials);
  if (redis instanceof Cluster) {
    // The cluster connects to slot-map refreshes with its own redisOptions and
    // to each node with the copy its connection pool took at construction:
    // both must carry the credentials (test/integration/redis-auth.test.ts
    // fails if an ioredis upgrade moves either).
    redis.options.redisOptions ??= {};
    Object.assign(redis.options.redisOptions, auth);
    const pool = (redis as unknown as { connectionPool?: { redisOptions?: Record<string, unknown> } }).connectionPool;
    if (pool?.redisOptions) Object.assign(pool.redisOptions, auth);
    // and each node connection made already reconnects with its own copy
    for (const node of redis.nodes()) Object.assign(node.options, auth);
  } else {
    Object.assign(redis.options, auth);
  }
}

/** Redis refused the credentials: a rotation removed the password this client has. */
export function isAuthenticationError(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return /WRONGPASS|NOAUTH|invalid username-password/i.test(message);
}

/** The fewest ms between two reads of the secret after refusals (a burst of refused connections reads it once). */
const REREAD_INTERVAL_MS = 1000;

/**
 * Reads the secret and sets it on `redis`: what a container does once, before
 * its first check. Then, whenever Redis refuses the credentials (a rotation:
 * ElastiCache's or MemoryDB's user got a new password, the old one removed),
 * the secret is read again and set on every connection, which reconnects with
 * it — a warm client follows a rotation without a restart. Reads after
 * refusals are at most one per second, one at a time.
 */
export async function authenticateFromSecret(
  redis: RedisClient,
  secretId: string,
  read: SecretReader = readSecretFromSecretsManager,
  onRefresh: (outcome: { refreshed: boolean; error?: unknown }) => void = () => {},
): Promise<void> {
  let current = parseRedisCredentials(await read(secretId));
  useRedisCredentials(redis, current);
  let reading: Promise<void> | undefined;
  let lastRead = 0;
  const refused = (error: unknown) => {
    if (!isAuthenticationError(error) || reading !== undefined) return;
    if (Date.now() - lastRead < REREAD_INTERVAL_MS) {
      // read a moment ago: a connection made before that still has the old password — give it the new
      // one (cheap, no read), or a cluster keeps failing on a node or slot-refresh connection made in between
      useRedisCredentials(redis, current);
      return;
    }
    lastRead = Date.now();
    reading = read(secretId)
      .then((text) => {
        current = parseRedisCredentials(text);
        useRedisCredentials(redis, current);
        onRefresh({ refreshed: true });
      })
      .catch((error: unknown) => onRefresh({ refreshed: false, error }))
      .finally(() => {
        reading = undefined;
      });
  };
  redis.on('error', refused);
  if (redis instanceof Cluster) {
    redis.on('node error', refused);
    // a node the cluster connects to later (a failover, a reshard, a reconnect) gets the credentials in force
    redis.on('+node', (node: Redis) => {
      Object.assign(node.options, authOptions(current));
    });
  }
}
