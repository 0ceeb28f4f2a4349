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
 * - after a reconnect, `GET /api/v4/channels/{id}/posts?since=…` for every
 *   channel seen, from its last post, so a dropped connection loses nothing;
 *   a post is decided once (a claim per post id in Redis), so nothing is
 *   processed twice;
 * - when the limiter cannot decide: posts wait in a bounded buffer and are
 *   retried until `holdMs` after they arrived, then refused (`expired`); a
 *   post arriving to a full buffer is refused at once (`overflow`);
 * - `stop()` (SIGTERM on Fargate): closes the socket, gives held posts one
 *   last try, logs the summary.
 */
import type { Limiter } from '@platform/rate-limit';
import * as v from 'valibot';
import { WebSocket } from 'ws';
import type { AcceptedOnce } from '../shared/once.ts';
import type { EventSink } from '../shared/sink.ts';

export const MATTERMOST_POLICY = 'mattermost-channel';

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

interface Held {
  readonly post: Post;
  readonly until: number;
}

export class MattermostListener {
  readonly summary = new Map<string, ChannelSummary>();
  readonly #options: ListenerOptions;
  readonly #lastSeen = new Map<string, number>();
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
    for (const { post } of held) await this.#track(this.#decide(post, Date.now(), true));
    this.#options.logger.info('mattermost listener stopped', { channels: Object.fromEntries(this.summary) });
  }

  /** The per-channel counts so far, logged when they changed since the last time. */
  #logSummary(): void {
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
    this.#receive(post);
  }

  #authenticated(): void {
    this.#attempt = 0;
    const first = !this.#connectedOnce;
    this.#connectedOnce = true;
    this.#awaitingPong = false;
    this.#pingTimer = setInterval(() => {
      if (this.#awaitingPong) {
        this.#socket?.terminate();
        return;
      }
      this.#awaitingPong = true;
      this.#socket?.ping();
    }, this.#options.pingIntervalMs ?? 15_000);
    if (first) this.#onAuthenticated?.();
    else void this.#catchUp();
  }

  /** After a reconnect: what each seen channel got while we were away. */
  async #catchUp(): Promise<void> {
    for (const [channel, since] of this.#lastSeen) {
      try {
        const response = await fetch(new URL(`/api/v4/channels/${channel}/posts?since=${since}`, this.#options.url), {
          headers: { Authorization: `Bearer ${this.#options.token}` },
          signal: AbortSignal.timeout(10_000),
        });
        const list = v.safeParse(PostList, await response.json());
        if (!response.ok || !list.success) throw new Error(`status ${response.status}`);
        const missed = Object.values(list.output.posts)
          .flatMap((p) => (v.is(Post, p) ? [p as Post] : []))
          .sort((a, b) => a.create_at - b.create_at);
        for (const post of missed) this.#receive(post);
      } catch (error) {
        this.#options.logger.warn('mattermost catch-up failed', { channel, error: String(error) });
      }
    }
  }

  #receive(raw: unknown): void {
    if (!v.is(Post, raw)) return;
    const post = raw as Post;
    const seen = this.#lastSeen.get(post.channel_id) ?? 0;
    this.#lastSeen.set(post.channel_id, Math.max(seen, post.create_at));
    void this.#track(this.#decide(post, Date.now() + (this.#options.holdMs ?? 30_000), false));
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
  async #decide(post: Post, until: number, last: boolean): Promise<void> {
    const { limiter, once, sink, logger } = this.#options;
    const channel = this.#channel(post.channel_id);
    const claim = await once.claim('mattermost', post.channel_id, post.id, 1000);
    if (claim === 'seen') {
      channel.duplicates++;
      return;
    }
    if (claim === 'claimed') {
      const decision = await limiter.check({ policy: MATTERMOST_POLICY, key: post.channel_id });
      if (decision.outcome === 'allowed') {
        try {
          await sink.put({ source: 'mattermost', id: post.id, scope: post.channel_id, payload: post });
          channel.admitted++;
        } catch (error) {
          await once.release('mattermost', post.channel_id, post.id, 1000);
          logger.warn('mattermost post not handed on', { id: post.id, channel: post.channel_id, error: String(error) });
        }
        return;
      }
      if (decision.outcome === 'limited') {
        channel.refused++;
        logger.info('mattermost post refused', {
          id: post.id,
          channel: post.channel_id,
          retryAfterMs: decision.retryAfterMs,
        });
        return;
      }
      // Undecided: give the claim back so the retry claims it again.
      await once.release('mattermost', post.channel_id, post.id, 1000);
    }
    if (last || Date.now() >= until) {
      channel.expired++;
      logger.warn('mattermost post refused: the limiter could not decide in time', {
        id: post.id,
        channel: post.channel_id,
      });
      return;
    }
    if (this.#held.length >= (this.#options.holdCapacity ?? 1000)) {
      channel.overflow++;
      logger.warn('mattermost post refused: the hold buffer is full', { id: post.id, channel: post.channel_id });
      return;
    }
    this.#held.push({ post, until });
  }

  #retryHeld(): void {
    if (this.#held.length === 0) return;
    const held = this.#held.splice(0);
    for (const { post, until } of held) void this.#track(this.#decide(post, until, false));
  }
}
