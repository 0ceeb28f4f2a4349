/**
 * Starts and stops real `redis-server` processes for tests, the local platform
 * and the benchmarks. No Docker: the machine's own redis-server (apt), or
 * REDIS_SERVER_BIN.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { connect as tlsConnect } from 'node:tls';
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
  /** TLS only: `port` is the TLS port and there is no plain one (as ElastiCache with in-transit encryption). */
  tls?: TlsFiles;
  /** Users from this ACL file (its `default` user off); `admin` is who the setup itself connects as. */
  acl?: { file: string; admin: Credentials; replication: Credentials };
  /** The host name a cluster node announces (cluster-preferred-endpoint-type hostname), as ElastiCache's TLS clusters do. */
  announceHostname?: string;
  /** How long a cluster master may be unreachable before its replica is promoted. @default 2000 */
  clusterNodeTimeoutMs?: number;
}

/** PEM files: the CA, and the server's certificate and key it signed. */
export interface TlsFiles {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
}

export interface Credentials {
  readonly username: string;
  readonly password: string;
}

/** How a probe reaches a server: plain or TLS, as some user or none. */
export interface ProbeAccess {
  readonly tls?: TlsFiles;
  readonly auth?: Credentials;
  /** The name TLS checks the certificate against. @default 'localhost' */
  readonly servername?: string;
}

export interface RedisProcess {
  readonly host: string;
  readonly port: number;
  readonly url: string;
  /** How to reach it as its administrator (TLS, ACL user), for probes. */
  readonly access: ProbeAccess;
  readonly pid: number;
  /** SIGKILL: gone at once, nothing written or flushed (a crashed node). */
  kill(): Promise<void>;
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

/** Where the next whole top-level RESP reply in `data` from `at` ends (simple types and bulk strings), or -1. */
function replyEnd(data: string, at: number): number {
  const line = data.indexOf('\r\n', at);
  if (line < 0) return -1;
  if (data[at] !== '$') return line + 2;
  const length = Number(data.slice(at + 1, line));
  if (length < 0) return line + 2;
  const end = line + 2 + length + 2;
  return Buffer.byteLength(data) >= end ? end : -1;
}

/**
 * Sends one inline command (after an AUTH, when `access` names a user; over
 * TLS when it names certificates) and returns the raw reply: enough for
 * startup checks and probes, without a client library.
 */
export function rawCommand(
  port: number,
  command: string,
  host = '127.0.0.1',
  access: ProbeAccess = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const commands = [...(access.auth ? [`AUTH ${access.auth.username} ${access.auth.password}`] : []), command];
    const send = () => socket.write(commands.map((c) => `${c}\r\n`).join(''));
    const socket: Socket = access.tls
      ? tlsConnect({ host, port, ca: readFileSync(access.tls.ca), servername: access.servername ?? 'localhost' }, send)
      : createConnection({ host, port }, send);
    let data = '';
    socket.setTimeout(1000, () => socket.destroy(new Error('no answer')));
    socket.on('data', (chunk) => {
      data += chunk.toString('latin1');
      let at = 0;
      for (let i = 0; i < commands.length; i++) {
        const end = replyEnd(data, at);
        if (end < 0) return;
        if (i === commands.length - 1) {
          socket.end();
          resolve(data.slice(at, end));
          return;
        }
        at = end;
      }
    });
    socket.on('close', () => resolve(data));
    socket.on('error', reject);
  });
}

const NOT_INSTALLED = `${SERVER_BIN} is not installed: apt-get install redis-server redis-tools (or set REDIS_SERVER_BIN)`;

/**
 * Waits until the server this process started answers on `port`. Its PONG is
 * not enough: a server that was already there would answer too, so the
 * answering server's process id must be the child's.
 */
async function untilAnswers(
  port: number,
  child: ChildProcess,
  spawnError: () => Error | undefined,
  access: ProbeAccess,
): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const error = spawnError();
    if (error) throw (error as NodeJS.ErrnoException).code === 'ENOENT' ? new Error(NOT_INSTALLED) : error;
    if (child.exitCode !== null) throw new Error(`redis-server on port ${port} exited with ${child.exitCode}`);
    const info = await rawCommand(port, 'INFO server', '127.0.0.1', access).catch(() => '');
    const pid = /process_id:(\d+)/.exec(info)?.[1];
    if (pid !== undefined && Number(pid) === child.pid) return;
    await delay(20); // polling a starting process, bounded by the deadline
  }
  throw new Error(`redis-server on port ${port} did not answer within 10 s`);
}

/** Whether a port on loopback is free now. */
export { isFree as isPortFree };

