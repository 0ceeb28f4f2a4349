/**
 * What a command runs against: the policy store and the parameter source it
 * reads (the local file, or SSM with --ssm), Redis when the command needs it
 * (or a deployed Redis needs credentials first), and where it writes its
 * answer and its audit lines.
 */
import { userInfo } from 'node:os';
import { createLimiter, createRedisClient, type Limiter, type RedisClient } from '@platform/rate-limit';
import {
  createPolicyStore,
  FileParameterSource,
  type ParameterSource,
  type ParameterWriter,
  type PolicyStore,
  readSettings,
} from '@platform/rate-limit/config';
import { authenticateFromSecret, ioredisConnection, secretReader } from '@platform/rate-limit/redis';
import { PLATFORM_POLICIES } from '../config/catalogue.ts';

/** Where a run writes: the terminal for `npx ratelimit`, the answer for the admin function. */
export interface CliOutput {
  stdout(text: string): void;
  stderr(text: string): void;
  /** Who runs it, for the audit lines. @default the OS user */
  readonly who?: string;
  /** Told of each write's audit record as it is logged (the admin function notifies the operators). */
  readonly onAudit?: (record: AuditRecord) => void;
}

/** One write's audit line: who, what, when, and the command's own detail (policy, key, before, after). */
export interface AuditRecord {
  readonly audit: 'ratelimit';
  readonly who: string;
  readonly what: string;
  readonly at: string;
  readonly [detail: string]: unknown;
}

export interface Context {
  readonly io: CliOutput;
  readonly json: boolean;
  readonly store: PolicyStore;
  readonly source: ParameterSource & ParameterWriter;
  readonly prefix: string;
  redis?: RedisClient;
  limiter?: Limiter;
}

/** The answer: the human text, or the data as one JSON line with --json. */
export function out(context: Context, human: string, data: unknown): void {
  context.io.stdout(`${context.json ? JSON.stringify(data) : human}\n`);
}

/** One JSON line per write: who, what, before, after (never a raw key). */
export function audit(context: Context, what: string, detail: Record<string, unknown>): void {
  const who = context.io.who ?? userInfo().username;
  const record: AuditRecord = { audit: 'ratelimit', who, what, at: new Date().toISOString(), ...detail };
  context.io.stderr(`${JSON.stringify(record)}\n`);
  context.io.onAudit?.(record);
}

/** The limiter over the context's Redis (connected on first use). */
export function limiterOf(context: Context): Limiter {
  if (!context.limiter) {
    context.redis ??= createRedisClient(readSettings().redis);
    context.limiter = createLimiter({ redis: context.redis, policies: context.store, onDegraded: () => {} });
  }
  return context.limiter;
}

/** The store, the parameter source and (for a deployed Redis, or a command that needs it) the Redis client. */
export async function openContext(
  options: { readonly ssm: boolean; readonly json: boolean; readonly redis: boolean },
  io: CliOutput,
): Promise<Context> {
  const settings = readSettings();
  const source = options.ssm
    ? // loaded when asked for: the SSM SDK is most of the admin function's cold start (~100-180 ms)
      new (await import('@platform/rate-limit/ssm')).SsmParameterSource()
    : new FileParameterSource(
        settings.parametersFile ?? new URL('../config/local-parameters.json', import.meta.url).pathname,
      );
  const store = createPolicyStore({ defaults: PLATFORM_POLICIES, source, prefix: settings.parameterPath });
  await store.refresh();
  const context: Context = { io, json: options.json, store, source, prefix: settings.parameterPath };
  if (settings.redisAuthSecretId) {
    // A deployed Redis requires credentials: read them (Secrets Manager) before the first connection.
    context.redis = createRedisClient(settings.redis);
    await authenticateFromSecret(context.redis, settings.redisAuthSecretId, secretReader(settings));
  }
  if (options.redis) {
    // An operator waits for the connection (TLS, a cluster's every master) rather than have the
    // first command degrade within a policy's 100 ms budget; bounded, then commands answer as they can.
    context.redis ??= createRedisClient(settings.redis);
    const connected = ioredisConnection(context.redis)
      .whenReady()
      .catch(() => {});
    await Promise.race([connected, new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
  }
  return context;
}
