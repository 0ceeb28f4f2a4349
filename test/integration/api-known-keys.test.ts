/**
 * The API key check when a caller's IP is over its guessing window
 * (`api-unknown-key-ip`): the API handler in this process, real Redis (the
 * cluster, as the functions' ACL user over TLS), the SSM registry with
 * aws-sdk-client-mock counting its GetParameter calls, each "container" a
 * fresh SsmKeyRegistry (nothing cached).
 *
 * What it shows (docs/consumers.md, "API keys"):
 * - a neighbour guessing keys from the victim's address does not lock the
 *   victim out on a container that has not cached the key: another
 *   container found it, and its marker (`ak:<hash>`) lets it be looked up;
 * - a random key from that address is still refused without a registry read;
 * - a revoked key's marker lets one lookup happen, which is counted as a
 *   guess and removes the marker;
 * - when Redis cannot answer the marker's read (stalled, or an ACL without
 *   the family), the answer is the one before the markers, 429, never a 500,
 *   and a found key is still served when the marker cannot be written.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { Logger } from '@aws-lambda-powertools/logger';
import { GetParameterCommand, ParameterNotFound, SSMClient } from '@aws-sdk/client-ssm';
import { createLimiter, createRedisClient, type Limiter, type RedisClient } from '@platform/rate-limit';
import { PolicyStore } from '@platform/rate-limit/config';
import { useRedisCredentials } from '@platform/rate-limit/redis';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { hashApiKey, newApiKey } from '../../config/api-key.ts';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { functionsAclRules, KEY_FAMILIES } from '../../config/redis-roles.ts';
import { useRegistry } from '../../functions/api/auth.ts';
import { KNOWN_KEY_TTL_MS } from '../../functions/api/known-keys.ts';
import { SsmKeyRegistry } from '../../functions/api/registry.ts';
import { createPlatform, type Platform, usePlatform } from '../../functions/shared/platform.ts';
import { type RedisProcess, startRedis } from '../../scripts/redis-process.ts';
import { restEvent } from '../support/events.ts';
import { connected, targets } from '../support/targets.ts';

const PREFIX = '/ratelimit/test-api-known';
const PEPPER = 'test-api-key-pepper';
const REGISTRY = '/platform/test/api-keys';
const WINDOW = (PLATFORM_POLICIES['api-unknown-key-ip'] as { limit: number }).limit;

const target = targets.find((t) => t.name === 'cluster') ?? (targets[0] as (typeof targets)[number]);
const redis = target.client();
const admin = target.admin();
const ssm = mockClient(SSMClient);
let policies: PolicyStore;
let limiter: Limiter;
let base: Platform;
type Handler = (event: unknown, context: unknown) => Promise<APIGatewayProxyResult>;
let handler: Handler;

/** The registry's entries, by key hash: what the mocked SSM answers. */
const entries = new Map<string, { owner: string; role: string }>();

before(async () => {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  process.env.POWERTOOLS_LOG_LEVEL = 'ERROR';
  // the shipped policies with a 2 s budget (as test/support/consumers.ts): a check on a loaded
  // 2-core machine may take longer than production's 100 ms, and a timed-out peek fails open
  const generous = Object.fromEntries(
    Object.entries(PLATFORM_POLICIES).map(([name, policy]) => [name, { ...(policy as object), timeBudget: '2 s' }]),
  );
  policies = new PolicyStore({
    prefix: PREFIX,
    defaults: generous,
    source: { fetchAll: async () => ({ [`${PREFIX}/secrets/api/api-key-pepper`]: PEPPER }) },
  });
  await policies.refresh();
  limiter = createLimiter({ redis, policies });
  await Promise.all([connected(redis), connected(admin)]);
  // made before the handler is imported: its route takes the platform's limiter when it is built
  base = createPlatform({ redis, policies, limiter, logger: silentLogger() });
  usePlatform(base);
  handler = (await import('../../functions/api/handler.ts')).handler as unknown as Handler;
});
after(() => {
  usePlatform(undefined);
  ssm.restore();
  redis.disconnect();
  admin.disconnect();
});

beforeEach(() => {
  ssm.reset();
  ssm.on(GetParameterCommand).callsFake(({ Name }: { Name: string }) => {
    const entry = entries.get(Name.slice(REGISTRY.length + 1));
    if (!entry) throw new ParameterNotFound({ message: 'not found', $metadata: {} });
    return { Parameter: { Value: JSON.stringify(entry) } };
  });
  usePlatform(base); // the markers on the functions' user's client
});

