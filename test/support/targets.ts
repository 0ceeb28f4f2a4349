/**
 * The Redis deployments every integration test of the primitive runs on: a
 * single node and a Redis Cluster, both real (started by ./global-setup.ts).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { RedisClient } from '@platform/rate-limit';
import {
  compilePolicies,
  createRedisClient,
  type LimiterOptions,
  type RedisSettings,
  staticPolicies,
} from '@platform/rate-limit';
import { readSettings } from '@platform/rate-limit/config';
import { Limiter } from '@platform/rate-limit/core';
import { assembleScripts } from '@platform/rate-limit/lua';
import { parseRedisCredentials, useRedisCredentials, whenReady } from '@platform/rate-limit/redis';

export interface RedisTarget {
  readonly name: 'single node' | 'cluster';
  /** What the limiter connects with: on the cluster, as the functions' ACL user, over TLS. */
  client(): RedisClient;
  /** What a test inspects with beyond the functions user's rights (MEMORY USAGE, KEYS, INFO, STRLEN). */
  admin(): RedisClient;
  /** The settings a worker process gives `testRedisClient`. */
  settings(): RedisSettings;
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the tests with npm test (test/support/global-setup.ts)`);
  return value;
}

/** A client that starts connecting now (production clients connect on first check). */
function connecting(redis: RedisClient): RedisClient {
  redis.connect().catch(() => {});
  return redis;
}

/** The suite's cluster as the layer reads it from the environment: the production shape (TLS, ACL users, replicas). */
export function clusterSettings(): RedisSettings {
  required('REDIS_CLUSTER_NODES');
  return readSettings(process.env).redis;
}

/**
 * A client for these settings; on the production-shaped cluster it
 * authenticates as the user whose secret the file names (the functions' user
 * by default, REDIS_AUTH_SECRET_FILE), as the layer does.
 */
export function testRedisClient(settings: RedisSettings, secretFile = process.env.REDIS_AUTH_SECRET_FILE): RedisClient {
  const redis = createRedisClient(settings);
  if (settings.clusterNodes && secretFile)
    useRedisCredentials(redis, parseRedisCredentials(readFileSync(secretFile, 'utf8')));
  return redis;
}

export const targets: readonly RedisTarget[] = [
  {
    name: 'single node',
    settings: () => ({ url: required('REDIS_URL') }),
    client: () => connecting(createRedisClient({ url: required('REDIS_URL') })),
    admin: () => connecting(createRedisClient({ url: required('REDIS_URL') })),
  },
  {
    name: 'cluster',
    settings: clusterSettings,
    client: () => connecting(testRedisClient(clusterSettings())),
    admin: () => connecting(testRedisClient(clusterSettings(), required('REDIS_ADMIN_SECRET_FILE'))),
  },
];

/** Waits until a test client takes raw commands (it has no offline queue). */
export function connected(redis: RedisClient): Promise<void> {
  return whenReady(redis);
}

/** A fresh policy-name suffix, so tests sharing a server never share a key. */
export function unique(prefix = 't'): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** A test clock in microseconds, read by the pinned-clock scripts. */
export interface TestClock {
  nowUs: number;
}

/** The scripts with the pinned test clock (its time is the last ARGV). */
export const pinnedScripts = assembleScripts(readFileSync(new URL('./pinned_clock.lua', import.meta.url), 'utf8'));

/**
 * The time budget a test's policy gets when it names none. Production's 100 ms
 * is a deadline for a warm Lambda; on a loaded 2-core CI machine a fresh
 * client's first command can take longer, and a test of the arithmetic would
 * then see a degraded answer. The deadline itself is tested where a test
 * names its budget (failure-modes.test.ts, production-shape.test.ts).
 */
const TEST_TIME_BUDGET_MS = 5000;

/**
 * A limiter whose scripts take their time from `clock` (tests only); its
 * policies get TEST_TIME_BUDGET_MS at least (they test arithmetic, not deadlines).
 */
export function pinnedLimiter(options: LimiterOptions, clock: TestClock): Limiter {
  const policies = {
    resolve: (name: string, key: string) => {
      const policy = options.policies.resolve(name, key);
      return policy && { ...policy, timeBudgetMs: Math.max(policy.timeBudgetMs, TEST_TIME_BUDGET_MS) };
    },
  };
  return new Limiter({ ...options, policies }, { scripts: pinnedScripts, timeArgs: () => [String(clock.nowUs)] });
}

/** Policies from a plain catalogue, validated as production validates them; one naming no budget gets TEST_TIME_BUDGET_MS. */
export function policies(catalogue: Record<string, unknown>) {
  const budgeted = Object.fromEntries(
    Object.entries(catalogue).map(([name, config]) => [
      name,
      typeof config === 'object' && config !== null && !('timeBudget' in config)
        ? { ...config, timeBudget: `${TEST_TIME_BUDGET_MS} ms` }
        : config,
    ]),
  );
  return staticPolicies(compilePolicies(budgeted));
}

/**
 * Calls `seen` with each command sent through the client: by one of
 * `methods` (`redis.evalsha(…)`), or built and handed to `sendCommand` (the
 * limiter's checks, which keep their ioredis Command:
 * layer/src/redis/run-script.ts).
 */
function watchingCommands(
  redis: RedisClient,
  methods: readonly string[],
  seen: (name: string, reply: Promise<unknown>) => void,
): RedisClient {
  return new Proxy(redis, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      if (property === 'sendCommand') {
        return (command: { name: string; promise: Promise<unknown> }, ...rest: unknown[]) => {
          seen(command.name, command.promise);
          return (value as (...a: unknown[]) => unknown).apply(target, [command, ...rest]);
        };
      }
      if (typeof property === 'string' && methods.includes(property)) {
        return (...args: unknown[]) => {
          const reply = (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          seen(property, reply);
          return reply;
        };
      }
      return value.bind(target);
    },
  });
}

/** The client, with the last script reply kept, so tests compare raw replies to a model's to the µs. */
export function recordingReplies(redis: RedisClient): { client: RedisClient; last(): unknown } {
  let last: unknown;
  const client = watchingCommands(redis, ['evalsha', 'eval'], (name, reply) => {
    // kept before the caller's own handlers run: theirs are chained after this
    if (name === 'evalsha' || name === 'eval')
      reply.then(
        (value) => (last = value),
        () => {},
      );
  });
  return { client, last: () => last };
}

/**
 * The client, counting the commands of `names` it sends (each its own round trip): what this test's limiter
 * asked Redis, which the server's commandstats cannot tell apart from the other test files' sharing it.
 */
export function countingCommands(
  redis: RedisClient,
  names: readonly string[] = ['evalsha', 'eval'],
): { client: RedisClient; sent(): number } {
  let sent = 0;
  const client = watchingCommands(redis, names, (name) => {
    if (names.includes(name)) sent++;
  });
  return { client, sent: () => sent };
}
