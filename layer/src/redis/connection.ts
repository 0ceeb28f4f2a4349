import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { GuardedConnection } from './deadline.ts';
import type { RedisClient } from './run-script.ts';
import { coalesceWrites } from './write-coalescing.ts';

/**
 * Where the limiter's Redis is. This module reads no environment: the caller
 * passes these (from `readSettings().redis`, config/settings.ts:
 * REDIS_CLUSTER_NODES, REDIS_URL, REDIS_TLS).
 */
export interface RedisSettings {
  readonly url?: string;
  readonly clusterNodes?: readonly string[];
  /** TLS to the cluster's nodes (a `rediss://` URL says so for a single node). */
  readonly tls?: boolean;
  /**
   * A PEM file of the CA that signed the server's certificate, when it is not
   * one the system trusts (the local production-shaped cluster; ElastiCache's
   * certificates chain to public roots and need none).
   */
  readonly tlsCaFile?: string;
  /** Give up a connection attempt after this long. @default 1000 */
  readonly connectTimeoutMs?: number;
  /** Longest wait between reconnect attempts. @default 50 */
  readonly maxReconnectDelayMs?: number;
  /**
   * While a restarted Redis loads its data (AOF/RDB), how often the ready
   * check asks again. ioredis waits the server's loading ETA, at least 1 s,
   * which kept every check degraded for ~1 s after the load ended. @default 10
   */
  readonly loadingPollMs?: number;
}

/**
 * The ioredis defaults suit a long-lived server, not a Lambda with a 100 ms
 * budget: with them a dead Redis holds a command ~73 s (offline queue, 20
 * retries) and a stalled one for minutes. Here a command never waits for a
 * connection (no offline queue, no retries), and reconnect attempts are at most
 * `maxReconnectDelayMs` apart so checks succeed again soon after Redis returns.
 * There is no per-command `commandTimeout` (a timer per command, ~2.6 µs): the
 * limiter's own per-check deadline bounds every wait (see limiter.ts).
 */
function connectionOptions(settings: RedisSettings): RedisOptions {
  const maxDelay = settings.maxReconnectDelayMs ?? 50;
  return {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: settings.connectTimeoutMs ?? 1000,
    // Checks sent while Redis loads would fail with LOADING; the ready check
    // holds them back (they degrade per failure mode within their budget) and
    // polls often enough that they resume within a poll of the load's end.
    maxLoadingRetryTime: settings.loadingPollMs ?? 10,
    retryStrategy: (attempt) => Math.min(10 * 2 ** attempt, maxDelay),
    lazyConnect: true,
    ...(usesTls(settings) ? { tls: tlsOptions(settings) } : {}),
  };
}

function usesTls(settings: RedisSettings): boolean {
  return settings.tls === true || settings.url?.startsWith('rediss:') === true;
}

/**
 * The certificate is checked against the host name the client was given
 * (Node's TLS does so, and sends it as SNI, whenever the host is a name);
 * only the trusted CAs are added here.
 */
function tlsOptions(settings: RedisSettings): ConnectionOptions {
  return settings.tlsCaFile === undefined ? {} : { ca: readFileSync(settings.tlsCaFile) };
}

const keepHostName = (address: string, callback: (error: Error | null, address: string) => void) =>
  callback(null, address);

function parseNode(node: string): { host: string; port: number } {
  const at = node.lastIndexOf(':');
  return { host: node.slice(0, at), port: Number(node.slice(at + 1)) };
}

export function createRedisClient(settings: RedisSettings): RedisClient {
  const options = connectionOptions(settings);
  const client =
    settings.clusterNodes && settings.clusterNodes.length > 0
      ? new Cluster(settings.clusterNodes.map(parseNode), {
          enableOfflineQueue: false,
          lazyConnect: true,
          clusterRetryStrategy: options.retryStrategy,
          slotsRefreshTimeout: options.connectTimeout,
          redisOptions: options,
          // ioredis resolves the startup nodes' names to IPs and connects to
          // the IPs: a TLS certificate names the host (ElastiCache's
          // configuration endpoint), not its addresses, so every connection
          // failed with ERR_TLS_CERT_ALTNAME_INVALID. Handing the name back
          // unresolved (ioredis's README, "AWS ElastiCache Clusters with TLS")
          // connects to it by name; the nodes the cluster announces are names
          // too (cluster-preferred-endpoint-type hostname).
          ...(usesTls(settings) ? { dnsLookup: keepHostName } : {}),
        })
      : // no URL: ioredis's own default, a single node on this machine (127.0.0.1:6379)
        settings.url === undefined
        ? new Redis(options)
        : new Redis(settings.url, options);
  // Connection errors reach callers as degraded decisions (logged and counted
  // there); without a listener ioredis would also print every failed reconnect.
  client.on('error', () => {});
  if (client instanceof Cluster) {
    // every node connection the pool makes, the startup ones included (the client connects lazily, after this)
    client.on('+node', (node: Redis) => coalesceWrites(node));
    // A node ioredis learns of later (a failover, resharding) is connected
    // lazily: the next check waits for every master again (see whenReady).
    // Connecting it here instead would race ioredis' own startup connect and
    // make a fresh client close and retry (measured: 2-6 clients of 15).
    client.on('+node', () => warmClusters.delete(client));
  } else {
    coalesceWrites(client);
  }
  return client;
}