function silentLogger(): Logger {
  return new Logger({ serviceName: 'test', logLevel: 'SILENT' });
}

/** A fresh container: its registry has looked nothing up. */
function newContainer(): void {
  useRegistry(new SsmKeyRegistry(REGISTRY, { client: new SSMClient({}) }));
}

let ips = 0;
/** An address no other test used (each test's guessing window is its own). */
function freshIp(): string {
  ips++;
  return `10.${(process.pid >> 8) & 255}.${process.pid & 255}.${ips}`; // this process's own: other files share the cluster
}

/** A key in the registry (a new standard caller). */
function registered(owner = 'acme'): { key: string; hash: string } {
  const key = newApiKey();
  const hash = hashApiKey(key, PEPPER);
  entries.set(hash, { owner, role: 'standard' });
  return { key, hash };
}

function reads(): number {
  return ssm.commandCalls(GetParameterCommand).length;
}

async function whoami(from: string, apiKey: string): Promise<{ status: number; policy?: string; body: string }> {
  const response = await handler(
    {
      ...restEvent({ ip: from, headers: { 'x-api-key': apiKey } }),
      httpMethod: 'GET',
      path: '/v1/whoami',
      pathParameters: { proxy: 'whoami' },
    },
    {},
  );
  const body = JSON.parse(response.body) as { policy?: string };
  return { status: response.statusCode, ...(body.policy ? { policy: body.policy } : {}), body: response.body };
}

/** A neighbour at `from` guesses until its window is over: 401 each, then 429. */
async function guessUntilOver(from: string): Promise<void> {
  const statuses = [];
  for (let i = 0; i <= WINDOW; i++) statuses.push((await whoami(from, newApiKey())).status);
  assert.deepEqual(statuses, [...Array(WINDOW).fill(401), 429], 'the neighbour is over its guessing window');
}

describe('The API key check, an IP over its guessing window', () => {
  it('serves a key another container found, on a container that has not cached it (no lockout by a neighbour)', async () => {
    const office = freshIp();
    const victim = registered();
    newContainer();
    assert.equal((await whoami(office, victim.key)).status, 200, 'found on container A');
    const ttl = await admin.pttl(`${KEY_FAMILIES.knownKeys}${victim.hash}`);
    assert.ok(ttl > KNOWN_KEY_TTL_MS - 60_000 && ttl <= KNOWN_KEY_TTL_MS, `its marker, for a week (pttl ${ttl})`);
    newContainer(); // container B: a scale-out, a cold start
    await guessUntilOver(office);
    const before = reads();
    const answer = await whoami(office, victim.key);
    assert.equal(answer.status, 200, answer.body);
    assert.deepEqual(JSON.parse(answer.body), { owner: 'acme', role: 'standard' });
    assert.equal(reads() - before, 1, 'looked up once');
    assert.equal((await whoami(office, victim.key)).status, 200, 'and then from memory');
    assert.equal(reads() - before, 1);
  });

  it('refuses a random key from that IP with 429 and no registry read, however many', async () => {
    const office = freshIp();
    newContainer();
    await guessUntilOver(office);
    const before = reads();
    for (let i = 0; i < 20; i++) {
      const answer = await whoami(office, newApiKey());
      assert.equal(answer.status, 429);
      assert.equal(answer.policy, 'api-unknown-key-ip');
    }
    assert.equal(reads() - before, 0, 'no key without a marker reached the registry');
  });

  it('refuses a key no container found yet, as before (the markers are the registry reads that found it)', async () => {
    const office = freshIp();
    const unseen = registered();
    newContainer();
    await guessUntilOver(office);
    const before = reads();
    assert.equal((await whoami(office, unseen.key)).status, 429);
    assert.equal(reads() - before, 0);
  });

  it("counts a revoked key's lookup as a guess and removes its marker: one registry read, then none", async () => {
    const office = freshIp();
    const revoked = registered();
    newContainer();
    assert.equal((await whoami(office, revoked.key)).status, 200);
    entries.delete(revoked.hash); // revoked in the registry; its marker is still there
    newContainer();
    await guessUntilOver(office);
    const before = reads();
    const answer = await whoami(office, revoked.key);
    assert.equal(answer.status, 429, answer.body);
    assert.equal(answer.policy, 'api-unknown-key-ip', 'not found, so a guess: the IP is over its window');
    assert.equal(reads() - before, 1, 'its marker let one lookup happen');
    assert.equal(await redis.get(`${KEY_FAMILIES.knownKeys}${revoked.hash}`), null, 'and that lookup removed it');
    newContainer();
    assert.equal((await whoami(office, revoked.key)).status, 429);
    assert.equal(reads() - before, 1, 'no marker: refused before the registry');
  });

  it('writes no marker for a key the registry does not have (a guess makes none)', async () => {
    const office = freshIp();
    newContainer();
    const key = newApiKey();
    assert.equal((await whoami(office, key)).status, 401);
    assert.equal(await redis.get(`${KEY_FAMILIES.knownKeys}${hashApiKey(key, PEPPER)}`), null);
  });
});

