/**
 * The local stand-in for MemoryDB Multi-Region's replication: copies every
 * key one region writes (its name ends in `@<region>`, layer/src/regions/keys.ts)
 * from that region's store to the others', whole (DUMP, then RESTORE …
 * REPLACE with its remaining TTL), in the order it reads them, over and over.
 * One writer per key, as in MemoryDB, so a copy never loses a write; what it
 * adds is lag: a pass's read, the delaying proxy the targets sit behind
 * (scripts/delay-proxy.ts), and the interval between passes. A target it
 * cannot reach (a partition) gets the newest values once it can again.
 * Single-node stores only (the local regions); it runs as their administrator.
 */
import type { RedisClient } from '@platform/rate-limit';
import { ownKeySuffix } from '@platform/rate-limit/regions';

export interface ReplicatorOptions {
  readonly region: string;
  /** This region's store. */
  readonly source: RedisClient;
  /** The other regions' stores, each reached through its link (a delaying proxy). */
  readonly targets: readonly RedisClient[];
  /** Pause between passes, ms. @default 5 */
  readonly intervalMs?: number;
}

export interface Replicator {
  /** Passes completed (every target reached) so far. */
  readonly passes: number;
  /**
   * The replication lag seen, ms: the longest a write waited to be acknowledged
   * by every target (from the read of the pass before the one that carried it,
   * since a write just after a read waits for the next).
   */
  readonly maxLagMs: number;
  /** Resolves after a whole pass that started after this call has reached every target. */
  caughtUp(): Promise<void>;
  stop(): Promise<void>;
}

async function scanOwn(source: RedisClient, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = (await (source as import('ioredis').Redis).scan(cursor, 'MATCH', pattern, 'COUNT', 1000)) as [
      string,
      string[],
    ];
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

export function startReplicator(options: ReplicatorOptions): Replicator {
  const pattern = `*${ownKeySuffix(options.region)}`;
  const copied = options.targets.map(() => new Map<string, string>()); // key -> dump last copied
  const waiters: { after: number; resolve: () => void }[] = [];
  let running = true;
  let passes = 0;
  let maxLagMs = 0;
  let previousReadAt: number | undefined;
  let loop: Promise<void> = Promise.resolve();

  const pass = async (): Promise<boolean> => {
    const readAt = Date.now();
    const source = options.source as import('ioredis').Redis;
    const keys = await scanOwn(source, pattern);
    const values = await Promise.all(
      keys.map(async (key) => [key, await source.dumpBuffer(key), await source.pttl(key)] as const),
    );
    const reached = await Promise.all(
      options.targets.map(async (target, t) => {
        const last = copied[t] as Map<string, string>;
        const changed = values.filter(([key, dump]) => dump !== null && last.get(key) !== dump.toString('latin1'));
        try {
          await Promise.all(
            changed.map(([key, dump, ttl]) =>
              (target as import('ioredis').Redis).restore(key, Math.max(ttl, 0), dump as Buffer, 'REPLACE'),
            ),
          );
          for (const [key, dump] of changed) last.set(key, (dump as Buffer).toString('latin1'));
          return true;
        } catch {
          return false; // unreachable (a partition): next pass sends the newest values
        }
      }),
    );
    const complete = reached.every(Boolean);
    if (complete) {
      maxLagMs = Math.max(maxLagMs, Date.now() - (previousReadAt ?? readAt));
      passes++;
    }
    previousReadAt = readAt;
    return complete;
  };

  const run = async () => {
    while (running) {
      const startedAt = Date.now();
      const complete = await pass().catch(() => false);
      if (complete) {
        for (const waiter of waiters.splice(0)) {
          if (waiter.after <= startedAt) waiter.resolve();
          else waiters.push(waiter);
        }
      }
      await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 5)); // the replication's own pace
    }
  };
  loop = run();

  return {
    get passes() {
      return passes;
    },
    get maxLagMs() {
      return maxLagMs;
    },
    caughtUp() {
      return new Promise((resolve) => waiters.push({ after: Date.now(), resolve }));
    },
    async stop() {
      running = false;
      await loop;
      for (const waiter of waiters.splice(0)) waiter.resolve();
    },
  };
}
