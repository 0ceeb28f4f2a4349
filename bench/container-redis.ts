/**
 * The platform's Redis as Lambda uses it, inside one process: every warm
 * container holds one connection with one request in flight, so Redis pays a
 * read and a write per command (nothing is pipelined across requests). Here
 * a pool of `connections` ioredis clients stands behind one client object;
 * each command goes to an idle connection (the least busy when none is), so
 * with as many connections as requests in flight no two commands share a
 * connection's write. Every command the platform sends is counted by name
 * (by its method, or handed to `sendCommand` whole): the round trips a route
 * makes.
 */
import { type Command, Redis } from 'ioredis';

/** The commands the platform issues (the layer's scripts, the claims' release, the clears): counted and spread. */
const COMMANDS = new Set(['evalsha', 'eval', 'set', 'get', 'del', 'incr', 'pttl', 'mget', 'time']);

export interface ContainerRedis {
  /** Stands for one client; give it to createPlatform({ redis }). */
  readonly client: Redis;
  /** Replaces the pool by one of `connections` connections (the client object stays the same). */
  resize(connections: number): Promise<void>;
  /** Commands sent since the last `take`, by name (and their sum): the round trips. */
  take(): { total: number; byCommand: Record<string, number> };
  close(): void;
}

export async function containerRedis(url: string, connections: number): Promise<ContainerRedis> {
  const open = async (n: number) => {
    const connected = Array.from({ length: Math.max(1, n) }, () => new Redis(url));
    await Promise.all(connected.map((c) => c.ping()));
    return connected;
  };
  let pool = await open(connections);
  let busy = pool.map(() => 0);
  let counts: Record<string, number> = {};
  const first = pool[0] as Redis;
  const idlest = () => {
    let best = 0;
    for (let i = 1; i < busy.length && busy[best] !== 0; i++)
      if ((busy[i] as number) < (busy[best] as number)) best = i;
    return best;
  };
  const client = new Proxy(first, {
    get(target, property, receiver) {
      // a command built and handed over whole (the limiter's checks keep their ioredis Command)
      if (property === 'sendCommand') {
        return (command: Command) => {
          if (!COMMANDS.has(command.name)) return target.sendCommand(command);
          counts[command.name] = (counts[command.name] ?? 0) + 1;
          const at = idlest();
          const load = busy;
          load[at] = (load[at] as number) + 1;
          const done = () => {
            load[at] = (load[at] as number) - 1;
          };
          command.promise.then(done, done);
          return (pool[at] as Redis).sendCommand(command);
        };
      }
      if (typeof property === 'string' && COMMANDS.has(property)) {
        return (...args: unknown[]) => {
          counts[property] = (counts[property] ?? 0) + 1;
          const at = idlest();
          const load = busy;
          load[at] = (load[at] as number) + 1;
          const connection = pool[at] as Redis;
          const method = connection[property as 'get'] as (...a: unknown[]) => Promise<unknown>;
          return method.apply(connection, args).finally(() => {
            load[at] = (load[at] as number) - 1;
          });
        };
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return {
    client,
    async resize(n) {
      const old = pool;
      pool = await open(n);
      busy = pool.map(() => 0);
      // the first connection stays: it answers what the platform asks of "its client" (status, events)
      for (const c of old) if (c !== first) c.disconnect();
    },
    take() {
      const byCommand = counts;
      counts = {};
      return { total: Object.values(byCommand).reduce((a, b) => a + b, 0), byCommand };
    },
    close: () => {
      for (const c of [first, ...pool]) c.disconnect();
    },
  };
}
