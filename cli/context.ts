/**
 * What a command runs against: the policy store and the parameter source it
 * reads (the local file, or SSM with --ssm), Redis when the command needs it
 * (or a deployed Redis needs credentials first), and where it writes its
 * answer and its audit lines.
 */
import { userInfo } from 'node:os';
import {
  type CompiledPolicy,
  createLimiter,
  createRedisClient,
  type Limiter,
  RateLimitError,
  type RedisClient,
  type RedisSettings,
} from '@platform/rate-limit';
import {
  createPolicyStore,
  DEFAULT_REDIS_URL,
  FileParameterSource,
  type LayerSettings,
  type ParameterSource,
  type ParameterWriter,
  type PolicyStore,
  readSettings,
  spansRegions,
} from '@platform/rate-limit/config';
import { authenticateFromSecret, guardedRedis, ioredisConnection, secretReader } from '@platform/rate-limit/redis';
import { createRegionalLimiter } from '@platform/rate-limit/regions';
import { PLATFORM_POLICIES } from '../config/catalogue.ts';
import { localDataDir, localRedisPortFile, rememberedRedisPort } from '../config/local-data.ts';
import { secretFolder } from '../config/secrets.ts';
import { CliError, EXIT, RedisUnavailableError, unknownName } from './command.ts';

/** Where a run writes: the terminal for `npx ratelimit`, the answer for the admin function. */
export interface CliOutput {
  stdout(text: string): void;
  stderr(text: string): void;
  /** Who runs it, for the audit lines. @default the OS user */
  readonly who?: string;
  /**
   * The access key id the caller signed with (the admin function's caller),
   * in each audit line beside `who`: CloudTrail traces it to the AssumeRole
   * that issued it, whatever session name the caller chose. An identifier,
   * not a secret (without its secret access key it signs nothing).
   */
  readonly accessKey?: string;
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
  /** The store this region's checks use (REDIS_URL / REDIS_CLUSTER_NODES). */
  redis?: RedisClient;
  /**
   * A multi-region stage's home store (REDIS_HOME_*), where home-mode policies
   * are decided, as the consumers' regional limiter decides them
   * (functions/shared/regional.ts); undefined in a one-store stage.
   */
  homeRedis?: RedisClient;
  /** Whether the stage has more than one region or a home store of its own. */
  multiRegion?: boolean;
  limiter?: Limiter;
}

/** The answer: the human text, or the data as one JSON line with --json. */
export function out(context: Context, human: string, data: unknown): void {
  context.io.stdout(`${context.json ? JSON.stringify(data) : human}\n`);
}

/** One JSON line per write: who, what, before, after (never a raw key). */
export function audit(context: Context, what: string, detail: Record<string, unknown>): void {
  const who = context.io.who ?? userInfo().username;
  const { accessKey } = context.io;
  const record: AuditRecord = {
    audit: 'ratelimit',
    who,
    ...(accessKey === undefined ? {} : { accessKey }),
    what,
    at: new Date().toISOString(),
    ...detail,
  };
  context.io.stderr(`${JSON.stringify(record)}\n`);
  context.io.onAudit?.(record);
}

/**
 * Whether a write that failed may still have landed. Not when it was refused
 * before anything was sent (the layer's own errors, a usage error, ioredis
 * without a connection: it queues nothing) or by the store itself (an AWS
 * 4xx; Redis's OOM refuses a script whole). Anything else (a timeout, a
 * connection lost after sending, a 5xx) may have.
 */
export function mayHaveLanded(error: unknown): boolean {
  if (error instanceof RedisUnavailableError)
    return error.reason !== 'out-of-memory' && error.reason !== 'misconfigured';
  if (error instanceof RateLimitError || error instanceof CliError) return false;
  const e = error as { message?: unknown; $metadata?: { httpStatusCode?: unknown } } | null;
  if (typeof e?.message === 'string' && e.message.includes('enableOfflineQueue')) return false;
  const status = e?.$metadata?.httpStatusCode;
  return !(typeof status === 'number' && status >= 400 && status < 500);
}

