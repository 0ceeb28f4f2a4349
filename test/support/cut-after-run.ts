/**
 * A private single node whose client reaches it through a delaying proxy, so
 * a test can cut the connection after Redis ran a command and before its
 * reply came back: what a socket reset or a failover does to a command in
 * flight (the client sees its connection go, not the answer).
 */
import { setImmediate } from 'node:timers/promises';
import { createRedisClient, type RedisClient } from '@platform/rate-limit';
import { type DelayProxy, startDelayProxy } from '../../scripts/delay-proxy.ts';
import { startRedis } from '../../scripts/redis-process.ts';
import { connected } from './targets.ts';

export interface ProxiedNode {
  /** The client under test, through the proxy. */
  readonly redis: RedisClient;
  /** A client straight to the server: sees what ran, whatever the proxy does. */
  readonly admin: RedisClient;
  readonly proxy: DelayProxy;
}

/** Starts the node and the proxy, both clients connected; all stopped after the test. */
export async function proxiedNode(t: { after: (fn: () => unknown) => void }): Promise<ProxiedNode> {
  const server = await startRedis();
  const proxy = await startDelayProxy(server.port);
  const redis = createRedisClient({ url: `redis://127.0.0.1:${proxy.port}` });
  const admin = createRedisClient({ url: server.url });
  t.after(async () => {
    redis.disconnect();
    admin.disconnect();
    await proxy.close();
    await server.stop();
  });
  await Promise.all([connected(redis), connected(admin)]);
  return { redis, admin, proxy };
}

/**
 * Sends `work` with the replies held back (500 ms each way), waits until
 * `hasRun` sees its effect on the server, then cuts the connection and takes
 * new ones again; answers what `work` answered.
 */
export async function cutAfterRun<T>(
  node: ProxiedNode,
  work: () => Promise<T>,
  hasRun: () => Promise<boolean>,
): Promise<T> {
  node.proxy.latencyMs = 500;
  const answer = work();
  // a condition waited for, not a time: Redis has run it once its effect is there
  while (!(await hasRun())) await setImmediate();
  node.proxy.partition();
  node.proxy.latencyMs = 0;
  node.proxy.heal();
  return answer;
}
