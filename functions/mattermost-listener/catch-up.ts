/**
 * Nothing lost across a reconnect (docs/consumers.md, "Across reconnects"):
 * each channel has a mark, the time up to which every post of it is in the
 * listener's hands; it moves only when that holds (a live post moves it once
 * its channel is caught up on this connection). After a reconnect the
 * channels the bot is a member of are each asked for their posts since their
 * mark as it was at the reconnect (a channel never seen: from the listener's
 * start), skipping those whose `last_post_at` is older; a failed request is
 * retried with backoff until it succeeds or a newer connection takes over
 * from the same marks.
 */
import { jitteredBackoffMs } from './backoff.ts';
import type { Post } from './posts.ts';
import type { MattermostRest } from './rest.ts';

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

export interface CatchUpOptions {
  readonly rest: MattermostRest;
  readonly logger: {
    info(message: string, a: Record<string, unknown>): void;
    warn(message: string, a: Record<string, unknown>): void;
  };
  readonly reconnectBaseMs: number;
  readonly maxReconnectMs: number;
  readonly clockSkewMs: number;
  readonly onCaughtUp?: ((report: CatchUpReport) => void) | undefined;
  /** Hands a post the catch-up found to the listener (decided once, however it came). */
  readonly receive: (post: Post) => void;
  /** Whether the listener stopped: a catch-up in progress gives up. */
  readonly stopped: () => boolean;
}

export class ChannelMarks {
  readonly #options: CatchUpOptions;
  /** Per channel: every post created up to this time (ms, the server's) is in hand. */
  readonly #marks = new Map<string, number>();
  /** Authentications so far: a catch-up whose connection is no longer the current one stops. */
  #epoch = 0;
  /** While a catch-up runs: the channels it has covered (their live posts move their marks again). */
  #catchingUp: Set<string> | undefined;
  /** The newest live post of each channel on the current connection. */
  readonly #liveNewest = new Map<string, number>();
  /** When the listener first connected, less clockSkewMs: where a channel never seen is caught up from. */
  #coveredFrom = 0;
  /** When the connection was lost (local ms), for the catch-up's lag. */
  #lostAt: number | undefined;

  constructor(options: CatchUpOptions) {
    this.#options = options;
  }

  /** A connection authenticated: the first covers from now, a later one catches up from the marks. */
  connected(first: boolean): void {
    this.#epoch++;
    this.#liveNewest.clear();
    if (first) {
      this.#coveredFrom = Date.now() - this.#options.clockSkewMs;
    } else {
      this.#catchingUp = new Set();
      void this.#catchUp(this.#epoch, new Map(this.#marks));
    }
  }

  /** The connection was lost: the catch-up's lag counts from the first loss. */
  lost(): void {
    this.#lostAt ??= Date.now();
  }

  /** A live post: its channel's newest on this connection; it moves the mark once the channel is caught up. */
  live(post: Post): void {
    const channel = post.channel_id;
    this.#liveNewest.set(channel, Math.max(this.#liveNewest.get(channel) ?? 0, post.create_at));
    // before its catch-up, a channel's mark may be behind a gap: only the catch-up moves it
    if (this.#catchingUp === undefined || this.#catchingUp.has(channel)) this.#advance(channel, post.create_at);
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
    const { rest } = this.#options;
    const current = () => !this.#options.stopped() && this.#epoch === epoch;
    let posts = 0;
    let asked = 0;
    const retries = { count: 0 };
    const channels = await this.#retrying(current, retries, 'channels', () => rest.memberChannels());
    if (channels === undefined) return;
    for (const { id, last_post_at: lastPostAt } of channels) {
      const since = marks.get(id) ?? this.#coveredFrom;
      if (lastPostAt >= since) {
        asked++;
        const missed = await this.#retrying(current, retries, id, () => rest.postsSince(id, since));
        if (missed === undefined) return;
        posts += missed.length;
        for (const post of missed) this.#options.receive(post);
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
        const delay = jitteredBackoffMs(attempt, this.#options.reconnectBaseMs, this.#options.maxReconnectMs);
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
    return undefined;
  }
}