/**
 * Runs a write, and audits it as `outcome: "unknown"` when it failed but may
 * have landed (`mayHaveLanded`: a timeout, a lost reply) before rethrowing:
 * Redis may have run it, SSM stored it, so such a write is never left
 * unaudited. `detail` is what the write's own audit line would say, as far
 * as it is known before it.
 */
export async function auditedWrite<T>(
  context: Context,
  what: string,
  detail: Record<string, unknown>,
  write: () => Promise<T>,
): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (mayHaveLanded(error)) {
      const reason = error instanceof RedisUnavailableError ? error.reason : ((error as Error)?.name ?? typeof error);
      audit(context, what, { ...detail, outcome: 'unknown', reason });
    }
    throw error;
  }
}

/**
 * The Redis a command acts on: the one the environment names (REDIS_URL,
 * REDIS_CLUSTER_NODES); naming none, the local platform's (`npm start`
 * remembers its port in .local/redis/port), and only without that the layer's
 * default, 127.0.0.1:6379. `npm start`'s Redis is not on 6379 (apt's
 * redis-server may be), so the default made the CLI act on another Redis.
 */
export function cliRedisSettings(settings: LayerSettings, env: NodeJS.ProcessEnv = process.env): RedisSettings {
  if (env.REDIS_URL || env.REDIS_CLUSTER_NODES) return settings.redis;
  const port = rememberedRedisPort(localDataDir(env));
  return port === undefined ? settings.redis : { ...settings.redis, url: `redis://127.0.0.1:${port}` };
}

/** Where the CLI's Redis is, for an unavailable command's message: host and port only (a URL may hold a password). */
export function redisWhere(env: NodeJS.ProcessEnv = process.env, store: 'home' | 'regional' = 'regional'): string {
  const all = readSettings(env);
  const settings = store === 'home' && all.home !== undefined ? all.home.redis : cliRedisSettings(all, env);
  if (settings.clusterNodes) return settings.clusterNodes.join(',');
  const host = new URL(settings.url ?? DEFAULT_REDIS_URL).host;
  if (env.REDIS_URL || rememberedRedisPort(localDataDir(env)) === undefined) return host;
  return `${host}, npm start's (its port from ${localRedisPortFile(localDataDir(env))}): is it running?`;
}

/**
 * The limiter the consumers decide with, over the context's stores: in a
 * multi-region stage the regional limiter (home-mode policies on the home
 * store, the others on this region's), else the plain one. The CLI on the
 * plain limiter there inspected and reset keys nobody writes.
 */
export function limiterOf(context: Context): Limiter {
  if (!context.limiter) {
    const settings = readSettings();
    context.redis ??= createRedisClient(cliRedisSettings(settings));
    const options = { policies: context.store, onDegraded: () => {} };
    context.limiter = context.multiRegion
      ? createRegionalLimiter({
          ...options,
          redis: context.homeRedis ?? context.redis,
          regionalRedis: context.redis,
          regions: settings.regions,
        })
      : createLimiter({ ...options, redis: context.redis });
  }
  return context.limiter;
}

/** Which store holds a policy's counter: the home store for a home-mode policy of a multi-region stage, else this region's. */
export function storeNameOf(context: Context, policy: CompiledPolicy): 'home' | 'regional' {
  return context.multiRegion && policy.regions === 'home' ? 'home' : 'regional';
}

/** The store holding a policy's counter (storeNameOf). */
export function storeOf(context: Context, policy: CompiledPolicy): RedisClient {
  const regional = context.redis as RedisClient;
  return storeNameOf(context, policy) === 'home' ? (context.homeRedis ?? regional) : regional;
}

/**
 * The policy a command was given, when the store knows it; otherwise `code`
 * (a usage error, or for `override` a refusal, as before) with a message that
 * names the policies but not the word given: a policy position holding an API
 * key or an email (arguments swapped) must not put it in the admin function's
 * log, as the layer's own "unknown rate-limit policy" message would.
 */
