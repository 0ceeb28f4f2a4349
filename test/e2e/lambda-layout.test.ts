/**
 * The built artefacts as Lambda runs them: each function bundle alone in a
 * folder like /var/task, the layer only in a folder like /opt/nodejs/node_modules,
 * reached through NODE_PATH the way Lambda's runtime resolves ES module
 * imports (scripts/lambda-resolve.ts); the built layer reads no file once
 * its modules are loaded (the Lua and everything else are inlined); and it
 * ships ioredis with the V8 code caches the build made for it, used under the
 * local and Lambda's V8 flags, while a cold start without them (absent,
 * rejected) loads and answers all the same.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { lambdaV8Flags } from '../../config/lambda-runtime.ts';
import { buildAll } from '../../scripts/build.ts';
import { IOREDIS_VENDOR, LAYER_ENTRIES, LAYER_PACKAGE, LAYER_SHARED_MODULE } from '../../scripts/bundle.ts';
import { type LambdaLayout, lambdaNodeArgs, layOutLikeLambda } from '../../scripts/lambda-layout.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;
const CONFIG = new URL('../../config/', import.meta.url).pathname;

let dist: string;
let lambda: LambdaLayout;
before(async () => {
  dist = mkdtempSync(join(tmpdir(), 'rl-dist-'));
  lambda = layOutLikeLambda(await buildAll(dist));
});
after(() => {
  rmSync(dist, { recursive: true, force: true });
  rmSync(lambda.root, { recursive: true, force: true });
});

/** Runs `script` (an ES module) in a fresh Node whose only route to the layer is NODE_PATH. */
async function inLambda(
  script: string,
  options: { hooks?: boolean; env?: Record<string, string>; v8Flags?: readonly string[]; nodePath?: string } = {},
) {
  const args = [
    ...(options.v8Flags ?? []),
    ...(options.hooks === false ? [] : lambdaNodeArgs),
    '--input-type=module',
    '-e',
    script,
  ];
  const { stdout } = await run(process.execPath, args, {
    cwd: lambda.root,
    env: { PATH: process.env.PATH ?? '', NODE_PATH: options.nodePath ?? lambda.nodePath, ...options.env },
  });
  const lines = stdout.trim().split('\n');
  const result: Record<string, unknown> = JSON.parse(lines.at(-1) as string);
  result.logged = lines.slice(0, -1);
  return result;
}

/** A REST API (v1 proxy) event, as API Gateway sends it. */
function apiGatewayEvent(route: { method: string; path: string; resource: string }, body: unknown, ip: string) {
  return {
    resource: route.resource,
    path: route.path,
    httpMethod: route.method,
    headers: { 'content-type': 'application/json' },
    multiValueHeaders: { 'content-type': ['application/json'] },
    queryStringParameters: null,
    multiValueQueryStringParameters: null,
    pathParameters: null,
    stageVariables: null,
    body: JSON.stringify(body),
    isBase64Encoded: false,
    requestContext: { identity: { sourceIp: ip }, requestId: 'test', stage: 'prod' },
  };
}