describe('The API key check when Redis cannot answer the marker', () => {
  let server: RedisProcess;
  let other: RedisClient | undefined;
  before(async () => {
    server = await startRedis();
  });
  after(async () => {
    other?.disconnect();
    await server.stop();
  });

  it('refuses with 429 as before the markers when the marker read stalls (bounded by the budget), and still serves found keys', async (t) => {
    const office = freshIp();
    const victim = registered();
    newContainer();
    assert.equal((await whoami(office, victim.key)).status, 200, 'its marker, on the healthy store');
    // the marker's node stalls, the IP window's answers (another slot, another node)
    const stalled = createRedisClient({ url: server.url });
    other = stalled;
    await connected(stalled);
    const logger = silentLogger();
    const warnings = t.mock.method(logger, 'warn');
    usePlatform(createPlatform({ redis: stalled, policies, limiter, logger }));
    newContainer();
    await guessUntilOver(office);
    server.pause();
    try {
      const before = reads();
      const answer = await whoami(office, victim.key);
      assert.equal(answer.status, 429, answer.body);
      assert.equal(answer.policy, 'api-unknown-key-ip');
      assert.equal(reads() - before, 0, 'no registry read on a marker Redis could not confirm');
      const read = warnings.mock.calls.map((c) => c.arguments).find(([m]) => /could not be read/.test(String(m)));
      assert.deepEqual(read?.[1], { reason: 'timeout' });
      assert.doesNotMatch(
        JSON.stringify(warnings.mock.calls.map((c) => c.arguments)),
        new RegExp(`${office}|${victim.hash}`),
      );
      // from an IP under its window the key is found, and served though its marker cannot be written
      const elsewhere = await whoami(freshIp(), victim.key);
      assert.equal(elsewhere.status, 200, elsewhere.body);
      assert.ok(warnings.mock.calls.some((c) => /could not be written/.test(String(c.arguments[0]))));
    } finally {
      server.resume();
    }
  });

  it('refuses with 429, not a 500, when the ACL refuses the family (code deployed before its user)', async (t) => {
    // the functions' user as it was before the `ak:` family: every other rule the same
    const rules = functionsAclRules().filter((rule) => rule !== `~${KEY_FAMILIES.knownKeys}*`);
    assert.equal(rules.length, functionsAclRules().length - 1);
    const setup = createRedisClient({ url: server.url });
    await connected(setup);
    await setup.call('ACL', 'SETUSER', 'old-functions', 'reset', '>old-password', ...rules);
    setup.disconnect();
    const old = createRedisClient({ url: server.url });
    useRedisCredentials(old, { username: 'old-functions', password: 'old-password' });
    other?.disconnect();
    other = old;
    await connected(old);
    const logger = silentLogger();
    const warnings = t.mock.method(logger, 'warn');
    usePlatform(createPlatform({ redis: old, policies, limiter: createLimiter({ redis: old, policies }), logger }));
    const office = freshIp();
    const victim = registered();
    newContainer();
    const found = await whoami(office, victim.key);
    assert.equal(found.status, 200, `a found key is served: ${found.body}`);
    newContainer();
    await guessUntilOver(office);
    const before = reads();
    const answer = await whoami(office, victim.key);
    assert.equal(answer.status, 429, answer.body);
    assert.equal(reads() - before, 0);
    const reasons = warnings.mock.calls.map((c) => (c.arguments[1] as { reason?: string } | undefined)?.reason);
    assert.deepEqual([...new Set(reasons)], ['redis-error'], 'NOPERM: an error Redis answered');
  });
});
