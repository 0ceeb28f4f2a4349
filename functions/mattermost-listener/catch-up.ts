/**
 * Nothing lost across a reconnect (docs/consumers.md, "Across reconnects"):
 * each channel has a mark, the time up to which every post of it is in the
 * listener's hands; it moves only when that holds (a live post moves it once
 * its channel is caught up on this connection). After a reconnect the
 * channels the bot is a member of are each asked for their posts since their
 * mark as it was at the reconnect (a channel never seen: from the listener's
 * start), skipping those whose `last_post_at` is older, a few channels at a
 * time; a failed request is retried with backoff (the channel waits at the
 * back of the queue, not in front of the others) until it succeeds or a
 * newer connection takes over from the same marks. A channel the server
 * refuses for good (403, 404) is skipped, its mark left behind the gap.
 * No catch-up asks for posts from further back than a post's claim is
 * remembered (`recallMs`, less twice the clock skew): an older post's claim
 * may have expired, and it would be decided, and handed on, a second time.
 * A mark older than that (a channel refused for a day, an outage longer
 * than the claims) leaves those posts out, and says so in a warning.
 * Posts do not arrive in `create_at` order (B live before A, created just
 * earlier, then the socket drops before A comes): each channel is asked from
 * its mark less CATCH_UP_OVERLAP_MS, and what is asked again is decided once
 * by the listener (the post ids in hand, the claim per post id).
 */
import { jitteredBackoffMs } from './backoff.ts';
import type { Post } from './posts.ts';
import { CatchUpRefused, type MattermostRest } from './rest.ts';

/** Channels asked at once: a slow one holds one of these, not the catch-up of the others. */
const CHANNELS_AT_ONCE = 4;

/**
 * How far before its mark a channel is asked from. A post's `create_at` is
 * set when the server starts creating it, its event sent once it is stored:
 * two posts made at once (in a cluster, on two nodes whose clocks differ)
 * may come in either order, a few milliseconds to seconds apart. 30 s is far
 * above that, and costs a catch-up the posts of the 30 s before each mark
 * again, each answered `duplicate` by its claim.
 */
export const CATCH_UP_OVERLAP_MS = 30_000;

/** A channel of a catch-up still to be asked for its posts. */
interface Pending {
  readonly id: string;
  readonly since: number;
  /** When it last got a post (the server's `last_post_at`): none after `since`, none can be left out. */
  readonly lastPostAt: number;
  /** Its failed requests so far (the backoff's exponent). */
  readonly attempt: number;
  /** Not asked again before this (local ms). */
  readonly notBefore: number;
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
  /** Channels the server refused to answer for (403, 404): not caught up, their marks left as they were. */
  readonly skipped: number;
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
  /** How long a decided post's claim is remembered (AcceptedOnce's TTL): posts older than that are not asked for. */
  readonly recallMs: number;
  readonly onCaughtUp?: ((report: CatchUpReport) => void) | undefined;
  /** Hands a post the catch-up found to the listener (decided once, however it came). */
  readonly receive: (post: Post) => void;
  /** Whether the listener stopped: a catch-up in progress gives up. */
  readonly stopped: () => boolean;
}

export class ChannelMarks {
  readonly #options: CatchUpOptions;
  /** Per channel: every post created up to this time (ms, the server's; less the overlap: posts come out of order) is in hand. */
  readonly #marks = new Map<string, number>();
  /** Authentications so far: a catch-up whose connection is no longer the current one stops. */
  #epoch = 0;
  /** While a catch-up runs: the channels it has covered (their live posts move their marks again). */
  #catchingUp: Set<string> | undefined;
  /**
   * Channels whose last catch-up was refused (403, 404): their marks stay
   * behind the gap, live posts do not move them, until a catch-up covers them.
   */
  readonly #uncovered = new Set<string>();
  /** The newest live post of each channel on the current connection. */
  readonly #liveNewest = new Map<string, number>();
  /** When the listener first connected, less clockSkewMs: where a channel never seen is caught up from. */
  #coveredFrom = 0;
  /** When the connection was lost (local ms), for the catch-up's lag. */
  #lostAt: number | undefined;

  constructor(options: CatchUpOptions) {
    this.#options = options;
  }

