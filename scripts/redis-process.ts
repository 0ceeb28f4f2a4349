/**
 * Starts and stops real `redis-server` processes for tests, the local platform
 * and the benchmarks. No Docker: the machine's own redis-server (apt), or
 * REDIS_SERVER_BIN.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';

const SERVER_BIN = process.env.REDIS_SERVER_BIN ?? 'redis-server';
const CLI_BIN = process.env.REDIS_CLI_BIN ?? 'redis-cli';

export interface RedisProcessOptions {
  /** Port to listen on. @default a free port */
  port?: number;
  /** Data directory. @default a fresh temporary directory, removed on stop */
  dir?: string;
  /** Append-only file on, as in production ("redis-durable"). @default false */
  durable?: boolean;
  /** `maxmemory` in bytes (0: none). @default 0 */
  maxmemoryBytes?: number;
  /** A Redis Cluster node. @default false */
  clusterNode?: boolean;
  /** Pin the server to this CPU (taskset), so a benchmark's client and server do not share a core. */
  cpu?: number;
}

export interface RedisProcess {
  readonly host: string;
  readonly port: number;
  readonly url: string;
  /** SIGSTOP: the port stays open but nothing answers (a stalled server). */
  pause(): void;
  /** SIGCONT after `pause`. */
  resume(): void;
  /** Stops the server; with `keepData` the directory survives for a restart. */
  stop(keepData?: boolean): Promise<void>;
  /** Starts the same server again on the same port and directory. */
  restart(): Promise<RedisProcess>;
}

/** A port free now on loopback (and, for cluster nodes, its bus port +10000). */
export async function freePort(alsoBusPort = false): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
    });
    if (!alsoBusPort) return port;
    if (port + 10000 < 65536 && (await isFree(port + 10000))) return port;
  }
}

async function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Sends one inline command and returns the raw reply (enough for startup checks). */
export function rawCommand(port: number, command: string, host = '127.0.0.1'): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host, port }, () => socket.write(`${command}\r\n`));
    let data = '';
    socket.setTimeout(1000, () => socket.destroy(new Error('no answer')));
    socket.on('data', (chunk) => {
      data += chunk.toString();
      if (data.endsWith('\r\n')) socket.end();
    });
    socket.on('end', () => resolve(data));
    socket.on('error', reject);
  });
}

const NOT_INSTALLED = `${SERVER_BIN} is not installed: apt-get install redis-server redis-tools (or set REDIS_SERVER_BIN)`;

/**
 * Waits until the server this process started answers on `port`. Its PONG is
 * not enough: a server that was already there would answer too, so the
 * answering server's process id must be the child's.
 */
async function untilAnswers(port: number, child: ChildProcess, spawnError: () => Error | undefined): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const error = spawnError();
    if (error) throw (error as NodeJS.ErrnoException).code === 'ENOENT' ? new Error(NOT_INSTALLED) : error;
    if (child.exitCode !== null) throw new Error(`redis-server on port ${port} exited with ${child.exitCode}`);
    const info = await rawCommand(port, 'INFO server').catch(() => '');
    const pid = /process_id:(\d+)/.exec(info)?.[1];
    if (pid !== undefined && Number(pid) === child.pid) return;
    await delay(20); // polling a starting process, bounded by the deadline
  }
  throw new Error(`redis-server on port ${port} did not answer within 10 s`);
}

/** Whether a port on loopback is free now. */
export { isFree as isPortFree };

export async function startRedis(options: RedisProcessOptions = {}): Promise<RedisProcess> {
  const port = options.port ?? (await freePort(options.clusterNode));
  if (options.port !== undefined && !(await isFree(port))) {
    throw new Error(
      `port ${port} is already taken (another Redis?): the local platform never uses a server it did not start`,
    );
  }
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'rl-redis-'));
  mkdirSync(dir, { recursive: true });
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    options.durable ? 'yes' : 'no',
    '--maxmemory',
    String(options.maxmemoryBytes ?? 0),
    '--maxmemory-policy',
    'noeviction',
    '--daemonize',
    'no',
    '--logfile',
    join(dir, 'redis.log'),
  ];
  if (options.durable) args.push('--appendfsync', 'everysec');
  if (options.clusterNode) {
    args.push('--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`));
    args.push('--cluster-node-timeout', '2000');
  }
  const child =
    options.cpu === undefined
      ? spawn(SERVER_BIN, args, { stdio: 'ignore' })
      : spawn('taskset', ['-c', String(options.cpu), SERVER_BIN, ...args], { stdio: 'ignore' });
  let spawnError: Error | undefined;
  child.once('error', (error) => {
    spawnError = error;
  });
  await untilAnswers(port, child, () => spawnError);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const handle: RedisProcess = {
    host: '127.0.0.1',
    port,
    url: `redis://127.0.0.1:${port}`,
    pause: () => child.kill('SIGSTOP'),
    resume: () => child.kill('SIGCONT'),
    async stop(keepData = false) {
      if (child.exitCode === null) {
        child.kill('SIGCONT');
        child.kill('SIGTERM');
        await exited;
      }
      if (ownDir && !keepData) rmSync(dir, { recursive: true, force: true });
    },
    async restart() {
      await handle.stop(true);
      return startRedis({ ...options, port, dir });
    },
  };
  return handle;
}

export interface RedisClusterProcess {
  nodes: readonly RedisProcess[];
  /** `host:port,host:port,…` as REDIS_CLUSTER_NODES takes it. */
  readonly nodeList: string;
  /** Stops every node; with `keepData` their directories survive for `restart`. */
  stop(keepData?: boolean): Promise<void>;
  /** Stops every node and starts them again with their data and cluster config. */
  restart(): Promise<void>;
}

async function untilClusterOk(nodes: readonly RedisProcess[]): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (const node of nodes) {
    for (;;) {
      const info = await rawCommand(node.port, 'CLUSTER INFO').catch(() => '');
      if (info.includes('cluster_state:ok')) break;
      if (Date.now() > deadline) throw new Error('the local Redis Cluster did not reach cluster_state:ok');
      await delay(50); // polling cluster convergence, bounded by the deadline
    }
  }
}

/** A local Redis Cluster of `masters` masters (no replicas), all slots covered. */
export async function startRedisCluster(masters = 3, maxmemoryBytes = 0): Promise<RedisClusterProcess> {
  const nodes: RedisProcess[] = [];
  for (let i = 0; i < masters; i++) nodes.push(await startRedis({ clusterNode: true, maxmemoryBytes }));
  const addresses = nodes.map((n) => `${n.host}:${n.port}`);
  await promisify(execFile)(CLI_BIN, ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes']);
  const cluster: RedisClusterProcess = {
    nodes,
    nodeList: addresses.join(','),
    async stop(keepData = false) {
      await Promise.all(cluster.nodes.map((n) => n.stop(keepData)));
    },
    async restart() {
      // same ports and directories: each node keeps its nodes.conf and slots
      cluster.nodes = await Promise.all(cluster.nodes.map((n) => n.restart()));
      await untilClusterOk(cluster.nodes);
    },
  };
  await untilClusterOk(nodes);
  return cluster;
}
