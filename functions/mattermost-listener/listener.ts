/**
 * The Mattermost listener (fail-closed). Mattermost has no webhook for bots
 * (outgoing webhooks exist for public channels only), so a long-running
 * process holds its WebSocket (`/api/v4/websocket`), reads `posted` events
 * and checks each against its channel's exact sliding window
 * (`mattermost-channel`). Admitted posts go to the event sink; refused ones
 * are not processed, each counted and logged by id (never its text), with a
 * per-channel summary logged every minute something happened, and at stop.
 *
 * Keeps working:
 * - heartbeat: a ping every `pingIntervalMs`; no pong by the next one and the
 *   socket is dropped (a half-open TCP connection never says so);
 * - reconnect with capped, jittered exponential backoff;
 * - nothing lost across a reconnect (docs/consumers.md, "Across reconnects"):
 *   each channel has a mark, the time up to which every post of it is in the
 *   listener's hands; it moves only when that holds (a live post moves it
 *   once its channel is caught up on this connection). After a reconnect the
 *   channels the bot is a member of (`GET /api/v4/users/me/channels`) are
 *   each asked `GET /api/v4/channels/{id}/posts?since=…` from their mark as
 *   it was at the reconnect (a channel never seen: from the listener's
 *   start), skipping those whose `last_post_at` is older; a failed request is
 *   retried with backoff until it succeeds or a newer connection takes over
 *   from the same marks. Live posts arriving meanwhile are decided at once;
 *   a post that comes both ways is decided once (the post ids in hand, and a
 *   claim per post id in Redis). The catch-up's lag is logged and reported
 *   (`onCaughtUp`);
 * - when the limiter cannot decide: posts wait in a bounded buffer and are
 *   retried until `holdMs` after they arrived, then refused (`expired`); a
 *   post arriving to a full buffer is refused at once (`overflow`);
 * - `stop()` (SIGTERM on Fargate): closes the socket, gives held posts one
 *   last try, logs the summary.
 */

import { degradedBy, type Limiter, type RateLimitObserver, verdictFor } from '@platform/rate-limit';
import * as v from 'valibot';
import { WebSocket } from 'ws';
import type { PolicyName } from '../../config/catalogue.ts';
import type { AcceptedOnce } from '../shared/once.ts';
import type { EventSink } from '../shared/sink.ts';

export const MATTERMOST_POLICY: PolicyName = 'mattermost-channel';

export interface ListenerLogger {
  info(message: string, attributes: Record<string, unknown>): void;
  warn(message: string, attributes: Record<string, unknown>): void;
}

export interface ListenerOptions {
  /** The server's base URL, http(s)://host[:port]. */
  readonly url: string;
  /** The bot's access token. */
  readonly token: string;
  readonly limiter: Limiter;
  readonly once: AcceptedOnce;
  readonly sink: EventSink;
  readonly logger: ListenerLogger;
  /** @default 15000 */
  readonly pingIntervalMs?: number;
  /** First reconnect delay; doubles up to `maxReconnectMs`, with full jitter. @default 100 */
  readonly reconnectBaseMs?: number;
  /** @default 5000 */
  readonly maxReconnectMs?: number;
  /** How long a post waits for the limiter to decide before it is refused. @default 30000 */
  readonly holdMs?: number;
  /** Posts that may wait at once. @default 1000 */
  readonly holdCapacity?: number;
  /** How often held posts are tried again. @default 500 */
  readonly retryIntervalMs?: number;
  /** How often the per-channel summary is logged, when something happened since the last one. @default 60000 */
  readonly summaryIntervalMs?: number;
  /**
   * A channel never seen is caught up from the listener's start less this
   * much, so a post made just before it is not lost to a server clock ahead
   * of ours (a post already decided is not decided again). @default 60000
   */
  readonly clockSkewMs?: number;
  /** Called when a catch-up after a reconnect has covered every channel (its lag is published as a metric). */
  readonly onCaughtUp?: (report: CatchUpReport) => void;
  /** Sees every decision (the platform's metrics per policy); flushed with each summary and at stop. */
  readonly observer?: RateLimitObserver & { flush?(): void };
}

