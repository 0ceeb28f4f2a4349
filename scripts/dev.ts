/**
 * `npm start`: the platform locally. Without REDIS_URL it starts its own Redis
 * configured like production's "redis-durable" (append-only file, noeviction),
 * with its data under .local/redis, then serves checks over HTTP and shows a
 * few live ones.
 *
 *   PORT (default 3000), REDIS_URL (an existing Redis), LOCAL_DATA_DIR (.local)
 *   RATE_LIMIT_PARAMETERS_FILE (default config/local-parameters.json): overrides
 *   and secrets with the names SSM has in production, re-read every 60 s
 *   GET /check?policy=login-ip&key=203.0.113.9[&cost=1]   one check, JSON decision
 *   GET /policies?key=demo-premium                         the policies in force for a key
 */
import { createServer } from 'node:http';
import { join } from 'node:path';
import { createPolicyStore, FileParameterSource, PLATFORM_DEFAULTS } from '../layer/src/config/index.ts';
import { createLimiter, createRedisClient, InvalidCheckError, RateLimitError } from '../layer/src/index.ts';
import { type RedisProcess, startRedis } from './redis-process.ts';

const dataDir = process.env.LOCAL_DATA_DIR ?? join(process.cwd(), '.local');
const parametersFile =
  process.env.RATE_LIMIT_PARAMETERS_FILE ?? new URL('../config/local-parameters.json', import.meta.url).pathname;
const policies = createPolicyStore({ prefix: '/ratelimit/local', source: new FileParameterSource(parametersFile) });
await policies.ready();

let redisProcess: RedisProcess | undefined;
let url = process.env.REDIS_URL;
if (!url) {
  redisProcess = await startRedis({
    port: Number(process.env.REDIS_PORT ?? 6390),
    dir: join(dataDir, 'redis'),
    durable: true,
    maxmemoryBytes: 256 * 1024 * 1024,
  });
  url = redisProcess.url;
  console.log(`redis-durable: ${url} (appendonly yes, noeviction, data in ${join(dataDir, 'redis')})`);
}
const redis = createRedisClient({ url });
const limiter = createLimiter({ redis, policies });

console.log('\nlive checks: login-ip, 20 per 15 min, exact sliding window (a fresh demo key each run)');
for (let i = 1; i <= 22; i++) {
  const d = await limiter.check({ policy: 'login-ip', key: `demo-${process.pid}` });
  const detail =
    d.outcome === 'degraded' ? d.reason : `remaining ${d.binding.remaining}, retry after ${d.retryAfterMs} ms`;
  if (i <= 2 || i >= 20) console.log(`  #${String(i).padStart(2)} ${d.outcome.padEnd(8)} ${detail}`);
  else if (i === 3) console.log('  …');
}

const server = createServer(async (request, response) => {
  const reply = (status: number, body: unknown) => {
    response.writeHead(status, { 'content-type': 'application/json' });
    response.end(`${JSON.stringify(body, null, 2)}\n`);
  };
  const requestUrl = new URL(request.url ?? '/', 'http://localhost');
  try {
    if (requestUrl.pathname === '/policies') {
      const key = requestUrl.searchParams.get('key') ?? 'any';
      const inForce = Object.keys(PLATFORM_DEFAULTS).map((name) => policies.resolve(name, key)?.config);
      return reply(200, { key, policies: inForce });
    }
    if (requestUrl.pathname !== '/check') return reply(404, { error: 'not_found', routes: ['/check', '/policies'] });
    const cost = requestUrl.searchParams.get('cost');
    const decision = await limiter.check({
      policy: requestUrl.searchParams.get('policy') ?? '',
      key: requestUrl.searchParams.get('key') ?? '',
      ...(cost === null ? {} : { cost: Number(cost) }),
    });
    return reply(decision.allowed ? 200 : decision.outcome === 'limited' ? 429 : 503, decision);
  } catch (error) {
    if (error instanceof InvalidCheckError || error instanceof RateLimitError) {
      return reply(400, { error: 'invalid_check', reason: error.message });
    }
    console.error('check failed', error instanceof Error ? error.message : error);
    return reply(500, { error: 'internal' });
  }
});

server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  console.log(`\nlistening on http://127.0.0.1:${port}`);
  console.log(`  curl 'http://127.0.0.1:${port}/check?policy=api-key&key=demo'`);
});

async function shutdown(): Promise<void> {
  server.close();
  redis.disconnect();
  await redisProcess?.stop(true); // keep the data: it is durable
  process.exit(0);
}
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
