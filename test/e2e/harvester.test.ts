/**
 * The harvester against a real source (scripts/harvest-source.ts) with
 * separate worker processes sharing one adaptive bucket per site in Redis.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { HARVESTER_POLICY } from '../../functions/workers.ts';
import { type HarvestSource, startHarvestSource } from '../../scripts/harvest-source.ts';
import { type RedisProcess, startRedis } from '../../scripts/redis-process.ts';
import { runWorkers } from '../support/harvester.ts';

/** Requests the source saw in each window of `windowMs` sliding by 100 ms, the largest. */
function busiestWindow(log: readonly (readonly [number, 0 | 1])[], windowMs: number): number {
  let most = 0;
  for (const [start] of log) {
    most = Math.max(most, log.filter(([t]) => t >= start && t < start + windowMs).length);
  }
  return most;
}

let source: HarvestSource;
before(async () => {
  source = await startHarvestSource({
    capacity: { roomy: 1000, paused: 1000, quiet: 1000, 'lambda-a': 100, 'lambda-b': 100 },
  });
});
after(() => source.close());

describe('The harvester', () => {
  it('keeps 4 worker processes within the shared rate plus the burst', async () => {
    // max 8/s and a burst of 4 (override); the source itself never refuses here
    const overrides = {
      'harvester-source': { capacity: 4, refill: { tokens: 8, every: '1 s' }, adaptive: { min: 1, max: 8 } },
    };
    const site = `roomy`;
    const reports = await runWorkers({
      count: 4,
      source: source.url,
      site,
      seconds: 4,
      redisUrl: process.env.REDIS_URL as string,
      overrides,
    });
    const { log, refused } = source.stats(site);
    assert.equal(refused, 0);
    assert.ok(busiestWindow(log, 1000) <= 8 + 4, `at most rate + burst in any second: ${busiestWindow(log, 1000)}`);
    assert.ok(log.length <= 8 * 4 + 4 + 8, `at most rate × time + burst overall: ${log.length}`);
    assert.ok(log.length >= 8 * 2, `and it does harvest: ${log.length}`);
    assert.equal(
      reports.reduce((n, r) => n + r.pages, 0),
      log.length,
      'every page served was handed on',
    );
    assert.ok(
      reports.every((r) => r.stats.waits > 0),
      'each worker waited its turn',
    );
  });

  it("pauses every worker of a site for the source's Retry-After: 5, and no other site", async () => {
    const overrides = {
      'harvester-source': { capacity: 2, refill: { tokens: 6, every: '1 s' }, adaptive: { min: 1, max: 6 } },
    };
    const redisUrl = process.env.REDIS_URL as string;
    source.throttleNext('paused', 429, '5');
    // A turn whose wait outlasts the run ends it ('over'): the runs are long (30 s), and end once the paused
    // site has resumed, however late (a loaded machine) the processes got to their first request.
    const resumed = new AbortController();
    const runs = Promise.all([
      runWorkers({
        count: 3,
        source: source.url,
        site: 'paused',
        seconds: 30,
        redisUrl,
        overrides,
        stop: resumed.signal,
      }),
      runWorkers({
        count: 1,
        source: source.url,
        site: 'quiet',
        seconds: 30,
        redisUrl,
        overrides,
        stop: resumed.signal,
      }),
    ]).finally(() => resumed.abort());
    const throttleOver = () => {
      const seen = source.stats('paused').log;
      const at = seen.find(([, ok]) => ok === 0)?.[0];
      return at !== undefined && seen.some(([t]) => t >= at + 5000);
    };
    while (!resumed.signal.aborted && !throttleOver()) await new Promise((resolve) => setTimeout(resolve, 50));
    resumed.abort();
    const [paused, quiet] = await runs;
    const log = source.stats('paused').log;
    const throttledAt = (log.find(([, ok]) => ok === 0) as [number, 0 | 1])[0];
    // Requests already in flight land within a moment; then nothing until the 5 s are over.
    const during = log.filter(([t]) => t > throttledAt + 300 && t < throttledAt + 4900);
    assert.deepEqual(during, [], 'no request to the paused site during its Retry-After');
    assert.ok(
      log.some(([t]) => t >= throttledAt + 5000),
      'it resumes after the pause',
    );
    const quietDuring = source.stats('quiet').log.filter(([t]) => t > throttledAt + 300 && t < throttledAt + 4900);
    assert.ok(quietDuring.length >= 10, `the other site goes on: ${quietDuring.length}`);
    assert.equal(
      paused.reduce((n, r) => n + r.stats.decreases, 0),
      1,
      'one throttle, one decrease',
    );
    assert.equal(quiet[0]?.stats.decreases, 0);
  });
});

