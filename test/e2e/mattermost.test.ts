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
import {
  compilePolicies,
  createLimiter,
  createRedisClient,
  type Degraded,
  type Limiter,
  type RedisClient,
  staticPolicies,
} from '@platform/rate-limit';
import {
  type CatchUpReport,
  type ChannelSummary,
  type ListenerLogger,
  type ListenerOptions,
  MattermostListener,
} from '../../functions/mattermost-listener/listener.ts';
import { AcceptedOnce } from '../../functions/shared/once.ts';
import type { AcceptedEvent, EventSink } from '../../functions/shared/sink.ts';
import { type MattermostServer, startMattermostServer } from '../../scripts/mattermost-server.ts';
import { type RedisProcess, startRedis } from '../../scripts/redis-process.ts';
import { clusterSettings, testRedisClient } from '../support/targets.ts';
import { within } from '../support/within.ts';

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

/** A logger that keeps every line. */
function recording() {
  const lines: { level: 'info' | 'warn'; message: string; attributes: Record<string, unknown> }[] = [];
  const logger: ListenerLogger = {
    info: (message, attributes) => lines.push({ level: 'info', message, attributes }),
    warn: (message, attributes) => lines.push({ level: 'warn', message, attributes }),
  };
  return { lines, logger };
}

/** What a fail-closed check answers when Redis could not decide. */
const undecided: Degraded = {
  outcome: 'degraded',
  decided: false,
  allowed: false,
  degraded: true,
  failureMode: 'closed',
  reason: 'timeout',
  retryAfterMs: 1000,
};

/** A limiter whose checks `checkOnce` answers (the listener asks nothing else). */
const limiterOf = (checkOnce: Limiter['checkOnce']) => ({ checkOnce }) as unknown as Limiter;

/** Resolves once `condition` holds, checking on every turn of the event loop (no fixed sleeps). */
async function until(condition: () => boolean, timeoutMs = 10_000): Promise<number> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return Date.now() - started;
}

/** The listener's limiter on `redis`: `limit` posts a minute per channel. */
function channelLimiter(redis: RedisClient, limit: number): Limiter {
  const policies = staticPolicies(
    compilePolicies({
      'mattermost-channel': {
        strategy: 'slidingWindow',
        limit,
        window: '1 m',
        // the post's claim is decided with its window: one slot, the channel as the scope
        group: 'mattermost',
        failureMode: 'closed',
        timeBudget: '300 ms',
      },
    }),
  );
  return createLimiter({ redis, policies });
}

/** A listener on the local server, its claims in `redis`, with short timings. */
function listenerWith(
  server: MattermostServer,
  redis: RedisClient,
  options: Pick<ListenerOptions, 'limiter' | 'sink'> & Partial<ListenerOptions>,
) {
  return new MattermostListener({
    url: server.url,
    token: server.token,
    once: new AcceptedOnce(redis),
    logger: quiet,
    pingIntervalMs: 200,
    reconnectBaseMs: 50,
    maxReconnectMs: 400,
    retryIntervalMs: 50,
    ...options,
  });
}

function listenerOn(
  server: MattermostServer,
  redis: RedisClient,
  sink: EventSink,
  limit: number,
  holdMs = 30_000,
  logger: ListenerLogger = quiet,
  summaryIntervalMs = 60_000,
  onCaughtUp?: (report: CatchUpReport) => void,
) {
  return listenerWith(server, redis, {
    limiter: channelLimiter(redis, limit),
    sink,
    logger,
    holdMs,
    summaryIntervalMs,
    ...(onCaughtUp ? { onCaughtUp } : {}),
  });
}

/** Posts decided so far on these channels (admitted, refused, refused undecided, or given up unsunk). */
function decided(listener: MattermostListener, rooms: readonly string[]): number {
  return rooms.reduce((sum, room) => {
    const s = listener.summary.get(room);
    return sum + (s ? s.admitted + s.refused + s.expired + s.overflow + s.unsunk : 0);
  }, 0);
}

const totalRequests = (server: MattermostServer) => [...server.requests.values()].reduce((a, b) => a + b, 0);

const channel = (name: string) => `${name}${process.pid}${Date.now().toString(36)}`.toLowerCase();

