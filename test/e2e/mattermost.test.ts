/**
 * The Mattermost listener against a local server speaking Mattermost's
 * WebSocket and REST protocol (scripts/mattermost-server.ts), with real Redis.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type ListenerLogger, MattermostListener } from '../../functions/mattermost-listener/listener.ts';
import { AcceptedOnce } from '../../functions/shared/once.ts';
import type { AcceptedEvent, EventSink } from '../../functions/shared/sink.ts';
import {
  compilePolicies,
  createLimiter,
  createRedisClient,
  type RedisClient,
  staticPolicies,
} from '../../layer/src/index.ts';
import { type MattermostServer, startMattermostServer } from '../../scripts/mattermost-server.ts';
import { type RedisProcess, startRedis } from '../../scripts/redis-process.ts';

class MemorySink implements EventSink {
  readonly events: AcceptedEvent[] = [];
  async put(event: AcceptedEvent): Promise<void> {
    this.events.push(event);
  }
  of(channel: string): string[] {
    return this.events.filter((e) => e.scope === channel).map((e) => e.id);
  }
}

const quiet = { info: () => {}, warn: () => {} };

/** Resolves once `condition` holds, checking on every turn of the event loop (no fixed sleeps). */
async function until(condition: () => boolean, timeoutMs = 10_000): Promise<number> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return Date.now() - started;
}

function listenerOn(
  server: MattermostServer,
  redis: RedisClient,
  sink: EventSink,
  limit: number,
  holdMs = 30_000,
  logger: ListenerLogger = quiet,
  summaryIntervalMs = 60_000,
) {
  const policies = staticPolicies(
    compilePolicies({
      'mattermost-channel': {
        strategy: 'slidingWindow',
        limit,
        window: '1 m',
        failureMode: 'closed',
        timeBudget: '300 ms',
      },
    }),
  );
  return new MattermostListener({
    url: server.url,
    token: server.token,
    limiter: createLimiter({ redis, policies }),
    once: new AcceptedOnce(redis),
    sink,
    logger,
    pingIntervalMs: 200,
    reconnectBaseMs: 50,
    maxReconnectMs: 400,
    holdMs,
    retryIntervalMs: 50,
    summaryIntervalMs,
  });
}

const channel = (name: string) => `${name}${process.pid}${Date.now().toString(36)}`.toLowerCase();

describe('The Mattermost listener', () => {
  let server: MattermostServer;
  let redis: RedisClient;
  before(async () => {
    server = await startMattermostServer();
    redis = createRedisClient({ url: process.env.REDIS_URL as string });
  });
  after(async () => {
    await server.close();
    redis.disconnect();
  });

  it('admits exactly the window limit of a flooded channel while another channel flows', async () => {
    const sink = new MemorySink();
    const summaries: Record<string, unknown>[] = [];
    const logger = {
      info: (message: string, attributes: Record<string, unknown>) => {
        if (message === 'mattermost summary') summaries.push(attributes);
      },
      warn: () => {},
    };
    const listener = listenerOn(server, redis, sink, 5, 30_000, logger, 50);
    await listener.start();
    const flooded = channel('flood');
    const calm = channel('calm');
    const posts = Array.from({ length: 20 }, (_, i) => server.post(flooded, `spam ${i}`));
    const others = Array.from({ length: 3 }, (_, i) => server.post(calm, `hello ${i}`));
    await until(() => {
      const s = listener.summary.get(flooded);
      return (s?.admitted ?? 0) + (s?.refused ?? 0) === 20 && (listener.summary.get(calm)?.admitted ?? 0) === 3;
    });
    // The periodic summary (every 50 ms here) carries the counts while the listener runs.
    await until(() =>
      summaries.some((s) => {
        const channels = s.channels as Record<string, { admitted: number; refused: number }>;
        return channels[flooded]?.refused === 15 && channels[calm]?.admitted === 3;
      }),
    ).catch(() => assert.fail(`a periodic summary with the counts: ${JSON.stringify(summaries.at(-1))}`));
    await listener.stop();
    assert.deepEqual(
      sink.of(flooded),
      posts.slice(0, 5).map((p) => p.id),
      'the first 5, in order',
    );
    assert.deepEqual(
      sink.of(calm),
      others.map((p) => p.id),
    );
    assert.equal(listener.summary.get(flooded)?.refused, 15, 'each refusal counted');
  });

  it('reconnects within a second after the server drops it, fetches what it missed, processes nothing twice', async () => {
    const sink = new MemorySink();
    const listener = listenerOn(server, redis, sink, 1000);
    await listener.start();
    const room = channel('room');
    const before = Array.from({ length: 5 }, (_, i) => server.post(room, `before ${i}`));
    await until(() => sink.of(room).length === 5);
    const authenticated = server.authenticated;
    server.dropConnections();
    const missed = Array.from({ length: 5 }, (_, i) => server.post(room, `while away ${i}`));
    const reconnectMs = await until(() => server.authenticated > authenticated && listener.connected);
    assert.ok(reconnectMs < 1000, `reconnected in ${reconnectMs} ms`);
    await until(() => sink.of(room).length === 10);
    const after = server.post(room, 'after');
    await until(() => sink.of(room).length === 11);
    await listener.stop();
    assert.deepEqual(
      sink.of(room),
      [...before, ...missed, after].map((p) => p.id),
      'every post once, in order',
    );
    assert.equal(
      listener.summary.get(room)?.duplicates,
      1,
      'the catch-up asks from the last post seen, which comes back once and is skipped',
    );
  });
});

