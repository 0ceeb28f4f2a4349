/**
 * `npm start`: the platform locally. Without REDIS_URL it starts its own Redis
 * configured like production's "redis-durable" (append-only file, noeviction),
 * with its data under .local/redis, on a port it remembers there; then the
 * local gateway (scripts/gateway.ts) serves every route of functions/routes.ts
 * behind the outer line of config/outer-line.json.
 *
 *   PORT (default 3000: the gateway), REDIS_URL (an existing Redis), LOCAL_DATA_DIR (.local)
 *   RATE_LIMIT_PARAMETERS_FILE (default config/local-parameters.json): overrides
 *   and secrets with the names SSM has in production, re-read every 60 s
 *   EVENT_SINK_FILE (default .local/events.jsonl): where accepted webhook events go
 *   RATE_LIMIT_REFUSAL_LOG (default .local/refusals.jsonl): every refusal, for `npx ratelimit top`
 *   --bundles: serve the built Lambda bundles (npm run build, first) instead of the source
 *   --prod-shape (or RATE_LIMIT_PROD_SHAPE=1): instead of the single durable
 *   node, the production shape (scripts/redis-prod-shape.ts): a TLS-only Redis
 *   Cluster of 3 masters and 3 replicas, ACL users, the default user off; the
 *   handlers connect as the functions' user through the secret reader, and the
 *   operator's settings for `npx ratelimit` are printed. Its data is temporary.
 *
 * Next to the gateway, the two consumers that are not HTTP routes, each with
 * its local counterpart: the Mattermost listener on a local Mattermost
 * (scripts/mattermost-server.ts, MATTERMOST_PORT, default 8065), and a source
 * for the harvester (scripts/harvest-source.ts, HARVEST_SOURCE_PORT, default
 * 4100) with `--harvest`: two harvester workers crawling its site `demo`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { localDataDir, localPortSetting, localRedisPortFile, rememberedRedisPort } from '../config/local-data.ts';
import { signSlackBody } from '../functions/slack/signature.ts';
import { localStageEnvironment, plainRedisEnvironment } from './local-stage.ts';
import { freePort, isPortFree, type RedisProcess, startRedis } from './redis-process.ts';
import { type ProdShapeCluster, startProdShapeCluster } from './redis-prod-shape.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const dataDir = localDataDir();
const redisDir = join(dataDir, 'redis');

/**
 * The durable Redis's port: the one remembered in its data folder while it is
 * free, else a free one (remembered from then on). A port that is taken is
 * never used: whatever answers there is not this platform's durable Redis.
 */
async function redisPort(): Promise<number> {
  const remembered = rememberedRedisPort(dataDir) ?? 6390;
  const port = (await isPortFree(remembered)) ? remembered : await freePort();
  mkdirSync(redisDir, { recursive: true });
  writeFileSync(localRedisPortFile(dataDir), `${port}\n`);
  return port;
}