describe('The Mattermost listener', () => {
  let server: MattermostServer;
  let redis: RedisClient;
  before(async () => {
    server = await startMattermostServer();
    // the production shape: TLS cluster, the functions' ACL user (the limiter down case below uses a node of its own)
    redis = testRedisClient(clusterSettings());
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
      before.length,
      'the catch-up asks from 30 s before the last post seen: the posts seen come back once and are skipped',
    );
  });

  it('decides every post exactly once over repeated cuts, cuts during a catch-up, failed catch-ups and new channels', async (t) => {
    const sink = new MemorySink();
    const reports: CatchUpReport[] = [];
    const listener = listenerOn(server, redis, sink, 100_000, 30_000, quiet, 60_000, (r) => reports.push(r));
    await listener.start();
    const rooms = [channel('ra'), channel('rb'), channel('rc')];
    const posted: string[] = [];
    const post = (room: string, text: string) => {
      if (!rooms.includes(room)) rooms.push(room);
      posted.push(server.post(room, text).id);
    };
    /** Cuts the socket and waits for the listener to be back (authenticated again). */
    const cut = async () => {
      const authenticated = server.authenticated;
      server.dropConnections();
      cuts++;
      return authenticated;
    };
    let cuts = 0;
    server.delayRequests(15); // a catch-up takes long enough to be cut in the middle
    for (let round = 0; round < 12; round++) {
      for (let i = 0; i < 4; i++) post(rooms[i % 2] as string, `live ${round}.${i}`);
      const authenticated = await cut();
      // while away: the seen channels, one never seen before the cut (a new one every third round)
      for (let i = 0; i < 4; i++) post(rooms[(round + i) % 3] as string, `away ${round}.${i}`);
      if (round % 3 === 0) post(channel(`new${round}x`), `first post of a new channel ${round}`);
      if (round === 5) server.failRequests(2, 'reset');
      if (round === 8) server.failRequests(2, 'status');
      await until(() => server.authenticated > authenticated);
      if (round % 3 === 1) {
        // cut again once the catch-up has asked its first question: the next connection takes over
        const asked = totalRequests(server);
        await until(() => totalRequests(server) > asked);
        post(rooms[0] as string, `during catch-up ${round}`);
        const again = await cut();
        post(rooms[2] as string, `away again ${round}`);
        await until(() => server.authenticated > again);
      }
      if (round % 3 === 2) {
        // and some catch-ups run to their end before the next cut
        const completed = reports.length;
        await until(() => reports.length > completed);
      }
    }
    post(rooms[1] as string, 'after the last cut');
    server.delayRequests(0);
    await until(() => decided(listener, rooms) >= posted.length, 30_000).catch(() =>
      assert.fail(`decided ${decided(listener, rooms)} of ${posted.length}`),
    );
    await until(() => listener.connected && reports.length > 0);
    await listener.stop();
    const got = rooms.flatMap((room) => sink.of(room));
    const lost = posted.filter((id) => !got.includes(id));
    t.diagnostic(
      `posts sent ${posted.length}, decided ${decided(listener, rooms)}, handed on ${got.length}, lost ${lost.length}, over ${cuts} cuts; ${reports.length} catch-ups completed, ${reports.reduce((a, r) => a + r.retries, 0)} failed requests retried`,
    );
    assert.ok(posted.length >= 100 && cuts >= 10, `${posted.length} posts, ${cuts} cuts`);
    assert.deepEqual(lost, [], 'none lost');
    assert.equal(got.length, new Set(got).size, 'none handed on twice');
    assert.equal(got.length, posted.length);
    assert.equal(decided(listener, rooms), posted.length, 'each decided once');
  });

  it('retries a catch-up that fails twice, then catches up (the lag reported)', async () => {
    const sink = new MemorySink();
    const warnings: string[] = [];
    const reports: CatchUpReport[] = [];
    const logger = { info: () => {}, warn: (message: string) => warnings.push(message) };
    const listener = listenerOn(server, redis, sink, 1000, 30_000, logger, 60_000, (r) => reports.push(r));
    await listener.start();
    const room = channel('retry');
    server.post(room, 'seen');
    await until(() => sink.of(room).length === 1);
    const authenticated = server.authenticated;
    server.dropConnections();
    const missed = [server.post(room, 'away 1'), server.post(room, 'away 2')];
    server.failRequests(2, 'reset');
    await until(() => server.authenticated > authenticated);
    await until(() => reports.length === 1);
    await until(() => sink.of(room).length === 3);
    await listener.stop();
    assert.deepEqual(
      sink.of(room).slice(1),
      missed.map((p) => p.id),
    );
    assert.equal(warnings.filter((m) => m === 'mattermost catch-up failed, retrying').length, 2);
    const [report] = reports;
    assert.equal(report?.retries, 2);
    assert.ok((report?.lagMs ?? -1) >= 0 && (report?.posts ?? 0) >= 2, JSON.stringify(report));
  });

  it('skips a channel the server refuses (403) in a catch-up, catches up the others, and leaves its mark behind the gap', async () => {
    const sink = new MemorySink();
    const reports: CatchUpReport[] = [];
    const { lines, logger } = recording();
    const listener = listenerOn(server, redis, sink, 1000, 30_000, logger, 60_000, (r) => reports.push(r));
    await listener.start();
    // the refused channel is listed first: it does not hold up the other
    const gone = channel('gone');
    const busy = channel('busy');
    const seen = server.post(gone, 'seen');
    server.post(busy, 'seen');
    await until(() => sink.of(gone).length === 1 && sink.of(busy).length === 1);
    server.refuseChannel(gone, 403); // the bot removed from it
    server.dropConnections();
    const missed = server.post(gone, 'away, its channel refused');
    const caughtUp = server.post(busy, 'away');
    await until(() => reports.length === 1);
    await until(() => sink.of(busy).includes(caughtUp.id));
    assert.equal(reports[0]?.skipped, 1, JSON.stringify(reports[0]));
    assert.ok(
      lines.some((l) => l.message === 'mattermost catch-up refused, channel skipped' && l.attributes.of === gone),
      'the skip logged',
    );
    // a live post of the skipped channel does not move its mark past the gap
    const live = server.post(gone, 'live after the skip');
    await until(() => sink.of(gone).includes(live.id));
    server.refuseChannel(gone, undefined);
    server.dropConnections();
    await until(() => reports.length === 2);
    await until(() => sink.of(gone).includes(missed.id)).catch(() =>
      assert.fail('the post missed while the channel was refused is caught up once it answers again'),
    );
    await listener.stop();
    assert.deepEqual(sink.of(gone), [seen.id, live.id, missed.id]);
  });

  it('decides once a post refused undecided: a catch-up bringing it again answers duplicate', async () => {
    const sink = new MemorySink();
    const real = channelLimiter(redis, 100);
    let down = true;
    const limiter = limiterOf((...check) =>
      down ? Promise.resolve({ enforced: undecided, shadow: undefined }) : real.checkOnce(...check),
    );
    const listener = listenerWith(server, redis, { limiter, sink, holdMs: 200 });
    await listener.start();
    const room = channel('undecided');
    server.post(room, 'while the limiter cannot decide');
    await until(() => listener.summary.get(room)?.expired === 1);
    down = false;
    server.dropConnections();
    // the post is at its channel's mark: the catch-up brings it again
    await until(() => {
      const s = listener.summary.get(room);
      return (s?.duplicates ?? 0) + (s?.admitted ?? 0) > 0;
    });
    await listener.stop();
    const { expired, admitted, duplicates } = listener.summary.get(room) ?? {};
    assert.deepEqual({ expired, admitted, duplicates }, { expired: 1, admitted: 0, duplicates: 1 });
    assert.deepEqual(sink.of(room), [], 'refused, then not admitted too');
  });

  it('hands on an admitted post the sink did not take once it does, counted once', async () => {
    const sink = new MemorySink();
    let failures = 2;
    const throttled: EventSink = {
      put: async (event) => {
        if (failures-- > 0) throw new Error('SQS: ThrottlingException');
        await sink.put(event);
      },
    };
    const listener = listenerWith(server, redis, { limiter: channelLimiter(redis, 1), sink: throttled });
    await listener.start();
    const room = channel('throttled');
    const first = server.post(room, 'admitted, not taken at first');
    await until(() => sink.of(room).length === 1).catch(() => assert.fail('handed on after the sink recovered'));
    server.post(room, 'over the window of 1');
    await until(() => listener.summary.get(room)?.refused === 1);
    await listener.stop();
    assert.deepEqual(sink.of(room), [first.id]);
    const { admitted, refused, unsunk } = listener.summary.get(room) ?? {};
    assert.deepEqual(
      { admitted, refused, unsunk },
      { admitted: 1, refused: 1, unsunk: 0 },
      'its window counted it once',
    );
  });

  it('gives up, counted and logged by id, an admitted post the sink does not take within the hold time; decided once', async () => {
    const sink = new MemorySink();
    let sinkDown = true;
    const { lines, logger } = recording();
    const listener = listenerWith(server, redis, {
      limiter: channelLimiter(redis, 100),
      logger,
      holdMs: 200,
      sink: {
        put: async (event) => {
          if (sinkDown) throw new Error('SQS: unavailable');
          await sink.put(event);
        },
      },
    });
    await listener.start();
    const room = channel('unsunk');
    const post = server.post(room, 'never taken: secret text');
    await until(() => listener.summary.get(room)?.unsunk === 1);
    assert.equal(lines.find((l) => l.attributes.id === post.id)?.message, 'mattermost post not handed on');
    // it was admitted, its claim kept: a catch-up bringing it again answers duplicate
    sinkDown = false;
    server.dropConnections();
    await until(() => listener.summary.get(room)?.duplicates === 1);
    await listener.stop();
    assert.deepEqual(sink.of(room), []);
    const stopped = lines.find((l) => l.message === 'mattermost listener stopped')?.attributes.channels;
    assert.equal((stopped as Record<string, ChannelSummary> | undefined)?.[room]?.unsunk, 1, 'in the summary');
    assert.ok(!JSON.stringify(lines).includes('secret text'), 'never the text');
  });

  it('stops by its deadline when the last tries get no answer, refusing what is left in one line', async () => {
    let answering = true;
    const limiter = limiterOf(() =>
      answering ? Promise.resolve({ enforced: undecided, shadow: undefined }) : new Promise(() => {}),
    );
    const { lines, logger } = recording();
    // no retry before the stop: the posts wait in the buffer after their first try
    const listener = listenerWith(server, redis, {
      limiter,
      sink: new MemorySink(),
      logger,
      retryIntervalMs: 60_000,
      stopDeadlineMs: 300,
    });
    await listener.start();
    const room = channel('deadline');
    const posts = Array.from({ length: 5 }, (_, i) => server.post(room, `held ${i}`));
    await until(() => listener.holding === 5);
    answering = false; // Redis stalls: no last try ever gets an answer
    await within(listener.stop(), 10_000, 'stop()');
    const batch = lines.findIndex(
      (l) => l.message === 'mattermost posts refused: not decided before the stop deadline',
    );
    assert.deepEqual(lines[batch]?.attributes.posts, { [room]: posts.map((p) => p.id) });
    assert.ok(batch < lines.findIndex((l) => l.message === 'mattermost listener stopped'), 'before the summary');
    assert.equal(listener.summary.get(room)?.expired, 5);
  });

  it('gives held posts their last try at stop several at a time', async () => {
    let stopping = false;
    let running = 0;
    let most = 0;
    const limiter = limiterOf(async () => {
      if (stopping) {
        running++;
        most = Math.max(most, running);
        await new Promise((resolve) => setImmediate(resolve));
        running--;
      }
      return { enforced: undecided, shadow: undefined };
    });
    const { lines, logger } = recording();
    const listener = listenerWith(server, redis, { limiter, sink: new MemorySink(), logger, retryIntervalMs: 60_000 });
    await listener.start();
    const room = channel('lasttries');
    const posts = Array.from({ length: 10 }, (_, i) => server.post(room, `held ${i}`));
    await until(() => listener.holding === 10);
    stopping = true;
    await listener.stop();
    assert.ok(most > 1, `${most} last tries at once`);
    assert.equal(listener.summary.get(room)?.expired, 10);
    const refused = lines.filter((l) => l.message === 'mattermost post refused: the limiter could not decide in time');
    assert.deepEqual(
      refused.map((l) => l.attributes.id),
      posts.map((p) => p.id),
      'each refused on its own, by id',
    );
  });

  it('decides nothing that arrives while it stops', async () => {
    const real = channelLimiter(redis, 100);
    const checked: string[] = [];
    const limiter = limiterOf((requests, claim, options) => {
      checked.push(claim.key);
      return real.checkOnce(requests, claim, options);
    });
    const sink = new MemorySink();
    const listener = listenerWith(server, redis, { limiter, sink });
    await listener.start();
    const room = channel('stopping');
    const before = server.post(room, 'before the stop');
    await until(() => sink.of(room).length === 1);
    const stopped = listener.stop();
    // sent before the server reads the listener's close frame: it arrives while the socket closes
    const late = server.post(room, 'while it stops');
    await stopped;
    // the server's side closes once the listener has read every frame it sent before its close
    await until(() => server.connections === 0);
    assert.ok(!checked.some((key) => key.endsWith(late.id)), 'not decided after stop()');
    assert.deepEqual(sink.of(room), [before.id]);
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
  it('refuses a bad MATTERMOST_URL before it starts (exit 2, the reason on stderr)', async () => {
    const child = spawn(
      process.execPath,
      [new URL('../../functions/mattermost-listener/main.ts', import.meta.url).pathname],
      {
        env: { PATH: process.env.PATH ?? '', MATTERMOST_URL: 'https://bot:secret@chat.example.com' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let errors = '';
    child.stderr.on('data', (chunk) => {
      errors += chunk;
    });
    const code = await within(
      new Promise<number | null>((resolve) => child.on('exit', (exit) => resolve(exit))),
      30_000,
      'the listener process',
    );
    assert.equal(code, 2, errors);
    assert.match(errors, /invalid setting MATTERMOST_URL: must not hold credentials/);
    assert.doesNotMatch(errors, /bot:secret/, 'the credentials given are not echoed');
  });

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
