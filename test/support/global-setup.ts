/**
 * Starts the Redis servers the whole suite shares, unless REDIS_URL /
 * REDIS_CLUSTER_NODES point at external ones:
 * - a plain single node (REDIS_URL), for the tests that stop, pause or fill
 *   their own server and for the single-node half of every integration test;
 * - the production shape (scripts/redis-prod-shape.ts): a TLS-only Redis
 *   Cluster of 3 masters with a replica each, ACL users and the default user
 *   off. Its layer settings go into the environment (REDIS_CLUSTER_NODES,
 *   REDIS_TLS, REDIS_TLS_CA_FILE, REDIS_AUTH_SECRET_FILE as the functions'
 *   user), so every consumer a test starts connects as in AWS;
 *   REDIS_ADMIN_SECRET_FILE and REDIS_OPERATOR_SECRET_FILE name the other
 *   users' secrets for tests that inspect or operate.
 * Test files read these variables (see ./targets.ts).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type RedisProcess, startRedis } from '../../scripts/redis-process.ts';
import { type ProdShapeCluster, startProdShapeCluster } from '../../scripts/redis-prod-shape.ts';

let single: RedisProcess | undefined;
let cluster: ProdShapeCluster | undefined;

export async function globalSetup(): Promise<void> {
  const [started, prodShape] = await Promise.all([
    process.env.REDIS_URL ? undefined : startRedis(),
    process.env.REDIS_CLUSTER_NODES ? undefined : startProdShapeCluster(),
  ]);
  if (started) {
    single = started;
    process.env.REDIS_URL = started.url;
  }
  if (prodShape) {
    cluster = prodShape;
    const adminSecretFile = join(prodShape.tls.ca, '..', 'admin.secret.json');
    writeFileSync(adminSecretFile, JSON.stringify(prodShape.users.admin));
    Object.assign(process.env, prodShape.env('functions'), {
      REDIS_URL: process.env.REDIS_URL,
      REDIS_ADMIN_SECRET_FILE: adminSecretFile,
      REDIS_OPERATOR_SECRET_FILE: prodShape.operatorSecretFile,
    });
  }
}

export async function globalTeardown(): Promise<void> {
  await Promise.all([single?.stop(), cluster?.stop()]);
}
