/**
 * The Mattermost listener's catch-up (functions/mattermost-listener/catch-up.ts)
 * against a stand-in for its two REST requests, so a test decides when each
 * answer comes and what it is; and, for posts that come out of order, the
 * whole listener against the local server (scripts/mattermost-server.ts) with
 * its claims in real Redis, which decide once what a catch-up asks again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { compilePolicies, createLimiter, type RedisClient, staticPolicies } from '@platform/rate-limit';
import { CATCH_UP_OVERLAP_MS, type CatchUpReport, ChannelMarks } from '../../functions/mattermost-listener/catch-up.ts';
import { MattermostListener } from '../../functions/mattermost-listener/listener.ts';
import type { Post } from '../../functions/mattermost-listener/posts.ts';
import { CatchUpError, CatchUpRefused, type MattermostRest } from '../../functions/mattermost-listener/rest.ts';
import { AcceptedOnce } from '../../functions/shared/once.ts';
import type { AcceptedEvent } from '../../functions/shared/sink.ts';
import { type MattermostServer, startMattermostServer } from '../../scripts/mattermost-server.ts';
import { clusterSettings, testRedisClient } from '../support/targets.ts';

const quiet = { info: () => {}, warn: () => {} };
const SKEW_MS = 60_000;
/** The claims' TTL (AcceptedOnce's default). */
const RECALL_MS = 25 * 3_600_000;