describe('The harvester Lambda handler (EventBridge schedule)', () => {
  it('crawls every site until shortly before its timeout, then reports by site', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-harvest-handler-'));
    Object.assign(process.env, {
      REDIS_URL: process.env.REDIS_URL,
      REDIS_CLUSTER_NODES: '',
      REDIS_AUTH_SECRET_FILE: '', // a plain single node: no user
      RATE_LIMIT_PARAMETERS_FILE: new URL('../../config/local-parameters.json', import.meta.url).pathname,
      EVENT_SINK_FILE: join(dir, 'events.jsonl'),
      HARVESTER_SOURCE_URL: source.url,
      HARVESTER_SITES: 'lambda-a,lambda-b',
      POWERTOOLS_LOG_LEVEL: 'ERROR',
      POWERTOOLS_METRICS_DISABLED: 'true',
    });
    const { handler, STOP_BEFORE_TIMEOUT_MS } = await import('../../functions/harvester/handler.ts');
    const { closePlatform } = await import('../../functions/shared/platform.ts');
    const started = Date.now();
    const report = await handler({}, { getRemainingTimeInMillis: () => STOP_BEFORE_TIMEOUT_MS + 1500 });
    closePlatform();
    const took = Date.now() - started;
    // It may end up to one token's wait early (at most 1 s / the policy's 2 per second): no turn
    // could come before its end, and a Lambda idle until then is billed for nothing.
    const turnMs = 1000 / (PLATFORM_POLICIES[HARVESTER_POLICY] as { refill: { tokens: number } }).refill.tokens;
    assert.ok(took >= 1500 - turnMs && took < 4000, `stopped on time: ${took} ms`);
    for (const site of ['lambda-a', 'lambda-b']) {
      const pages = (report as Record<string, { pages: number }>)[site]?.pages ?? 0;
      assert.ok(pages > 0, `${site}: ${pages} pages`);
      assert.equal(source.stats(site).served, pages);
    }
    const events = readFileSync(join(dir, 'events.jsonl'), 'utf8').trim().split('\n');
    assert.equal(events.length, source.stats('lambda-a').served + source.stats('lambda-b').served);
  });
});

describe('The harvester with Redis stopped', () => {
  let redis: RedisProcess;
  before(async () => {
    redis = await startRedis();
  });
  after(() => redis.stop());

  it('goes on at the local pace, counted', async () => {
    const site = 'fail-open';
    source.setCapacity(site, 1000);
    const running = runWorkers({ count: 2, source: source.url, site, seconds: 5, redisUrl: redis.url });
    // Stop Redis once the workers have fetched through it.
    while (source.stats(site).served < 3) await new Promise((resolve) => setImmediate(resolve));
    const stoppedAt = source.stats(site).log.at(-1)?.[0] as number;
    await redis.stop(true);
    const reports = await running;
    redis = await redis.restart();
    const afterStop = source.stats(site).log.filter(([t]) => t > stoppedAt + 500);
    assert.ok(afterStop.length >= 3, `pages still fetched: ${afterStop.length}`);
    assert.ok(afterStop.length <= 2 * 1 * 5 + 2, `at about 1 request per second per worker: ${afterStop.length}`);
    assert.ok(
      reports.every((r) => r.stats.local > 0),
      'each worker counted its local turns',
    );
  });
});