  /**
   * A connection authenticated: the first covers from now, a later one
   * catches up from the marks. Resolves when that catch-up ended (covered
   * every channel, or gave up to a newer connection or the stop).
   */
  connected(first: boolean): Promise<void> {
    this.#epoch++;
    this.#liveNewest.clear();
    if (first) {
      this.#coveredFrom = Date.now() - this.#options.clockSkewMs;
      return Promise.resolve();
    }
    this.#catchingUp = new Set();
    return this.#catchUp(this.#epoch, new Map(this.#marks));
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
    if (this.#uncovered.has(channel)) return;
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
    const { rest, logger, reconnectBaseMs, maxReconnectMs } = this.#options;
    const current = () => !this.#options.stopped() && this.#epoch === epoch;
    const retries = { count: 0 };
    const channels = await this.#retrying(current, retries, 'channels', () => rest.memberChannels());
    // what arrived live belongs to this connection only while it is the current one
    if (channels === undefined || !current()) return;
    const queue: Pending[] = [];
    for (const { id, last_post_at: lastPostAt } of channels) {
      const since = marks.get(id) ?? this.#coveredFrom;
      // a post in the overlap is older than the channel's last, whichever post `last_post_at` counts
      if (lastPostAt >= since - CATCH_UP_OVERLAP_MS) queue.push({ id, since, lastPostAt, attempt: 0, notBefore: 0 });
      else this.#covered(id);
    }
    const asked = queue.length;
    let posts = 0;
    let skipped = 0;
    const worker = async () => {
      while (current()) {
        const now = Date.now();
        const at = queue.findIndex((channel) => channel.notBefore <= now);
        if (at < 0) {
          if (queue.length === 0) return;
          // every channel left waits its backoff
          const wait = Math.min(...queue.map((channel) => channel.notBefore)) - now;
          await new Promise((resolve) => setTimeout(resolve, wait));
          continue;
        }
        const [channel] = queue.splice(at, 1) as [Pending];
        const since = this.#recalled(channel);
        let missed: Post[];
        try {
          missed = await rest.postsSince(channel.id, since);
        } catch (error) {
          if (!current()) return;
          if (error instanceof CatchUpRefused) {
            skipped++;
            this.#uncovered.add(channel.id);
            logger.warn('mattermost catch-up refused, channel skipped', { of: channel.id, error: String(error) });
            continue;
          }
          retries.count++;
          logger.warn('mattermost catch-up failed, retrying', {
            of: channel.id,
            attempt: channel.attempt,
            error: String(error),
          });
          const delay = jitteredBackoffMs(channel.attempt, reconnectBaseMs, maxReconnectMs);
          queue.push({ ...channel, attempt: channel.attempt + 1, notBefore: Date.now() + delay });
          continue;
        }
        // an answer that comes after a newer connection took over, or the stop, is not this catch-up's to hand over
        if (!current()) return;
        posts += missed.length;
        for (const post of missed) this.#options.receive(post);
        // the answer holds every post of the channel up to when it was made (those before `since`: left out for good)
        this.#advance(channel.id, since);
        this.#advance(channel.id, missed.at(-1)?.create_at);
        this.#covered(channel.id);
      }
    };
    await Promise.all(Array.from({ length: Math.min(CHANNELS_AT_ONCE, queue.length) }, worker));
    if (!current()) return;
    // Channels not listed got every post of theirs live on this connection; a skipped one stays behind its gap.
    for (const [id, newest] of this.#liveNewest) if (!this.#uncovered.has(id)) this.#advance(id, newest);
    this.#catchingUp = undefined;
    const report = {
      lagMs: Date.now() - (this.#lostAt ?? Date.now()),
      posts,
      channels: asked,
      retries: retries.count,
      skipped,
    };
    this.#lostAt = undefined;
    logger.info('mattermost caught up', { ...report });
    this.#options.onCaughtUp?.(report);
  }

  /**
   * Where a channel is asked from: its mark less the overlap (a post made
   * before the mark may not have come yet), or, when that is older, the
   * oldest post whose claim is surely still there (made at or after this
   * time, a post was decided at or after it less the skew between the
   * server's clock and ours; its claim lasts `recallMs` from then).
   */
  #recalled(channel: Pending): number {
    const { recallMs, clockSkewMs, logger } = this.#options;
    const oldest = Date.now() - recallMs + 2 * clockSkewMs;
    const from = channel.since - CATCH_UP_OVERLAP_MS;
    if (from >= oldest) return from;
    // the overlap alone cut short: posts asked again there are not known to be missing, nothing to warn of
    if (channel.since >= oldest) return oldest;
    // posts are left out only when the channel got one after its mark (its mark is the post in hand at it)
    if (channel.attempt === 0 && channel.lastPostAt > channel.since) {
      logger.warn('mattermost catch-up: posts older than their claims are not asked for', {
        of: channel.id,
        from: channel.since,
        to: oldest,
      });
    }
    return oldest;
  }

  /** A channel has every post up to now in hand on this connection: its live posts move its mark again. */
  #covered(id: string): void {
    this.#advance(id, this.#liveNewest.get(id));
    this.#uncovered.delete(id);
    this.#catchingUp?.add(id);
  }

  /**
   * Runs the catch-up's first request (the channels) until it succeeds,
   * with capped, jittered exponential backoff; undefined once the listener
   * stops or a newer connection took over (its own catch-up starts from the
   * marks).
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
