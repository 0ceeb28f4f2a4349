/**
 * The production shape of the platform's Redis, locally (no Docker): a Redis
 * Cluster of 3 masters with 1 replica each, TLS only (a CA and a certificate
 * naming only `DNS:localhost`, made with openssl into a temporary directory),
 * nodes announcing the host name `localhost` as ElastiCache's TLS clusters
 * do, the `default` user off and ACL users instead (the functions' user
 * limited to the platform's commands and key families, config/redis-roles.ts;
 * an operator for the CLI; an administrator for the setup; a replication
 * user), append-only and `noeviction` as in production.
 *
 * The functions' credentials reach the layer as in AWS: a secret
 * `{"username","password"}` read by the layer's secret reader, here from a
 * file standing in for Secrets Manager (REDIS_AUTH_SECRET_FILE).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { REDIS_ROLES } from '../config/redis-roles.ts';
import {
  type Credentials,
  type RedisProcess,
  rawCommand,
  startRedis,
  type TlsFiles,
  untilClusterOk,
} from './redis-process.ts';

const run = promisify(execFile);
const CLI_BIN = process.env.REDIS_CLI_BIN ?? 'redis-cli';

export interface ProdShapeUsers {
  /** Everything: the setup, failovers and resharding in tests. */
  readonly admin: Credentials;
  /** What the replicas authenticate to their master as. */
  readonly replication: Credentials;
  /** The consumers (Lambda functions, the listener, the harvester). */
  readonly functions: Credentials;
  /** The admin CLI (npx ratelimit). */
  readonly operator: Credentials;
}

export interface ProdShapeCluster {
  /** Every node, masters and replicas. */
  readonly nodes: readonly RedisProcess[];
  readonly tls: TlsFiles;
  readonly users: ProdShapeUsers;
  /** `localhost:port,…` of the first three nodes (the masters at creation), as REDIS_CLUSTER_NODES. */
  readonly nodeList: string;
  /** The file standing in for the functions' Secrets Manager secret. */
  readonly functionsSecretFile: string;
  /** The file standing in for the operator's secret. */
  readonly operatorSecretFile: string;
  /** The layer's environment to reach it as `user` (default: the functions user). */
  env(user?: 'functions' | 'operator'): Record<string, string>;
  /** redis-cli as the administrator, over TLS: `cli('-p', port, 'CLUSTER', 'NODES')`, `cli('--cluster', 'reshard', …)`. */
  cli(...args: string[]): Promise<string>;
  stop(): Promise<void>;
}

const password = () => randomBytes(18).toString('base64url');

