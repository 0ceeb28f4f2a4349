/**
 * The Mattermost listener's catch-up (functions/mattermost-listener/catch-up.ts)
 * against a stand-in for its two REST requests, so a test decides when each
 * answer comes and what it is.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type CatchUpReport, ChannelMarks } from '../../functions/mattermost-listener/catch-up.ts';
import type { Post } from '../../functions/mattermost-listener/posts.ts';
import { CatchUpError, CatchUpRefused, type MattermostRest } from '../../functions/mattermost-listener/rest.ts';

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
      [t, t],
      'asked again from its mark',
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
    assert.equal(since('fresh'), t - 3_600_000, 'a mark within the claims is asked from as it is');
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