/** Resolves once `condition` holds, checking on every turn of the event loop (no fixed sleeps). */
async function until(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Channels as listed, each answering its posts request with `answer(since)`. */
function restOf(channels: Record<string, (since: number) => Promise<Post[]>>, lastPostAt: number) {
  const asked: { channel: string; since: number }[] = [];
  const rest = {
    memberChannels: async () => Object.keys(channels).map((id) => ({ id, last_post_at: lastPostAt })),
    postsSince: (channel: string, since: number) => {
      asked.push({ channel, since });
      return (channels[channel] as (since: number) => Promise<Post[]>)(since);
    },
  } as unknown as MattermostRest;
  return { rest, asked };
}

function marksOn(rest: MattermostRest, stopped: () => boolean = () => false) {
  const received: Post[] = [];
  const reports: CatchUpReport[] = [];
  const warnings: { message: string; a: Record<string, unknown> }[] = [];
  const marks = new ChannelMarks({
    rest,
    logger: { ...quiet, warn: (message, a) => warnings.push({ message, a }) },
    reconnectBaseMs: 10,
    maxReconnectMs: 50,
    clockSkewMs: SKEW_MS,
    recallMs: RECALL_MS,
    onCaughtUp: (report) => reports.push(report),
    receive: (post) => received.push(post),
    stopped,
  });
  return { marks, received, reports, warnings };
}

/** A first connection that saw `posts` live, then lost. */
function seenThenLost(marks: ChannelMarks, posts: readonly Post[]): void {
  void marks.connected(true);
  for (const post of posts) marks.live(post);
  marks.lost();
}

describe('The Mattermost catch-up', () => {
  it('skips a channel refused for good (403) and leaves its mark where it was, live posts or not', async () => {
    const t = Date.now();
    let refusing = true;
    const { rest, asked } = restOf(
      {
        gone: async () => {
          if (refusing) throw new CatchUpRefused('/api/v4/channels/gone/posts', 403);
          return [];
        },
        busy: async () => [{ id: 'missed', channel_id: 'busy', create_at: t + 5 }],
      },
      t + 10,
    );
    const { marks, received, reports } = marksOn(rest);
    seenThenLost(marks, [
      { id: 'g1', channel_id: 'gone', create_at: t },
      { id: 'b1', channel_id: 'busy', create_at: t },
    ]);
    void marks.connected(false);
    await until(() => reports.length === 1).catch(() => assert.fail('the catch-up completes'));
    assert.deepEqual(
      received.map((p) => p.id),
      ['missed'],
      'the channel after the refused one caught up',
    );
    assert.equal(reports[0]?.skipped, 1);
    // a live post after the catch-up would move a covered channel's mark: not the skipped one's
    marks.live({ id: 'g2', channel_id: 'gone', create_at: t + 20 });
    marks.lost();
    refusing = false;
    void marks.connected(false);
    await until(() => reports.length === 2);
    assert.deepEqual(
      asked.filter((a) => a.channel === 'gone').map((a) => a.since),
      [t - CATCH_UP_OVERLAP_MS, t - CATCH_UP_OVERLAP_MS],
      'asked again from its mark (less the overlap)',
    );
  });

  it('catches up the other channels while one keeps failing (a 5xx, retried)', async () => {
    const t = Date.now();
    let stopped = false;
    const { rest } = restOf(
      {
        stuck: async () => {
          throw new CatchUpError('/api/v4/channels/stuck/posts: status 503');
        },
        busy: async () => [{ id: 'missed', channel_id: 'busy', create_at: t + 5 }],
      },
      t + 10,
    );
    const { marks, received } = marksOn(rest, () => stopped);
    seenThenLost(marks, [
      { id: 's1', channel_id: 'stuck', create_at: t },
      { id: 'b1', channel_id: 'busy', create_at: t },
    ]);
    const catchUp = marks.connected(false);
    await until(() => received.length > 0).catch(() =>
      assert.fail('the post missed in "busy" is caught up while "stuck" is retried'),
    );
    stopped = true;
    await catchUp;
    assert.deepEqual(
      received.map((p) => p.id),
      ['missed'],
    );
  });

  it('hands over nothing from an answer that arrives after the listener stopped', async () => {
    const t = Date.now();
    let stopped = false;
    let answer: ((posts: Post[]) => void) | undefined;
    const { rest } = restOf(
      {
        room: () =>
          new Promise<Post[]>((resolve) => {
            answer = resolve;
          }),
      },
      t + 10,
    );
    const { marks, received, reports } = marksOn(rest, () => stopped);
    seenThenLost(marks, [{ id: 'r1', channel_id: 'room', create_at: t }]);
    const catchUp = marks.connected(false);
    await until(() => answer !== undefined); // the posts request is under way
    stopped = true;
    answer?.([{ id: 'late', channel_id: 'room', create_at: t + 5 }]);
    // the catch-up's end (and, should it not say, every continuation of the answer)
    await Promise.all([catchUp, new Promise((resolve) => setImmediate(resolve))]);
    assert.deepEqual(received, [], 'not decided: stop() has taken stock of what is in hand');
    assert.deepEqual(reports, []);
  });

  it('asks for no post older than its claim is remembered, however old the mark (it would be decided twice)', async () => {
    const t = Date.now();
    const { rest, asked } = restOf({ stale: async () => [], fresh: async () => [] }, t + 10);
    const { marks, reports } = marksOn(rest);
    // "stale" was last seen 30 h ago (refused since, or a long outage); "fresh" an hour ago
    seenThenLost(marks, [
      { id: 's1', channel_id: 'stale', create_at: t - 30 * 3_600_000 },
      { id: 'f1', channel_id: 'fresh', create_at: t - 3_600_000 },
    ]);
    const before = Date.now();
    void marks.connected(false);
    await until(() => reports.length === 1);
    const after = Date.now();
    const since = (channel: string) => asked.find((a) => a.channel === channel)?.since ?? Number.NaN;
    assert.ok(
      since('stale') >= before - RECALL_MS + 2 * SKEW_MS && since('stale') <= after - RECALL_MS + 2 * SKEW_MS,
      `asked from the oldest post whose claim is surely kept, not from its mark (asked from ${t - since('stale')} ms ago)`,
    );
    assert.equal(
      since('fresh'),
      t - 3_600_000 - CATCH_UP_OVERLAP_MS,
      'a mark within the claims is asked from as it is (less the overlap)',
    );
  });

  it('asks from before its mark: a post created before the newest one seen live, its event never come, is caught up', async () => {
    const t = Date.now();
    // A created first, B just after; B's event came, then the socket dropped before A's
    const a: Post = { id: 'a', channel_id: 'room', create_at: t + 100 };
    const b: Post = { id: 'b', channel_id: 'room', create_at: t + 101 };
    const { rest, asked } = restOf({ room: async (since) => [a, b].filter((p) => p.create_at >= since) }, b.create_at);
    const { marks, received, reports } = marksOn(rest);
    seenThenLost(marks, [b]);
    void marks.connected(false);
    await until(() => reports.length === 1);
    assert.deepEqual(
      received.map((p) => p.id),
      ['a', 'b'],
      'A caught up; B asked again (the listener decides it once: below)',
    );
    assert.equal(asked[0]?.since, b.create_at - CATCH_UP_OVERLAP_MS, 'asked from the mark less the overlap');
  });

  /** The warnings that posts were left out as too old for their claims. */
  const leftOut = (warnings: { message: string; a: Record<string, unknown> }[]) =>
    warnings.filter((w) => w.message === 'mattermost catch-up: posts older than their claims are not asked for');

  it('warns of no post left out for a channel quiet since its mark, however old the mark', async () => {
    const t = Date.now();
    const lastPost = t - 30 * 3_600_000;
    const { rest } = restOf({ quiet: async () => [] }, lastPost);
    const { marks, reports, warnings } = marksOn(rest);
    // its last post, seen live 30 h ago, is its mark: nothing of it is missing
    seenThenLost(marks, [{ id: 'q1', channel_id: 'quiet', create_at: lastPost }]);
    void marks.connected(false);
    await until(() => reports.length === 1);
    assert.deepEqual(leftOut(warnings), [], 'nothing was left out: no warning');
  });

  it('warns once of the posts a catch-up left out, not again at every reconnect after', async () => {
    const t = Date.now();
    // a post 28 h ago, missed in a gap: older than its claim by now, so left out
    const { rest, asked } = restOf({ gap: async () => [] }, t - 28 * 3_600_000);
    const { marks, reports, warnings } = marksOn(rest);
    seenThenLost(marks, [{ id: 'g1', channel_id: 'gap', create_at: t - 30 * 3_600_000 }]);
    void marks.connected(false);
    await until(() => reports.length === 1);
    assert.equal(leftOut(warnings).length, 1, 'the span left out is told');
    assert.deepEqual(
      Object.keys(leftOut(warnings)[0]?.a ?? {}).sort(),
      ['from', 'of', 'to'],
      'the channel and the span only',
    );
    marks.lost();
    void marks.connected(false);
    await until(() => reports.length === 2);
    assert.equal(leftOut(warnings).length, 1, 'told once: the next catch-up does not leave the same posts out again');
    assert.equal(asked.length, 1, 'nothing of the channel is asked for again');
  });
});

describe('The Mattermost listener, posts out of order across a reconnect', () => {
  let server: MattermostServer;
  let redis: RedisClient;
  before(async () => {
    server = await startMattermostServer();
    // the production shape: TLS cluster, the functions' ACL user
    redis = testRedisClient(clusterSettings());
  });
  after(async () => {
    await server.close();
    redis.disconnect();
  });

  it('decides once a post whose event never came, created before the newest seen live, and that one not twice', async () => {
    const handedOn: AcceptedEvent[] = [];
    const reports: CatchUpReport[] = [];
    const limiter = createLimiter({
      redis,
      policies: staticPolicies(
        compilePolicies({
          'mattermost-channel': {
            strategy: 'slidingWindow',
            limit: 100,
            window: '1 m',
            group: 'mattermost',
            failureMode: 'closed',
            timeBudget: '300 ms',
          },
        }),
      ),
    });
    const listener = new MattermostListener({
      url: server.url,
      token: server.token,
      limiter,
      once: new AcceptedOnce(redis),
      sink: { put: async (event) => void handedOn.push(event) },
      logger: quiet,
      pingIntervalMs: 200,
      reconnectBaseMs: 50,
      maxReconnectMs: 400,
      onCaughtUp: (report) => reports.push(report),
    });
    await listener.start();
    const room = `order${process.pid}${Date.now().toString(36)}`;
    const ids = () => handedOn.filter((e) => e.scope === room).map((e) => e.id);
    // A is created first, B just after; B's event comes first (A's is still on its way)
    const a = server.post(room, 'A', { live: false });
    const b = server.post(room, 'B');
    assert.ok(a.create_at < b.create_at);
    await until(() => ids().length === 1); // B decided: its channel's mark is B's create_at
    server.dropConnections(); // A's event is lost with the socket
    await until(() => reports.length === 1);
    await listener.stop(); // what the catch-up handed over is decided by now
    assert.deepEqual(ids(), [b.id, a.id], 'A decided once, by the catch-up; B handed on once');
    const summary = listener.summary.get(room);
    assert.deepEqual(
      { admitted: summary?.admitted, duplicates: summary?.duplicates },
      { admitted: 2, duplicates: 1 },
      'B, asked again, answered duplicate by its claim',
    );
  });
});
