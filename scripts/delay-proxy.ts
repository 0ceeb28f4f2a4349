/**
 * A delaying TCP proxy on 127.0.0.1 standing for the network between two
 * regions: every byte is forwarded after `latencyMs` (each way, order kept),
 * and `partition()` cuts every connection and refuses new ones until
 * `heal()`. Between the local "regions" (test/support/regions.ts) it carries
 * their replication and the cross-region checks of home mode. TLS passes
 * through untouched.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface DelayProxy {
  readonly port: number;
  /** The one-way delay now, ms. */
  latencyMs: number;
  /** Cuts every open connection and refuses new ones (a partition). */
  partition(): void;
  /** Takes connections again. */
  heal(): void;
  readonly partitioned: boolean;
  close(): Promise<void>;
}

/** Forwards `from` to `to` after the proxy's latency, in order (one timer per pending chunk). */
function delayedPipe(from: Socket, to: Socket, latency: () => number): void {
  const queue: { at: number; chunk: Buffer }[] = [];
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    timer = undefined;
    const now = Date.now();
    while (queue.length > 0 && (queue[0] as { at: number }).at <= now) {
      const { chunk } = queue.shift() as { chunk: Buffer };
      if (!to.destroyed) to.write(chunk);
    }
    if (queue.length > 0) timer = setTimeout(flush, (queue[0] as { at: number }).at - now);
  };
  from.on('data', (chunk: Buffer) => {
    queue.push({ at: Date.now() + latency(), chunk });
    if (timer === undefined) timer = setTimeout(flush, Math.max(0, (queue[0] as { at: number }).at - Date.now()));
  });
  from.on('close', () => {
    if (timer !== undefined) clearTimeout(timer);
    // what was in flight still lands, then the other side closes
    const last = queue.at(-1)?.at ?? Date.now();
    setTimeout(
      () => {
        for (const { chunk } of queue.splice(0)) if (!to.destroyed) to.write(chunk);
        to.end();
      },
      Math.max(0, last - Date.now()),
    );
  });
}

/** Starts a proxy to `target` (a port on 127.0.0.1) on a free port of 127.0.0.1. */
export async function startDelayProxy(targetPort: number, latencyMs = 0): Promise<DelayProxy> {
  const sockets = new Set<Socket>();
  let partitioned = false;
  const server: Server = createServer((client) => {
    if (partitioned) {
      client.destroy();
      return;
    }
    const upstream = createConnection({ host: '127.0.0.1', port: targetPort });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.setNoDelay(true);
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
      socket.on('close', () => sockets.delete(socket));
    }
    delayedPipe(client, upstream, () => proxy.latencyMs);
    delayedPipe(upstream, client, () => proxy.latencyMs);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const proxy: DelayProxy = {
    port: typeof address === 'object' && address ? address.port : 0,
    latencyMs,
    partition() {
      partitioned = true;
      for (const socket of sockets) socket.destroy();
    },
    heal() {
      partitioned = false;
    },
    get partitioned() {
      return partitioned;
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
  return proxy;
}