describe('The Mattermost listener with the limiter down', () => {
  let server: MattermostServer;
  let redisProcess: RedisProcess;
  let redis: RedisClient;
  before(async () => {
    server = await startMattermostServer();
    redisProcess = await startRedis();
    redis = createRedisClient({ url: redisProcess.url });
  });
  after(async () => {
    redis.disconnect();
    await redisProcess.stop();
    await server.close();
  });

  it('holds posts while Redis cannot answer and processes them once it can', async () => {
    const sink = new MemorySink();
    const listener = listenerOn(server, redis, sink, 100, 10_000);
    await listener.start();
    const room = channel('held');
    redisProcess.pause();
    const posts = Array.from({ length: 3 }, (_, i) => server.post(room, `during ${i}`));
    await until(() => listener.summary.get(room) !== undefined);
    assert.deepEqual(sink.of(room), [], 'nothing processed undecided');
    redisProcess.resume();
    await until(() => sink.of(room).length === 3);
    await listener.stop();
    assert.deepEqual(
      sink.of(room),
      posts.map((p) => p.id),
    );
  });

  it('refuses, counted and logged by id, what could not be decided within the hold time', async () => {
    const sink = new MemorySink();
    const warnings: { message: string; attributes: Record<string, unknown> }[] = [];
    const logger = {
      info: () => {},
      warn: (message: string, attributes: Record<string, unknown>) => warnings.push({ message, attributes }),
    };
    const listener = listenerOn(server, redis, sink, 100, 800, logger);
    await listener.start();
    const room = channel('expired');
    redisProcess.pause();
    const post = server.post(room, 'never decided: secret text');
    await until(() => (listener.summary.get(room)?.expired ?? 0) === 1, 5000);
    redisProcess.resume();
    await listener.stop();
    assert.deepEqual(sink.of(room), []);
    const refusal = warnings.find((w) => w.attributes.id === post.id);
    assert.match(refusal?.message ?? '', /could not decide in time/);
    assert.ok(!JSON.stringify(warnings).includes('secret text'), 'never the text');
  });
});

describe('The Mattermost listener process', () => {
  it('stops cleanly on SIGTERM (exit 0)', async () => {
    const server = await startMattermostServer();
    const dir = mkdtempSync(join(tmpdir(), 'rl-mm-'));
    const local = JSON.parse(readFileSync(new URL('../../config/local-parameters.json', import.meta.url), 'utf8'));
    writeFileSync(join(dir, 'parameters.json'), JSON.stringify(local));
    const child = spawn(
      process.execPath,
      [new URL('../../functions/mattermost-listener/main.ts', import.meta.url).pathname],
      {
        env: {
          PATH: process.env.PATH ?? '',
          MATTERMOST_URL: server.url,
          REDIS_URL: process.env.REDIS_URL as string,
          RATE_LIMIT_PARAMETER_PATH: '/ratelimit/local',
          RATE_LIMIT_PARAMETERS_FILE: join(dir, 'parameters.json'),
          EVENT_SINK_FILE: join(dir, 'events.jsonl'),
          POWERTOOLS_METRICS_DISABLED: 'true',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await until(() => output.includes('mattermost listener connected'));
    const room = channel('term');
    server.post(room, 'one');
    await until(() => {
      try {
        return readFileSync(join(dir, 'events.jsonl'), 'utf8').includes(room);
      } catch {
        return false;
      }
    });
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
    assert.match(output, /mattermost listener stopped/);
    assert.equal(server.open, 0, 'the socket was closed');
    await server.close();
  });
});