describe('The harvester with Redis stalled (SIGSTOP)', () => {
  let redis: RedisProcess;
  before(async () => {
    redis = await startRedis();
  });
  after(() => redis.stop());

  it('keeps the local pace on every Redis access (check, cursor, claim) and stops on time', async () => {
    const site = 'stalled';
    source.setCapacity(site, 1000);
    const seconds = 4;
    const started = Date.now();
    const running = runWorkers({ count: 2, source: source.url, site, seconds, redisUrl: redis.url });
    while (source.stats(site).served < 3) await new Promise((resolve) => setImmediate(resolve));
    const stalledAt = source.stats(site).log.at(-1)?.[0] as number;
    // The port stays open and takes commands, but nothing answers: no error ever comes back.
    redis.pause();
    let reports: Awaited<typeof running> | 'hung';
    try {
      reports = await Promise.race([
        running,
        new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), (seconds + 10) * 1000).unref()),
      ]);
    } finally {
      redis.resume();
    }
    assert.notEqual(reports, 'hung', 'every worker returned');
    const took = Date.now() - started;
    assert.ok(took < (seconds + 5) * 1000, `the workers stopped on time: ${took} ms for --seconds ${seconds}`);
    const afterStall = source.stats(site).log.filter(([t]) => t > stalledAt + 500);
    assert.ok(afterStall.length >= 2, `pages still fetched: ${afterStall.length}`);
    assert.ok(
      afterStall.length <= 2 * 1 * seconds + 2,
      `at about 1 request per second per worker: ${afterStall.length}`,
    );
    assert.ok(
      (reports as Awaited<typeof running>).every((r) => r.stats.local > 0),
      'each worker counted its local turns',
    );
  });
});

describe('A harvester started while Redis is stalled (SIGSTOP)', () => {
  let redis: RedisProcess;
  before(async () => {
    redis = await startRedis();
  });
  after(() => redis.stop());

  it('does not wait on its connection past the platform ready wait: it harvests at the local pace and stops on time', async () => {
    const site = 'stalled-at-start';
    source.setCapacity(site, 1000);
    const seconds = 4;
    redis.pause(); // the port takes the connection; the ready check is never answered
    let reports: Awaited<ReturnType<typeof runWorkers>> | 'hung';
    try {
      reports = await Promise.race([
        runWorkers({ count: 1, source: source.url, site, seconds, redisUrl: redis.url }),
        new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), (seconds + 10) * 1000).unref()),
      ]);
    } finally {
      redis.resume();
    }
    assert.notEqual(reports, 'hung', 'the worker returned');
    const served = source.stats(site).served;
    assert.ok(served >= 1 && served <= seconds + 2, `pages fetched at the local pace: ${served}`);
    assert.ok(((reports as Awaited<ReturnType<typeof runWorkers>>)[0]?.stats.local ?? 0) > 0, 'its turns were local');
  });
});

describe('A harvester worker process', () => {
  it('stops at SIGTERM, well before its --seconds, and reports what it did', async () => {
    const { spawn } = await import('node:child_process');
    const dir = mkdtempSync(join(tmpdir(), 'rl-harvest-term-'));
    const child = spawn(
      process.execPath,
      [
        new URL('../../functions/harvester/run.ts', import.meta.url).pathname,
        '--source',
        source.url,
        '--site',
        'term',
        '--seconds',
        '60',
      ],
      {
        env: {
          PATH: process.env.PATH ?? '',
          REDIS_URL: process.env.REDIS_URL as string,
          RATE_LIMIT_PARAMETERS_FILE: new URL('../../config/local-parameters.json', import.meta.url).pathname,
          EVENT_SINK_FILE: join(dir, 'events.jsonl'),
          POWERTOOLS_LOG_LEVEL: 'ERROR',
          POWERTOOLS_METRICS_DISABLED: 'true',
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    while (source.stats('term').served < 3) await new Promise((resolve) => setTimeout(resolve, 20));
    const signalled = Date.now();
    child.kill('SIGTERM');
    const code = await Promise.race([
      exited,
      new Promise<'still running'>((r) => setTimeout(() => r('still running'), 10_000)),
    ]);
    if (code === 'still running') child.kill('SIGKILL');
    assert.equal(code, 0, 'exited on SIGTERM');
    assert.ok(Date.now() - signalled < 10_000);
    assert.ok((JSON.parse(output.trim()) as { pages: number }).pages >= 3);
  });
});