/** One catch-up after a reconnect. */
export interface CatchUpReport {
  /** From the connection's loss to every channel caught up. */
  readonly lagMs: number;
  /** Posts the catch-up returned (some may have been decided already). */
  readonly posts: number;
  /** Channels asked for their posts. */
  readonly channels: number;
  /** Requests that failed and were retried. */
  readonly retries: number;
}

/** What happened to the posts of one channel. */
export interface ChannelSummary {
  admitted: number;
  refused: number;
  /** Refused because the limiter could not decide within `holdMs`, or the buffer was full. */
  expired: number;
  overflow: number;
  duplicates: number;
}

const Post = v.object({
  id: v.pipe(v.string(), v.regex(/^[a-z0-9]{1,64}$/)),
  channel_id: v.pipe(v.string(), v.regex(/^[a-z0-9]{1,64}$/)),
  create_at: v.pipe(v.number(), v.integer(), v.minValue(0)),
});
type Post = v.InferOutput<typeof Post> & Record<string, unknown>;

const Posted = v.object({
  event: v.literal('posted'),
  data: v.object({ post: v.string() }),
  broadcast: v.object({ channel_id: v.string() }),
});

const PostList = v.object({ posts: v.record(v.string(), v.unknown()) });

/** A channel of the bot's (`GET /api/v4/users/me/channels`): only what the catch-up needs. */
const ChannelList = v.array(
  v.looseObject({
    id: v.pipe(v.string(), v.regex(/^[a-z0-9]{1,64}$/)),
    last_post_at: v.optional(v.pipe(v.number(), v.integer()), 0),
  }),
);

/** A post deleted before the listener got to it: nothing to decide. */
const deleted = (post: Post) => typeof post.delete_at === 'number' && post.delete_at > 0;

/** A request of the catch-up that should be tried again (a network failure, a 5xx, a malformed answer). */
class CatchUpError extends Error {}

interface Held {
  readonly post: Post;
  readonly until: number;
}

export class MattermostListener {
  readonly summary = new Map<string, ChannelSummary>();
  readonly #options: ListenerOptions;
  /** Per channel: every post created up to this time (ms, the server's) is in hand. */
  readonly #marks = new Map<string, number>();
  /** Authentications so far: a catch-up whose connection is no longer the current one stops. */
  #epoch = 0;
  /** While a catch-up runs: the channels it has covered (their live posts move their marks again). */
  #catchingUp: Set<string> | undefined;
  /** The newest live post of each channel on the current connection. */
  readonly #liveNewest = new Map<string, number>();
  /** Post ids in hand (being decided or held), so one coming twice is decided once. */
  readonly #inHand = new Set<string>();
  /** When the listener first connected, less clockSkewMs: where a channel never seen is caught up from. */
  #coveredFrom = 0;
  /** When the connection was lost (local ms), for the catch-up's lag. */
  #lostAt: number | undefined;
  readonly #held: Held[] = [];
  #socket: WebSocket | undefined;
  #seq = 1;
  #attempt = 0;
  #stopped = false;
  #connectedOnce = false;
  #pingTimer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #summaryTimer: NodeJS.Timeout | undefined;
  #summarized = '';
  #awaitingPong = false;
  /** Posts being decided now, so `stop()` can wait for them. */
  readonly #inFlight = new Set<Promise<void>>();
  #onAuthenticated: (() => void) | undefined;

  constructor(options: ListenerOptions) {
    this.#options = options;
  }

  /** Connects; resolves once the first authentication succeeded. */
  start(): Promise<void> {
    const ready = new Promise<void>((resolve) => {
      this.#onAuthenticated = resolve;
    });
    this.#retryTimer = setInterval(() => this.#retryHeld(), this.#options.retryIntervalMs ?? 500);
    this.#summaryTimer = setInterval(() => this.#logSummary(), this.#options.summaryIntervalMs ?? 60_000);
    this.#connect();
    return ready;
  }

  /** Posts waiting for the limiter to be able to decide. */
  get holding(): number {
    return this.#held.length;
  }

