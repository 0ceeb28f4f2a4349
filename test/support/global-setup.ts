/**
 * Starts the Redis servers the whole suite shares: one single node and one
 * 3-master Redis Cluster, unless REDIS_URL / REDIS_CLUSTER_NODES point at
 * external ones. Test files read those two variables (see ./targets.ts).
 */
import {
  type RedisClusterProcess,
  type RedisProcess,
  startRedis,
  startRedisCluster,
} from '../../scripts/redis-process.ts';

let single: RedisProcess | undefined;
let cluster: RedisClusterProcess | undefined;

export async function globalSetup(): Promise<void> {
  if (!process.env.REDIS_URL) {
    single = await startRedis();
    process.env.REDIS_URL = single.url;
  }
  if (!process.env.REDIS_CLUSTER_NODES) {
    cluster = await startRedisCluster(3);
    process.env.REDIS_CLUSTER_NODES = cluster.nodeList;
  }
}

export async function globalTeardown(): Promise<void> {
  await Promise.all([single?.stop(), cluster?.stop()]);
}
