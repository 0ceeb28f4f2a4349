/**
 * Regions, locally: one production-shaped Redis per region (TLS only, the
 * `default` user off, the platform's ACL users from config/redis-roles.ts,
 * append-only, noeviction; a single node, where AWS has a cluster), and a
 * delaying proxy in front of each (scripts/delay-proxy.ts): whatever another
 * region sends it (replication, a home-mode check) crosses that link, so one
 * `latencyMs` and one `partition()` stand for the network between regions.
 * With `replicate`, a replicator per region (scripts/region-replicator.ts)
 * copies the keys each region writes to the others through the links.
 */

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRedisClient, type RedisClient } from '@platform/rate-limit';
import { parseRedisCredentials, useRedisCredentials } from '@platform/rate-limit/redis';
import { type DelayProxy, startDelayProxy } from './delay-proxy.ts';
import { type RedisProcess, startRedis, type TlsFiles } from './redis-process.ts';
import { certificates, type ProdShapeUsers, writeProdShapeUsers } from './redis-prod-shape.ts';
import { type Replicator, startReplicator } from './region-replicator.ts';

export interface LocalRegion {
  readonly name: string;
  readonly redis: RedisProcess;
  /** The link other regions reach this one through. */
  readonly link: DelayProxy;
  /** rediss://localhost:<port> of the store itself (this region's own clients). */
  readonly url: string;
  /** rediss://localhost:<port> of its link (another region's clients). */
  readonly remoteUrl: string;
  replicator?: Replicator;
}

export interface LocalRegions {
  readonly regions: readonly LocalRegion[];
  readonly tls: TlsFiles;
  readonly users: ProdShapeUsers;
  readonly functionsSecretFile: string;
  readonly adminSecretFile: string;
  /** The layer's environment of a function in `region` (home-mode checks go to `home`, through its link unless local). */
  env(region: string, home?: string): Record<string, string>;
  /** A client of `region`'s store as the administrator (`via: 'link'`: as another region reaches it). */
  admin(region: string, via?: 'local' | 'link'): RedisClient;
  /** Sets every link's one-way latency. */
  setLatency(ms: number): void;
  partition(): void;
  heal(): void;
  stop(): Promise<void>;
}

export async function startLocalRegions(options: {
  names: readonly string[];
  latencyMs?: number;
  replicate?: boolean;
  replicateEveryMs?: number;
}): Promise<LocalRegions> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-regions-'));
  const tls = await certificates(dir);
  const { users, acl } = writeProdShapeUsers(dir);
  const secret = (name: string, body: object) => {
    const path = join(dir, `${name}.secret.json`);
    writeFileSync(path, JSON.stringify(body));
    return path;
  };
  const functionsSecretFile = secret('functions', users.functions);
  const adminSecretFile = secret('admin', users.admin);
  const clients: RedisClient[] = [];
  const regions: LocalRegion[] = [];
  for (const name of options.names) {
    const redis = await startRedis({
      durable: true,
      tls,
      acl: { file: acl, admin: users.admin, replication: users.replication },
    });
    const link = await startDelayProxy(redis.port, options.latencyMs ?? 0);
    regions.push({
      name,
      redis,
      link,
      url: `rediss://localhost:${redis.port}`,
      remoteUrl: `rediss://localhost:${link.port}`,
    });
  }
  const admin = (region: string, via: 'local' | 'link' = 'local') => {
    const r = regions.find((x) => x.name === region);
    if (!r) throw new Error(`no region ${region}`);
    const client = createRedisClient({ url: via === 'local' ? r.url : r.remoteUrl, tlsCaFile: tls.ca });
    useRedisCredentials(client, parseRedisCredentials(JSON.stringify(users.admin)));
    client.connect().catch(() => {});
    clients.push(client);
    return client;
  };
  if (options.replicate) {
    for (const region of regions) {
      region.replicator = startReplicator({
        region: region.name,
        source: admin(region.name),
        targets: regions.filter((r) => r !== region).map((r) => admin(r.name, 'link')),
        intervalMs: options.replicateEveryMs ?? 5,
      });
    }
    // links up (TLS through the delay): replication from the first check on
    await Promise.all(regions.map((r) => r.replicator?.caughtUp()));
  }
  return {
    regions,
    tls,
    users,
    functionsSecretFile,
    adminSecretFile,
    env(region, home = region) {
      const target = regions.find((r) => r.name === home);
      const own = regions.find((r) => r.name === region);
      if (!own || !target) throw new Error(`no region ${region} or ${home}`);
      return {
        REDIS_URL: own.url,
        REDIS_CLUSTER_NODES: '',
        REDIS_TLS_CA_FILE: tls.ca,
        REDIS_AUTH_SECRET_FILE: functionsSecretFile,
        RATE_LIMIT_REGION: region,
        RATE_LIMIT_HOME_REGION: home,
        RATE_LIMIT_REGIONS: options.names.join(','),
        REDIS_HOME_URL: home === region ? own.url : target.remoteUrl,
      };
    },
    admin,
    setLatency(ms) {
      for (const r of regions) r.link.latencyMs = ms;
    },
    partition() {
      for (const r of regions) r.link.partition();
    },
    heal() {
      for (const r of regions) r.link.heal();
    },
    async stop() {
      await Promise.all(regions.map((r) => r.replicator?.stop()));
      for (const client of clients) client.disconnect();
      await Promise.all(regions.map((r) => r.link.close()));
      await Promise.all(regions.map((r) => r.redis.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