  /** Whether the socket is open and authenticated. */
  get connected(): boolean {
    return this.#socket?.readyState === WebSocket.OPEN && this.#connectedOnce;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#pingTimer);
    clearInterval(this.#retryTimer);
    clearInterval(this.#summaryTimer);
    clearTimeout(this.#reconnectTimer);
    this.#socket?.close(1000, 'shutting down');
    await Promise.allSettled([...this.#inFlight]);
    // One last try for what waits; what still cannot be decided is refused, logged.
    const held = this.#held.splice(0);
    for (const { post } of held) await this.#track(this.#settle(post, Date.now(), true));
    this.#options.observer?.flush?.();
    this.#options.logger.info('mattermost listener stopped', { channels: Object.fromEntries(this.summary) });
  }

  /** The per-channel counts so far, logged when they changed since the last time. */
  #logSummary(): void {
    this.#options.observer?.flush?.();
    const channels = JSON.stringify(Object.fromEntries(this.summary));
    if (channels === this.#summarized) return;
    this.#summarized = channels;
    this.#options.logger.info('mattermost summary', {
      channels: Object.fromEntries(this.summary),
      holding: this.holding,
    });
  }

  #connect(): void {
    const url = new URL('/api/v4/websocket', this.#options.url);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    const socket = new WebSocket(url);
    this.#socket = socket;
    socket.on('open', () => {
      socket.send(
        JSON.stringify({ seq: this.#seq++, action: 'authentication_challenge', data: { token: this.#options.token } }),
      );
    });
    socket.on('message', (raw) => this.#onFrame(String(raw)));
    socket.on('pong', () => {
      this.#awaitingPong = false;
    });
    socket.on('error', () => {}); // a close follows; that is where we act
    socket.on('close', () => {
      clearInterval(this.#pingTimer);
      if (this.#socket !== socket || this.#stopped) return;
      this.#lostAt ??= Date.now();
      this.#scheduleReconnect();
    });
  }

  #scheduleReconnect(): void {
    const base = this.#options.reconnectBaseMs ?? 100;
    const cap = this.#options.maxReconnectMs ?? 5000;
    // Full jitter: listeners that lost the same server do not come back in step.
    const delay = Math.floor(Math.random() * Math.min(cap, base * 2 ** this.#attempt));
    this.#attempt++;
    this.#reconnectTimer = setTimeout(() => this.#connect(), delay);
  }

  #onFrame(text: string): void {
    let frame: unknown;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    const reply = frame as { status?: string; seq_reply?: number };
    if (reply.status === 'OK' && reply.seq_reply !== undefined) {
      this.#authenticated();
      return;
    }
    if (reply.status === 'FAIL') {
      this.#options.logger.warn('mattermost authentication failed', { url: this.#options.url });
      return;
    }
    const posted = v.safeParse(Posted, frame);
    if (!posted.success) return;
    let post: unknown;
    try {
      post = JSON.parse(posted.output.data.post);
    } catch {
      return;
    }
    this.#receive(post, true);
  }

  #authenticated(): void {
    this.#attempt = 0;
    const first = !this.#connectedOnce;
    this.#connectedOnce = true;
    this.#epoch++;
    this.#liveNewest.clear();
    this.#awaitingPong = false;
    this.#pingTimer = setInterval(() => {
      if (this.#awaitingPong) {
        this.#socket?.terminate();
        return;
      }
      this.#awaitingPong = true;
      this.#socket?.ping();
    }, this.#options.pingIntervalMs ?? 15_000);
    if (first) {
      this.#coveredFrom = Date.now() - (this.#options.clockSkewMs ?? 60_000);
      this.#onAuthenticated?.();
    } else {
      this.#catchingUp = new Set();
      void this.#catchUp(this.#epoch, new Map(this.#marks));
    }
  }

  /** Moves a channel's mark forward (never back). */
  #advance(channel: string, to: number | undefined): void {
    if (to === undefined) return;
    if (to > (this.#marks.get(channel) ?? 0)) this.#marks.set(channel, to);
  }

  /**
   * After a reconnect: every post the bot's channels got since their marks
   * as they were at the reconnect (`marks`). The connection is already
   * subscribed, so what is created from now on arrives live; what was
   * created before is in the answers. A channel's mark moves to the newest
   * post it got either way once its answer is in.
   */
  async #catchUp(epoch: number, marks: ReadonlyMap<string, number>): Promise<void> {
    const current = () => !this.#stopped && this.#epoch === epoch;
    let posts = 0;
    let asked = 0;
    const retries = { count: 0 };
    const channels = await this.#retrying(current, retries, 'channels', () => this.#memberChannels());
    if (channels === undefined) return;
    for (const { id, last_post_at: lastPostAt } of channels) {
      const since = marks.get(id) ?? this.#coveredFrom;
      if (lastPostAt >= since) {
        asked++;
        const missed = await this.#retrying(current, retries, id, () => this.#postsSince(id, since));
        if (missed === undefined) return;
        posts += missed.length;
        for (const post of missed) this.#receive(post, false);
        // the answer holds every post of the channel up to when it was made
        this.#advance(id, missed.at(-1)?.create_at);
      }
      // what arrived live belongs to this connection only while it is the current one
      if (!current()) return;
      this.#advance(id, this.#liveNewest.get(id));
      this.#catchingUp?.add(id);
    }
    if (!current()) return;
    // Channels not listed got every post of theirs live on this connection.
    for (const [id, newest] of this.#liveNewest) this.#advance(id, newest);
    this.#catchingUp = undefined;
    const report = { lagMs: Date.now() - (this.#lostAt ?? Date.now()), posts, channels: asked, retries: retries.count };
    this.#lostAt = undefined;
    this.#options.logger.info('mattermost caught up', { ...report });
    this.#options.onCaughtUp?.(report);
  }

  /**
   * Runs one request of the catch-up until it succeeds, with capped,
   * jittered exponential backoff; undefined once the listener stops or a
   * newer connection took over (its own catch-up starts from the marks).
   */
  async #retrying<T>(
    current: () => boolean,
    retries: { count: number },
    what: string,
    request: () => Promise<T>,
  ): Promise<T | undefined> {
    for (let attempt = 0; current(); attempt++) {
      try {
        return await request();
      } catch (error) {
        retries.count++;
        this.#options.logger.warn('mattermost catch-up failed, retrying', { of: what, attempt, error: String(error) });
        const base = this.#options.reconnectBaseMs ?? 100;
        const delay = Math.floor(Math.random() * Math.min(this.#options.maxReconnectMs ?? 5000, base * 2 ** attempt));
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
    return undefined;
  }

  async #get(path: string): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(new URL(path, this.#options.url), {
        headers: { Authorization: `Bearer ${this.#options.token}` },
        signal: AbortSignal.timeout(10_000),
      });
    } catch (error) {
      throw new CatchUpError(`${path}: ${String(error)}`);
    }
    if (!response.ok) throw new CatchUpError(`${path}: status ${response.status}`);
    try {
      return await response.json();
    } catch {
      throw new CatchUpError(`${path}: not JSON`);
    }
  }

  /** The channels the bot is a member of, with when each last got a post. */
  async #memberChannels(): Promise<v.InferOutput<typeof ChannelList>> {
    const list = v.safeParse(ChannelList, await this.#get('/api/v4/users/me/channels'));
    if (!list.success) throw new CatchUpError('channels: unexpected answer');
    return list.output;
  }

  /** A channel's posts created at or after `since`, oldest first (edits of older posts are not new posts). */
  async #postsSince(channel: string, since: number): Promise<Post[]> {
    // `since - 1`: a post in the very millisecond of the mark is asked for whether the server counts from it or after it
    const list = v.safeParse(
      PostList,
      await this.#get(`/api/v4/channels/${channel}/posts?since=${Math.max(0, since - 1)}`),
    );
    if (!list.success) throw new CatchUpError(`${channel}: unexpected answer`);
    return Object.values(list.output.posts)
      .flatMap((p) => (v.is(Post, p) && p.create_at >= since && !deleted(p as Post) ? [p as Post] : []))
      .sort((a, b) => a.create_at - b.create_at);
  }

  /** A post from the socket (`live`) or a catch-up: decided once, whichever way it came first. */
  #receive(raw: unknown, live: boolean): void {
    if (!v.is(Post, raw)) return;
    const post = raw as Post;
    const channel = post.channel_id;
    if (live) {
      this.#liveNewest.set(channel, Math.max(this.#liveNewest.get(channel) ?? 0, post.create_at));
      // before its catch-up, a channel's mark may be behind a gap: only the catch-up moves it
      if (this.#catchingUp === undefined || this.#catchingUp.has(channel)) this.#advance(channel, post.create_at);
    }
    if (this.#inHand.has(post.id)) {
      this.#channel(channel).duplicates++;
      return;
    }
    this.#inHand.add(post.id);
    void this.#track(this.#settle(post, Date.now() + (this.#options.holdMs ?? 30_000), false));
  }

  /** Decides a post; once decided (not held), it leaves the hand. */
  async #settle(post: Post, until: number, last: boolean): Promise<void> {
    if ((await this.#decide(post, until, last)) === 'decided') this.#inHand.delete(post.id);
  }

  #track(work: Promise<void>): Promise<void> {
    this.#inFlight.add(work);
    return work.finally(() => this.#inFlight.delete(work));
  }

  #channel(id: string): ChannelSummary {
    let summary = this.summary.get(id);
    if (!summary) {
      summary = { admitted: 0, refused: 0, expired: 0, overflow: 0, duplicates: 0 };
      this.summary.set(id, summary);
    }
    return summary;
  }

  /** Decides one post: admitted and handed on, refused, or held while the limiter cannot decide. */
  async #decide(post: Post, until: number, last: boolean): Promise<'decided' | 'held'> {
    const { limiter, once, sink, logger } = this.#options;
    const channel = this.#channel(post.channel_id);
    const claim = await once.claim('mattermost', post.channel_id, post.id, 1000);
    if (claim === 'seen') {
      channel.duplicates++;
      return 'decided';
    }
    if (claim === 'claimed') {
      const started = performance.now();
      const decision = await limiter.check({ policy: MATTERMOST_POLICY, key: post.channel_id });
      this.#options.observer?.observe(
        verdictFor(decision, MATTERMOST_POLICY, performance.now() - started, post.channel_id),
      );
      if (decision.outcome === 'allowed') {
        try {
          await sink.put({ source: 'mattermost', id: post.id, scope: post.channel_id, payload: post });
          channel.admitted++;
        } catch (error) {
          await once.release('mattermost', post.channel_id, post.id, 1000);
          logger.warn('mattermost post not handed on', { id: post.id, channel: post.channel_id, error: String(error) });
        }
        return 'decided';
      }
      if (decision.outcome === 'limited') {
        channel.refused++;
        logger.info('mattermost post refused', {
          id: post.id,
          channel: post.channel_id,
          retryAfterMs: decision.retryAfterMs,
        });
        return 'decided';
      }
      // Undecided: give the claim back so the retry claims it again.
      await once.release('mattermost', post.channel_id, post.id, 1000);
    } else {
      // Redis could not even take the claim: counted as the check's degraded verdict (fail-closed),
      // or an outage would never show in the listener's DegradedClosed
      const degraded = degradedBy('closed', claim, 1000);
      this.#options.observer?.observe(verdictFor(degraded, MATTERMOST_POLICY, 0));
    }
    if (last || Date.now() >= until) {
      channel.expired++;
      logger.warn('mattermost post refused: the limiter could not decide in time', {
        id: post.id,
        channel: post.channel_id,
      });
      return 'decided';
    }
    if (this.#held.length >= (this.#options.holdCapacity ?? 1000)) {
      channel.overflow++;
      logger.warn('mattermost post refused: the hold buffer is full', { id: post.id, channel: post.channel_id });
      return 'decided';
    }
    this.#held.push({ post, until });
    return 'held';
  }

  #retryHeld(): void {
    if (this.#held.length === 0) return;
    const held = this.#held.splice(0);
    for (const { post, until } of held) void this.#track(this.#settle(post, until, false));
  }
}