/** A CA, and a server certificate it signed that names only DNS:localhost (no IP). */
export async function certificates(dir: string): Promise<TlsFiles> {
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => run('openssl', args);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(
    'req',
    '-x509',
    ...ec,
    '-keyout',
    file('ca.key'),
    '-out',
    file('ca.crt'),
    '-days',
    '2',
    '-subj',
    '/CN=rate-limit local CA',
  );
  await openssl('req', ...ec, '-keyout', file('server.key'), '-out', file('server.csr'), '-subj', '/CN=localhost');
  writeFileSync(file('server.ext'), 'subjectAltName=DNS:localhost\n');
  await openssl(
    'x509',
    '-req',
    '-in',
    file('server.csr'),
    '-CA',
    file('ca.crt'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-out',
    file('server.crt'),
    '-days',
    '2',
    '-extfile',
    file('server.ext'),
  );
  return { ca: file('ca.crt'), cert: file('server.crt'), key: file('server.key') };
}

export function aclFile(users: ProdShapeUsers): string {
  const line = (user: Credentials, rules: readonly string[]) =>
    `user ${user.username} ${rules.join(' ')} >${user.password}`;
  return [
    'user default off resetchannels -@all',
    line(users.admin, ['on', '~*', '&*', '+@all']),
    line(users.replication, ['on', 'resetchannels', '-@all', '+psync', '+replconf', '+ping']),
    line(users.functions, REDIS_ROLES.functions.rules()),
    line(users.operator, REDIS_ROLES.operator.rules()),
    '',
  ].join('\n');
}

/** The production shape's users (fresh passwords; the deployed store's by the same names and rules) and their ACL file in `dir`. */
export function writeProdShapeUsers(dir: string): { users: ProdShapeUsers; acl: string } {
  const users: ProdShapeUsers = {
    admin: { username: 'rl-admin', password: password() },
    replication: { username: 'rl-replication', password: password() },
    functions: { username: REDIS_ROLES.functions.username, password: password() },
    operator: { username: REDIS_ROLES.operator.username, password: password() },
  };
  const acl = join(dir, 'users.acl');
  writeFileSync(acl, aclFile(users));
  return { users, acl };
}

/** Waits until every master has its replica online. */
async function untilReplicated(nodes: readonly RedisProcess[], masters: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    let online = 0;
    for (const node of nodes) {
      const info = await rawCommand(node.port, 'INFO replication', '127.0.0.1', node.access).catch(() => '');
      if (/role:master/.test(info) && /slave0:.*state=online/.test(info)) online++;
    }
    if (online >= masters) return;
    if (Date.now() > deadline)
      throw new Error('the replicas of the local production-shaped cluster did not come online');
    await delay(50); // polling replication, bounded by the deadline
  }
}

export async function startProdShapeCluster(
  options: { masters?: number; nodeTimeoutMs?: number } = {},
): Promise<ProdShapeCluster> {
  const masters = options.masters ?? 3;
  const dir = mkdtempSync(join(tmpdir(), 'rl-prod-shape-'));
  const tls = await certificates(dir);
  const { users, acl } = writeProdShapeUsers(dir);
  const nodes: RedisProcess[] = [];
  try {
    for (let i = 0; i < masters * 2; i++) {
      nodes.push(
        await startRedis({
          clusterNode: true,
          durable: true,
          tls,
          acl: { file: acl, admin: users.admin, replication: users.replication },
          announceHostname: 'localhost',
          clusterNodeTimeoutMs: options.nodeTimeoutMs ?? 1000,
        }),
      );
    }
  } catch (error) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw error;
  }
  const adminArgs = [
    '--tls',
    '--cacert',
    tls.ca,
    '--sni',
    'localhost',
    '--user',
    users.admin.username,
    '--pass',
    users.admin.password,
    '--no-auth-warning',
  ];
  const cli = async (...args: string[]) => (await run(CLI_BIN, [...adminArgs, '-h', '127.0.0.1', ...args])).stdout;
  await cli(
    '--cluster',
    'create',
    ...nodes.map((n) => `127.0.0.1:${n.port}`),
    '--cluster-replicas',
    '1',
    '--cluster-yes',
  );
  await untilClusterOk(nodes);
  await untilReplicated(nodes, masters);
  const secretFile = (name: string, user: Credentials) => {
    const path = join(dir, `${name}.secret.json`);
    writeFileSync(path, JSON.stringify(user));
    return path;
  };
  const functionsSecretFile = secretFile('functions', users.functions);
  const operatorSecretFile = secretFile('operator', users.operator);
  const nodeList = nodes
    .slice(0, masters)
    .map((n) => `localhost:${n.port}`)
    .join(',');
  return {
    nodes,
    tls,
    users,
    nodeList,
    functionsSecretFile,
    operatorSecretFile,
    env: (user = 'functions') => ({
      REDIS_URL: '',
      REDIS_CLUSTER_NODES: nodeList,
      REDIS_TLS: 'true',
      REDIS_TLS_CA_FILE: tls.ca,
      REDIS_AUTH_SECRET_FILE: user === 'functions' ? functionsSecretFile : operatorSecretFile,
    }),
    cli,
    async stop() {
      await Promise.all(nodes.map((n) => n.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