export function knownPolicy(context: Context, given: string, code: number = EXIT.usage): string {
  const names = context.store.policyNames();
  if (!names.includes(given)) throw new CliError(code, unknownName('policy', names));
  return given;
}

/**
 * How long a raw command of the CLI (a counter's TTL, a strategy's fields,
 * `reset`'s DEL) waits for its reply. A reply takes a millisecond; during a
 * failover, or on a connection whose packets vanish, it never comes, and
 * ioredis would wait for it for ever (the clients have no command timeout: the
 * checks have their own deadline). Bounded, a `reset` whose DEL is not
 * answered ends as `outcome: "unknown"`, audited and notified, long before
 * the admin function's 30 s timeout would kill it unaudited: at worst the
 * connection's wait (5 s), two peeks (their policy's budget) and five raw
 * commands under this one, about 10 s.
 */
export const COMMAND_BUDGET_MS = 1000;

/**
 * Raw commands on the store holding a policy's counter, under that client's
 * deadline guard (the one its checks use: '@platform/rate-limit/redis'
 * guardedRedis): their reply by COMMAND_BUDGET_MS, or a RedisUnavailableError
 * saying why there is none (`timeout`: sent and unanswered, it may still
 * run; `auditedWrite` audits such a write as outcome unknown).
 */
export async function onStore<T>(
  context: Context,
  policy: CompiledPolicy,
  work: (redis: RedisClient) => Promise<T>,
): Promise<T> {
  const answer = await guardedRedis(storeOf(context, policy)).within(COMMAND_BUDGET_MS, work);
  if (!answer.ok) throw new RedisUnavailableError(answer.reason, storeNameOf(context, policy));
  return answer.reply;
}

/** Waits for a store's connection, bounded: an operator's first command should not degrade within a 100 ms budget. */
async function whenConnected(redis: RedisClient): Promise<void> {
  const connected = ioredisConnection(redis)
    .whenReady()
    .catch(() => {});
  await Promise.race([connected, new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
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
  const store = createPolicyStore({
    defaults: PLATFORM_POLICIES,
    source,
    prefix: settings.parameterPath,
    secretFolder,
  });
  const refreshed = await store.refresh();
  // shipped defaults shown as "in force", or a reset on them, would be wrong: exit 1 instead
  if (!refreshed.fetched)
    throw new CliError(EXIT.unavailable, `the parameters could not be read (${refreshed.reason})`);
  const multiRegion = spansRegions(settings);
  const context: Context = { io, json: options.json, store, source, prefix: settings.parameterPath, multiRegion };
  try {
    if (settings.redisAuthSecretId) {
      // A deployed Redis requires credentials: read them (Secrets Manager) before the first connection.
      context.redis = createRedisClient(cliRedisSettings(settings));
      await authenticateFromSecret(context.redis, settings.redisAuthSecretId, secretReader(settings));
    }
    if (options.redis && settings.home !== undefined) {
      const { redis, authSecretId, authSecretFile } = settings.home;
      context.homeRedis = createRedisClient(redis);
      if (authSecretId !== undefined) {
        await authenticateFromSecret(
          context.homeRedis,
          authSecretId,
          secretReader({ redisAuthSecretFile: authSecretFile }),
        );
      }
    }
    if (options.redis) {
      // An operator waits for the connections (TLS, a cluster's every master); bounded, then commands answer as they can.
      context.redis ??= createRedisClient(cliRedisSettings(settings));
      await Promise.all([context.redis, context.homeRedis].flatMap((r) => (r ? [whenConnected(r)] : [])));
    }
  } catch (error) {
    // a failed sign-in (a secret that cannot be read) must not leave a connection open in a warm container
    context.redis?.disconnect();
    context.homeRedis?.disconnect();
    throw error;
  }
  return context;
}