/**
 * The least redis-server the limiter runs on: its window scripts read with
 * BITFIELD_RO and the ACL lines (config/redis-roles.ts) say `resetchannels`,
 * both 6.2; the suite runs on 7.0 (Debian 12's). Ubuntu 22.04's apt has 6.0,
 * where every window check would fail at its first script.
 */
export const MINIMUM_REDIS_SERVER = [6, 2, 0] as const;

/**
 * The version `redis-server --version` printed (`Redis server v=7.0.15 sha=…`),
 * or an Error that says what to do when it is older than
 * MINIMUM_REDIS_SERVER or unreadable.
 */
export function checkServerVersion(printed: string, bin = SERVER_BIN): string | Error {
  const found = /\bv=(\d+)\.(\d+)\.(\d+)/.exec(printed);
  const least = MINIMUM_REDIS_SERVER.join('.');
  if (!found) return new Error(`cannot read the version of ${bin} (it printed "${printed.trim().slice(0, 80)}")`);
  const version = found.slice(1, 4).map(Number);
  const [major = 0, minor = 0, patch = 0] = version;
  const [leastMajor, leastMinor, leastPatch] = MINIMUM_REDIS_SERVER;
  const older =
    major !== leastMajor ? major < leastMajor : minor !== leastMinor ? minor < leastMinor : patch < leastPatch;
  if (!older) return version.join('.');
  return new Error(
    `${bin} is Redis ${version.join('.')}; the limiter needs ${least} or later (BITFIELD_RO, ACL resetchannels). ` +
      'Install a newer redis-server (Debian 12 and Ubuntu 24.04 ship 7.0) or point REDIS_SERVER_BIN at one.',
  );
}

let serverChecked: Promise<void> | undefined;

/** Checks the machine's redis-server once per process, before the first start. */
function assertServerVersion(): Promise<void> {
  serverChecked ??= promisify(execFile)(SERVER_BIN, ['--version']).then(
    ({ stdout }) => {
      const checked = checkServerVersion(stdout);
      if (checked instanceof Error) throw checked;
    },
    (error: unknown) => {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(NOT_INSTALLED);
      throw new Error(`cannot run ${SERVER_BIN} --version (${error instanceof Error ? error.message : String(error)})`);
    },
  );
  return serverChecked;
}

export async function startRedis(options: RedisProcessOptions = {}): Promise<RedisProcess> {
  await assertServerVersion();
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
    ...(options.tls
      ? [
          '--port',
          '0',
          '--tls-port',
          String(port),
          '--tls-cert-file',
          options.tls.cert,
          '--tls-key-file',
          options.tls.key,
          '--tls-ca-cert-file',
          options.tls.ca,
          // clients prove nothing with certificates (ElastiCache does not ask either): ACL users do
          '--tls-auth-clients',
          'no',
          '--tls-replication',
          'yes',
          ...(options.clusterNode ? ['--tls-cluster', 'yes'] : []),
        ]
      : ['--port', String(port)]),
    ...(options.acl
      ? [
          '--aclfile',
          options.acl.file,
          '--masteruser',
          options.acl.replication.username,
          '--masterauth',
          options.acl.replication.password,
        ]
      : []),
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
    args.push('--cluster-node-timeout', String(options.clusterNodeTimeoutMs ?? 2000));
    if (options.announceHostname) {
      args.push('--cluster-announce-hostname', options.announceHostname);
      args.push('--cluster-preferred-endpoint-type', 'hostname');
    }
  }
  const child =
    options.cpu === undefined
      ? spawn(SERVER_BIN, args, { stdio: 'ignore' })
      : spawn('taskset', ['-c', String(options.cpu), SERVER_BIN, ...args], { stdio: 'ignore' });
  let spawnError: Error | undefined;
  child.once('error', (error) => {
    spawnError = error;
  });
  const access: ProbeAccess = {
    ...(options.tls ? { tls: options.tls } : {}),
    ...(options.acl ? { auth: options.acl.admin } : {}),
  };
  await untilAnswers(port, child, () => spawnError, access);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const handle: RedisProcess = {
    host: '127.0.0.1',
    port,
    url: options.tls ? `rediss://localhost:${port}` : `redis://127.0.0.1:${port}`,
    access,
    pid: child.pid as number,
    kill: () => {
      child.kill('SIGKILL');
      return exited;
    },
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

export async function untilClusterOk(nodes: readonly RedisProcess[]): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (const node of nodes) {
    for (;;) {
      const info = await rawCommand(node.port, 'CLUSTER INFO', '127.0.0.1', node.access).catch(() => '');
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