const connecting = new WeakMap<RedisClient, Promise<void>>();
/** Cluster clients whose master connections were all seen ready once. */
const warmClusters = new WeakSet<Cluster>();

/**
 * ioredis creates every cluster node connection lazily, and re-queues a
 * command that meets a node still connecting behind `retryDelayOnFailover`
 * (100 ms): past a check's whole budget. So a cluster counts as ready once its
 * masters are connected.
 *
 * Whether checks can be sent now: the connection is ready, and for a cluster,
 * its masters were connected once (after that, a node's own trouble is an
 * ordinary failure of the checks sent to it).
 */
export function isReady(redis: RedisClient): boolean {
  return redis.status === 'ready' && (!(redis instanceof Cluster) || warmClusters.has(redis));
}

/** Resolves once every master of a ready cluster is connected; rejects at a node's error. */
function mastersReady(cluster: Cluster): Promise<void> {
  return Promise.all(cluster.nodes('master').map((node) => whenReady(node))).then(() => {
    warmClusters.add(cluster);
  });
}

/**
 * Resolves once the client can take commands (connecting a lazy client), or
 * rejects at its next connection error, or at once when it is known to be down. Every check waiting meanwhile shares
 * one promise, so a burst of checks adds no listeners. The caller bounds the
 * wait with its own deadline.
 */
export function whenReady(redis: RedisClient, waitForReconnect = false): Promise<void> {
  if (isReady(redis)) return Promise.resolve();
  if (redis instanceof Cluster && redis.status === 'ready') return mastersReady(redis);
  // a reconnect under way (its attempts failing in between) waited for; a client never connected, or ended, not
  if (waitForReconnect && redis.status !== 'wait' && redis.status !== 'end') return reconnected(redis);
  // Known to be down: answer now rather than spend the budget on a reconnect.
  if (redis.status === 'reconnecting' || redis.status === 'end' || redis.status === 'close') {
    return Promise.reject(new Error(`Redis connection is ${redis.status}`));
  }
  let pending = connecting.get(redis);
  if (!pending) {
    pending = new Promise<void>((resolve, reject) => {
      const settle = (error?: unknown) => {
        redis.off('ready', settle);
        redis.off('error', settle);
        connecting.delete(redis);
        if (error !== undefined) reject(error);
        else if (redis instanceof Cluster) mastersReady(redis).then(resolve, reject);
        else resolve();
      };
      redis.once('ready', settle);
      redis.once('error', settle);
    });
    pending.catch(() => {}); // each waiting check observes it through its own race
    connecting.set(redis, pending);
    if (redis.status === 'wait') redis.connect().catch(() => {}); // failures arrive as 'error'
  }
  return pending;
}

/**
 * Resolves once a client reconnecting is ready again (its failed attempts in
 * between do not end the wait; the caller's deadline does), or rejects when
 * it ends: for what must still reach Redis after a connection was lost (a
 * give-back of what the lost command may have taken).
 */
function reconnected(redis: RedisClient): Promise<void> {
  let pending = reconnecting.get(redis);
  if (!pending) {
    // one pair of listeners per client, however many wait: a cut with many give-backs in flight adds no more
    pending = new Promise<void>((resolve, reject) => {
      const settle = (ended: boolean) => {
        redis.off('ready', onReady);
        redis.off('end', onEnd);
        reconnecting.delete(redis);
        if (ended) reject(new Error('Redis connection is end'));
        else if (redis instanceof Cluster) mastersReady(redis).then(resolve, reject);
        else resolve();
      };
      const onReady = () => settle(false);
      const onEnd = () => settle(true);
      redis.once('ready', onReady);
      redis.once('end', onEnd);
    });
    pending.catch(() => {}); // each waiter observes it through its own deadline
    reconnecting.set(redis, pending);
  }
  return pending;
}

const reconnecting = new WeakMap<RedisClient, Promise<void>>();

/**
 * Drops the connection(s) at once so every queued command is rejected, then
 * reconnects as usual. `disconnect()` would only half-close the socket, which a
 * stalled server never completes: its queue would stay.
 */
export function resetConnection(redis: RedisClient): void {
  const nodes = 'nodes' in redis ? redis.nodes() : [redis];
  for (const node of nodes) node.stream?.destroy();
}

let shared: RedisClient | undefined;

/** One connection per Lambda container, created on first use (with these settings) and reused. */
export function sharedRedis(settings: RedisSettings): RedisClient {
  shared ??= createRedisClient(settings);
  return shared;
}

/** The deadline guard's view of an ioredis client (see deadline.ts). */
export function ioredisConnection(redis: RedisClient): GuardedConnection {
  return {
    isReady: () => isReady(redis),
    whenReady: (waitForReconnect) => whenReady(redis, waitForReconnect),
    reset: () => resetConnection(redis),
  };
}