let redisProcess: RedisProcess | undefined;
let prodShape: ProdShapeCluster | undefined;
let redisUrl = process.env.REDIS_URL;
if (!redisUrl && (process.argv.includes('--prod-shape') || process.env.RATE_LIMIT_PROD_SHAPE === '1')) {
  try {
    prodShape = await startProdShapeCluster();
  } catch (error) {
    console.error(
      `cannot start the production-shaped Redis: ${error instanceof Error ? error.message : String(error)}`,
    );
    process.exit(1);
  }
  // The handlers connect as in AWS: cluster nodes, TLS, credentials from the secret (a file here).
  Object.assign(process.env, prodShape.env('functions'));
  const operator = Object.entries(prodShape.env('operator'))
    .filter(([name]) => name !== 'REDIS_URL')
    .map(([name, value]) => `${name}=${value}`)
    .join(' ');
  console.log(`redis (production shape): ${prodShape.nodeList} — TLS only, 3 masters + 3 replicas, ACL users, default user off
  the CLI as the operator: ${operator} npx ratelimit policies`);
} else if (!redisUrl) {
  try {
    redisProcess = await startRedis({
      port: await redisPort(),
      dir: redisDir,
      durable: true,
      maxmemoryBytes: 256 * 1024 * 1024,
    });
  } catch (error) {
    console.error(`cannot start the local Redis: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
  redisUrl = redisProcess.url;
  console.log(`redis-durable: ${redisUrl} (appendonly yes, noeviction, data in ${redisDir})`);
}
// The handlers read their settings from the environment, as in Lambda.
if (redisUrl) Object.assign(process.env, plainRedisEnvironment(redisUrl, { withoutAuth: false }));
// each one the caller's environment already sets is the caller's
const stage = localStageEnvironment({
  parametersFile: join(ROOT, 'config/local-parameters.json'),
  sinkFile: join(dataDir, 'events.jsonl'),
  refusalLog: join(dataDir, 'refusals.jsonl'),
});
for (const [name, value] of Object.entries(stage)) process.env[name] ||= value;

const { builtHandler, startGateway } = await import('./gateway.ts');
const { routes } = await import('../functions/routes.ts');
const bundles = process.argv.includes('--bundles');
if (bundles) {
  const { buildAll } = await import('./build.ts');
  await buildAll();
  console.log('serving the built bundles (dist/functions, the layer from dist/layer)');
}
const gateway = await startGateway({
  port: localPortSetting('PORT') ?? 3000,
  ...(bundles ? { handlerModule: builtHandler } : {}),
});

const { startMattermostServer } = await import('./mattermost-server.ts');
const { startHarvestSource } = await import('./harvest-source.ts');
const { MattermostListener } = await import('../functions/mattermost-listener/listener.ts');
const { platform } = await import('../functions/shared/platform.ts');
/** The port asked for, else the usual one while it is free, else any free one (the URLs are printed below). */
async function portFor(variable: string, usual: number): Promise<number> {
  const asked = localPortSetting(variable);
  if (asked !== undefined) return asked;
  return (await isPortFree(usual)) ? usual : freePort();
}
const mattermost = await startMattermostServer({ port: await portFor('MATTERMOST_PORT', 8065) });
const source = await startHarvestSource({ port: await portFor('HARVEST_SOURCE_PORT', 4100) });
const parts = platform();
await Promise.all([parts.ready, parts.policies.ready()]);
const listener = new MattermostListener({
  url: mattermost.url,
  token: parts.policies.secret('mattermost-bot-token') ?? mattermost.token,
  limiter: parts.limiter,
  once: parts.acceptedOnce,
  sink: parts.sink,
  logger: parts.logger,
  observer: parts.observer,
});
await listener.start();
let harvesting = Promise.resolve();
const stopHarvest = new AbortController();
if (process.argv.includes('--harvest')) {
  const { runHarvest } = await import('../functions/harvester/job.ts');
  const job = { source: source.url, site: 'demo', until: Number.POSITIVE_INFINITY, stop: stopHarvest.signal };
  harvesting = Promise.all([runHarvest(job), runHarvest(job)]).then(() => {});
}

// Registered before anything is printed: whoever reads the output may signal at once.
async function shutdown(): Promise<void> {
  stopHarvest.abort();
  await harvesting;
  await listener.stop();
  await Promise.all([mattermost.close(), source.close()]);
  await gateway.close();
  await redisProcess?.stop(true); // keep the data: it is durable
  await prodShape?.stop();
  process.exit(0);
}
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);

const slackBody = JSON.stringify({
  type: 'event_callback',
  team_id: 'T0DEMO',
  event_id: `Ev${Date.now()}`,
  event: { type: 'message', channel: 'C0DEMO', text: 'hello' },
});
const slackHeaders = signSlackBody('local-only-slack-signing-secret', slackBody);
const base = gateway.url;
console.log(`\nlistening on ${base}\n\nroutes (functions/routes.ts):`);
for (const route of routes) {
  const limits = route.limits.map((l) =>
    typeof l.policy === 'string' ? l.policy : `the key role's ${l.policy.byRole} policy`,
  );
  console.log(
    `  ${route.methods.join('|').padEnd(8)} ${route.path.padEnd(26)} ${[...limits, ...route.inHandler.flat()].join(', ')}`,
  );
}
console.log(`
try (events land in ${process.env.EVENT_SINK_FILE}):
  curl -i -X POST ${base}/auth/login -H 'content-type: application/json' -d '{"email":"alice@example.com","password":"correct horse battery staple"}'
  curl -i ${base}/v1/whoami -H 'x-api-key: rk_localDemoPartnerKeyNotASecret000'
  curl -i -X POST ${base}/webhooks/telegram/demo -H 'X-Telegram-Bot-Api-Secret-Token: local-only-telegram-secret-token' -d '{"update_id":${Date.now()},"message":{"chat":{"id":42}}}'
  curl -i -X POST ${base}/webhooks/slack -H 'X-Slack-Request-Timestamp: ${slackHeaders['X-Slack-Request-Timestamp']}' -H 'X-Slack-Signature: ${slackHeaders['X-Slack-Signature']}' -d '${slackBody}'
    (the Slack signature is valid for 5 minutes)
  curl -i -X POST ${mattermost.url}/api/v4/posts -H 'Authorization: Bearer ${mattermost.token}' -d '{"channel_id":"town","message":"hi"}'
    (the Mattermost listener reads it from the socket: mattermost-channel, 60 per minute per channel)
  harvester source: ${source.url}/sites/demo/pages/1 (capacity 10/s); npm start -- --harvest crawls it with 2 workers`);