describe('The built functions, laid out as in Lambda', () => {
  it('do not find the layer by Node ESM resolution alone: NODE_PATH is ignored by import', async () => {
    const handler = pathToFileURL(lambda.handlers.login as string).href;
    const result = await inLambda(
      `try { await import(${JSON.stringify(handler)}); console.log(JSON.stringify({ loaded: true })); }
       catch (e) { console.log(JSON.stringify({ loaded: false, code: e.code, message: e.message })); }`,
      { hooks: false },
    );
    assert.equal(result.loaded, false);
    assert.equal(result.code, 'ERR_MODULE_NOT_FOUND');
    assert.match(String(result.message), /@platform\/rate-limit/);
  });

  it('each load with the layer from the /opt folder, and login answers an API Gateway event from Redis', async () => {
    const event = apiGatewayEvent(
      { method: 'POST', path: '/auth/login', resource: '/auth/login' },
      { email: 'alice@example.com', password: 'correct horse battery staple' },
      '203.0.113.77',
    );
    const result = await inLambda(
      `const handlers = ${JSON.stringify(lambda.handlers)};
       const loaded = {};
       for (const [route, file] of Object.entries(handlers)) {
         const module = await import(new URL('file://' + file).href);
         loaded[route] = typeof module.handler;
       }
       const { handler } = await import(new URL('file://' + handlers.login).href);
       const response = await handler(${JSON.stringify(event)}, { awsRequestId: 'test', getRemainingTimeInMillis: () => 3000 });
       console.log(JSON.stringify({ loaded, status: response.statusCode, ratelimit: response.headers?.RateLimit ?? response.headers?.ratelimit }));
       process.exit(0);`,
      {
        env: {
          REDIS_URL: process.env.REDIS_URL as string,
          RATE_LIMIT_PARAMETER_PATH: '/ratelimit/local',
          RATE_LIMIT_PARAMETERS_FILE: join(CONFIG, 'local-parameters.json'),
          LOGIN_USERS_FILE: join(CONFIG, 'local-users.json'),
          API_KEYS_FILE: join(CONFIG, 'local-api-keys.json'),
          EVENT_SINK_FILE: join(lambda.root, 'events.jsonl'),
          POWERTOOLS_METRICS_DISABLED: 'true',
          POWERTOOLS_LOG_LEVEL: 'ERROR',
        },
      },
    );
    assert.deepEqual(
      result.loaded,
      Object.fromEntries(Object.keys(lambda.handlers).map((route) => [route, 'function'])),
      'every route has a handler',
    );
    assert.equal(result.status, 200);
    assert.match(String(result.ratelimit), /^"login-ip";r=19;t=\d+, "login-ip48";r=199;t=\d+$/);
  });

  it('the layer reads no file once loaded: Lua and defaults are inlined, no catalogue is read', async () => {
    const result = await inLambda(
      `import fs from 'node:fs';
       import { syncBuiltinESMExports } from 'node:module';
       const reads = [];
       const record = (name, original) => function (...args) { reads.push(name + ' ' + String(args[0])); return original.apply(this, args); };
       for (const name of ['readFileSync', 'readFile', 'openSync', 'open', 'createReadStream', 'readdirSync', 'existsSync', 'statSync'])
         fs[name] = record(name, fs[name]);
       for (const name of ['readFile', 'open', 'readdir'])
         fs.promises[name] = record('promises.' + name, fs.promises[name]);
       syncBuiltinESMExports();
       const { createLimiter, createRedisClient } = await import('@platform/rate-limit');
       const { createPolicyStore } = await import('@platform/rate-limit/config');
       const { rateLimitRefusal } = await import('@platform/rate-limit/middleware');
       const loading = reads.splice(0);
       const policies = createPolicyStore({
         defaults: { probe: { strategy: 'tokenBucket', capacity: 2, refill: { tokens: 1, every: '1 s' }, failureMode: 'closed', timeBudget: '2 s' } },
         source: { fetchAll: async () => ({}) },
         prefix: '/probe',
       });
       const redis = createRedisClient({ url: process.env.REDIS_URL });
       const limiter = createLimiter({ redis, policies });
       const key = 'layout-' + process.pid;
       const outcomes = [];
       for (let i = 0; i < 3; i++) outcomes.push((await limiter.check({ policy: 'probe', key })).outcome);
       redis.disconnect();
       console.log(JSON.stringify({ loading, reads, outcomes, refusal: typeof rateLimitRefusal }));`,
      { env: { REDIS_URL: process.env.REDIS_URL as string } },
    );
    assert.deepEqual(result.outcomes, ['allowed', 'allowed', 'limited'], 'the inlined scripts decide in Redis');
    assert.deepEqual(result.reads, [], 'no file read after loading');
    for (const read of result.loading as string[]) {
      assert.match(
        read,
        /\/opt\/nodejs\/node_modules\/@platform\/rate-limit\/(.+\.mjs|vendor\/ioredis\.cjs(\.[0-9a-f]{12})?(\.v8cache(\.json)?)?)$/,
        `only the layer's modules: ${read}`,
      );
    }
  });

  it("each entry exports its source's names and kinds from one shared module, and only ssm imports the SSM SDK", async () => {
    const entries = Object.keys(LAYER_ENTRIES) as (keyof typeof LAYER_ENTRIES)[];
    const result = await inLambda(
      `const entries = ${JSON.stringify(entries)};
       const modules = {};
       for (const name of entries) modules[name] = await import(name === 'index' ? '@platform/rate-limit' : '@platform/rate-limit/' + name);
       const kinds = Object.fromEntries(entries.map((name) => [name, Object.fromEntries(Object.keys(modules[name]).sort().map((key) => [key, typeof modules[name][key]]))]));
       const differing = [];
       for (const a of entries) for (const b of entries)
         for (const key of Object.keys(modules[a])) if (a < b && key in modules[b] && modules[a][key] !== modules[b][key]) differing.push(a + '/' + b + ':' + key);
       console.log(JSON.stringify({ kinds, differing }));`,
    );
    for (const name of entries) {
      const source = await import(pathToFileURL(join(ROOT, LAYER_ENTRIES[name])).href);
      const kinds = Object.fromEntries(
        Object.keys(source)
          .sort()
          .map((key) => [key, typeof source[key]]),
      );
      assert.deepEqual((result.kinds as Record<string, unknown>)[name], kinds, name);
    }
    assert.deepEqual(result.differing, [], 'a name exported by two entries is the same binding in both');
    const layer = join(lambda.root, 'opt/nodejs/node_modules', LAYER_PACKAGE);
    const modules = readdirSync(layer, { recursive: true })
      .map(String)
      .filter((f) => f.endsWith('.mjs'));
    assert.ok(modules.includes(LAYER_SHARED_MODULE), 'the shared module is there');
    // the entries, the shared module, the one chunk it shares with ssm, vendor/ioredis.mjs
    assert.equal(modules.length, entries.length + 3, `no module beyond those: ${modules.join(', ')}`);
    const sdk = modules.filter((f) => /from\s*["']@aws-sdk\/client-ssm["']/.test(readFileSync(join(layer, f), 'utf8')));
    assert.deepEqual(sdk, ['ssm.mjs'], 'the SSM SDK stays out of every module but ssm (loaded at first use)');
  });

  it("ships ioredis with the code caches the build's Node made, one for the local flags and one for Lambda's, each used", async () => {
    const vendor = join(lambda.root, 'opt', 'nodejs', 'node_modules', LAYER_PACKAGE, 'vendor');
    const files = readdirSync(vendor).sort();
    assert.deepEqual(
      files.filter((f) => f.endsWith('.v8cache')).length,
      2,
      `a cache for no V8 flags and for Lambda's: ${files.join(', ')}`,
    );
    for (const stamp of files.filter((f) => f.endsWith('.v8cache.json'))) {
      const { node } = JSON.parse(readFileSync(join(vendor, stamp), 'utf8')) as { node: string };
      assert.equal(node, process.version, 'made by the Node that built the layer');
    }
    // The vendor module is the package's private import (#ioredis): the probe imports its file.
    const probe = `const { codeCache, Redis, Cluster } = await import(${JSON.stringify(pathToFileURL(join(dirname(vendor), IOREDIS_VENDOR.module)).href)});
       console.log(JSON.stringify({ codeCache, client: typeof Redis, cluster: typeof Cluster }));`;
    for (const v8Flags of [[], lambdaV8Flags()]) {
      const result = await inLambda(probe, { v8Flags });
      assert.deepEqual(
        { codeCache: result.codeCache, client: result.client, cluster: result.cluster },
        { codeCache: 'accepted', client: 'function', cluster: 'function' },
        `under ${v8Flags.join(' ') || 'no V8 flags'}`,
      );
    }
  });

  it('loads and answers from Redis when the cache is absent or V8 rejects it, and says so once in Lambda', async () => {
    const root = mkdtempSync(join(tmpdir(), 'rl-opt-'));
    try {
      const modules = join(root, 'nodejs', 'node_modules');
      cpSync(join(lambda.root, 'opt', 'nodejs', 'node_modules'), modules, { recursive: true });
      const vendor = join(modules, LAYER_PACKAGE, 'vendor');
      const nodePath = [modules, ...lambda.nodePath.split(':').slice(1)].join(':');
      const check = `const { codeCache } = await import(${JSON.stringify(pathToFileURL(join(vendor, 'ioredis.mjs')).href)});
         const { createLimiter, createRedisClient } = await import('@platform/rate-limit');
         const { createPolicyStore } = await import('@platform/rate-limit/config');
         const policies = createPolicyStore({
           defaults: { probe: { strategy: 'tokenBucket', capacity: 1, refill: { tokens: 1, every: '1 h' }, failureMode: 'closed', timeBudget: '2 s' } },
           source: { fetchAll: async () => ({}) },
           prefix: '/probe',
         });
         const redis = createRedisClient({ url: process.env.REDIS_URL });
         const limiter = createLimiter({ redis, policies });
         const key = 'no-cache-' + process.pid + '-' + Math.random();
         const outcomes = [(await limiter.check({ policy: 'probe', key })).outcome, (await limiter.check({ policy: 'probe', key })).outcome];
         redis.disconnect();
         console.log(JSON.stringify({ codeCache, outcomes }));`;
      const env = { REDIS_URL: process.env.REDIS_URL as string, AWS_LAMBDA_FUNCTION_NAME: 'probe' };
      // Rejected: the bytes are not a cache V8 made (as another V8 build's would be refused), stamped as if
      // they were (a damaged cache under its own stamp is not even read: test/unit/code-cache.test.ts)
      for (const cache of readdirSync(vendor).filter((f) => f.endsWith('.v8cache'))) {
        const bytes = Buffer.alloc(readFileSync(join(vendor, cache)).length, 1);
        writeFileSync(join(vendor, cache), bytes);
        const stamp = JSON.parse(readFileSync(join(vendor, `${cache}.json`), 'utf8')) as Record<string, unknown>;
        const cacheSha256 = createHash('sha256').update(bytes).digest('hex');
        writeFileSync(join(vendor, `${cache}.json`), JSON.stringify({ ...stamp, cacheSha256 }));
      }
      const rejected = await inLambda(check, { env, nodePath, v8Flags: lambdaV8Flags() });
      assert.deepEqual(
        { codeCache: rejected.codeCache, outcomes: rejected.outcomes },
        {
          codeCache: 'rejected',
          outcomes: ['allowed', 'limited'],
        },
      );
      assert.deepEqual(
        (rejected.logged as string[])
          .filter((l) => l.includes('code cache was not used'))
          .map((l) => JSON.parse(l).level),
        ['WARN'],
        'said once, in the init log',
      );
      // Absent: no cache at all (a layer built without, or other V8 flags than any the build made one for).
      for (const file of readdirSync(vendor).filter((f) => /\.v8cache(\.json)?$/.test(f))) rmSync(join(vendor, file));
      const absent = await inLambda(check, { env, nodePath });
      assert.deepEqual(
        { codeCache: absent.codeCache, outcomes: absent.outcomes },
        {
          codeCache: 'absent',
          outcomes: ['allowed', 'limited'],
        },
      );
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('The client the layer ships, in the production shape', () => {
  it('passes the production-shape tests (TLS with host names, ACL users, replicas, rotation) with @platform/rate-limit resolved to this build', {
    timeout: 240_000,
  }, async () => {
    // a run of its own, not a child of this one (NODE_TEST_CONTEXT would make it report to this runner)
    const { NODE_TEST_CONTEXT: _child, ...inherited } = process.env;
    const testRunEnv = { ...inherited, RATE_LIMIT_BUILT_LAYER: dist };
    const resolved = await run(
      process.execPath,
      [
        '--import',
        './test/support/built-layer.ts',
        '--input-type=module',
        '-e',
        "console.log(import.meta.resolve('@platform/rate-limit'))",
      ],
      { cwd: ROOT, env: { ...process.env, RATE_LIMIT_BUILT_LAYER: dist } },
    );
    assert.ok(resolved.stdout.trim().startsWith(pathToFileURL(dist).href), resolved.stdout);
    // the same test file as against the source, its own global setup (a TLS cluster of its own), the layer from this build
    const { stdout } = await run(
      process.execPath,
      [
        '--import',
        './test/support/built-layer.ts',
        '--test',
        '--test-global-setup=test/support/global-setup.ts',
        '--test-timeout=200000',
        '--test-force-exit',
        '--test-reporter=spec',
        'test/integration/production-shape.test.ts',
      ],
      { cwd: ROOT, env: testRunEnv, maxBuffer: 16 * 1024 * 1024 },
    ).catch((error: { stdout?: string }) =>
      assert.fail(`the production-shape tests failed on the built layer:\n${error.stdout ?? error}`),
    );
    assert.match(stdout, /^ℹ fail 0$/m);
    const passed = Number(/^ℹ pass (\d+)$/m.exec(stdout)?.[1]);
    assert.ok(passed >= 5, `only ${passed} production-shape tests ran`);
  });
});
