/**
 * The Mattermost listener (fail-closed). Mattermost has no webhook for bots
 * (outgoing webhooks exist for public channels only), so a long-running
 * process holds its WebSocket (`/api/v4/websocket`), reads `posted` events
 * and checks each against its channel's exact sliding window
 * (`mattermost-channel`). Admitted posts go to the event sink; refused ones
 * are not processed, each counted and logged by id (never its text), with a
 * per-channel summary logged every minute something happened, and at stop.
 *
 * Its parts, one concern each, in this folder:
 * - socket.ts: the WebSocket's lifecycle (authentication, heartbeat,
 *   reconnect with capped, jittered exponential backoff);
 * - catch-up.ts: nothing lost across a reconnect (per-channel marks, the
 *   catch-up's requests in rest.ts, its lag reported by `onCaughtUp`);
 * - summary.ts: the per-channel counts;
 * - here: admission. A post that comes both ways (live and caught up) is
 *   decided once (the post ids in hand, and functions/shared/admission.ts's
 *   claim per post id in Redis). When the limiter cannot decide, posts wait
 *   in a bounded buffer and are retried until `holdMs` after they arrived,
 *   then refused (`expired`); a post arriving to a full buffer is refused at
 *   once (`overflow`). `stop()` (SIGTERM on Fargate) closes the socket, gives
 *   held posts one last try, logs the summary.
 */

import { type Decision, type Limiter, type RateLimitObserver, verdictFor } from '@platform/rate-limit';
import * as v from 'valibot';
import { admitOnce } from '../shared/admission.ts';
import type { AcceptedOnce } from '../shared/once.ts';
import type { EventSink } from '../shared/sink.ts';
import { MATTERMOST_POLICY } from '../workers.ts';
import { type CatchUpReport, ChannelMarks } from './catch-up.ts';
import { Post } from './posts.ts';
import { MattermostRest } from './rest.ts';
import { MattermostSocket } from './socket.ts';
import { ChannelSummaries, type ChannelSummary } from './summary.ts';

export type { CatchUpReport } from './catch-up.ts';
export type { ChannelSummary } from './summary.ts';

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

interface Held {
  readonly post: Post;
  readonly until: number;
}

export class MattermostListener {
  readonly #options: ListenerOptions;
  readonly #summaries = new ChannelSummaries();
  readonly #marks: ChannelMarks;
  readonly #socket: MattermostSocket;
  /** Post ids in hand (being decided or held), so one coming twice is decided once. */
  readonly #inHand = new Set<string>();
  readonly #held: Held[] = [];
  /** Posts being decided now, so `stop()` can wait for them. */
  readonly #inFlight = new Set<Promise<void>>();
  #stopped = false;
  #retryTimer: NodeJS.Timeout | undefined;
  #summaryTimer: NodeJS.Timeout | undefined;
  #onAuthenticated: (() => void) | undefined;

  constructor(options: ListenerOptions) {
    this.#options = options;
    const reconnectBaseMs = options.reconnectBaseMs ?? 100;
    const maxReconnectMs = options.maxReconnectMs ?? 5000;
    this.#marks = new ChannelMarks({
      rest: new MattermostRest(options.url, options.token),
      logger: options.logger,
      reconnectBaseMs,
      maxReconnectMs,
      clockSkewMs: options.clockSkewMs ?? 60_000,
      onCaughtUp: options.onCaughtUp,
      receive: (post) => this.#receive(post, false),
      stopped: () => this.#stopped,
    });
    this.#socket = new MattermostSocket(
      {
        url: options.url,
        token: options.token,
        pingIntervalMs: options.pingIntervalMs ?? 15_000,
        reconnectBaseMs,
        maxReconnectMs,
      },
      {
        authenticated: (first) => {
          this.#marks.connected(first);
          if (first) this.#onAuthenticated?.();
        },
        authenticationFailed: () => options.logger.warn('mattermost authentication failed', { url: options.url }),
        posted: (post) => this.#receive(post, true),
        lost: () => this.#marks.lost(),
      },
    );
  }

  /** What happened to each channel's posts so far. */
  get summary(): Map<string, ChannelSummary> {
    return this.#summaries.byChannel;
  }

  /** Connects; resolves once the first authentication succeeded. */
  start(): Promise<void> {
    const ready = new Promise<void>((resolve) => {
      this.#onAuthenticated = resolve;
    });
    this.#retryTimer = setInterval(() => this.#retryHeld(), this.#options.retryIntervalMs ?? 500);
    this.#summaryTimer = setInterval(() => this.#logSummary(), this.#options.summaryIntervalMs ?? 60_000);
    this.#socket.open();
    return ready;
  }

  /** Posts waiting for the limiter to be able to decide. */
  get holding(): number {
    return this.#held.length;
  }

  /** Whether the socket is open and authenticated. */
  get connected(): boolean {
    return this.#socket.connected;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#retryTimer);
    clearInterval(this.#summaryTimer);
    this.#socket.close();
    await Promise.allSettled([...this.#inFlight]);
    // One last try for what waits; what still cannot be decided is refused, logged.
    const held = this.#held.splice(0);
    for (const { post } of held) await this.#track(this.#settle(post, Date.now(), true));
    this.#options.observer?.flush?.();
    this.#options.logger.info('mattermost listener stopped', { channels: this.#summaries.all() });
  }

  /** The per-channel counts so far, logged when they changed since the last time. */
  #logSummary(): void {
    this.#options.observer?.flush?.();
    const channels = this.#summaries.changed();
    if (channels === undefined) return;
    this.#options.logger.info('mattermost summary', { channels, holding: this.holding });
  }

  /** A post from the socket (`live`) or a catch-up: decided once, whichever way it came first. */
  #receive(raw: unknown, live: boolean): void {
    if (!v.is(Post, raw)) return;
    const post = raw as Post;
    if (live) this.#marks.live(post);
    if (this.#inHand.has(post.id)) {
      this.#summaries.of(post.channel_id).duplicates++;
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

  /** Decides one post: admitted and handed on, refused, or held while the limiter cannot decide. */
  async #decide(post: Post, until: number, last: boolean): Promise<'decided' | 'held'> {
    const { limiter, once, sink, logger, observer } = this.#options;
    const channel = this.#summaries.of(post.channel_id);
    const admission = await admitOnce<Decision>(
      { source: 'mattermost', id: post.id, scope: post.channel_id, payload: post },
      {
        once,
        sink,
        budgetMs: 1000,
        check: async (claim) => {
          const started = performance.now();
          // the post's claim in the same script as its channel's window (one slot: the channel is the scope)
          const decided = await limiter.checkOnce([{ policy: MATTERMOST_POLICY, key: post.channel_id }], claim, {
            scope: post.channel_id,
          });
          if (decided === 'duplicate') return decided;
          const decision = (decided.enforced ?? decided.shadow) as Decision;
          observer?.observe(verdictFor(decision, MATTERMOST_POLICY, performance.now() - started, post.channel_id));
          return decision;
        },
        admits: (decision) => decision.outcome === 'allowed',
        // a limited post stays claimed: it was decided; an undecided one (Redis down) never took its claim
        keepsClaim: true,
      },
    );
    switch (admission.kind) {
      case 'duplicate':
        channel.duplicates++;
        return 'decided';
      case 'admitted':
        channel.admitted++;
        return 'decided';
      case 'unsunk':
        logger.warn('mattermost post not handed on', {
          id: post.id,
          channel: post.channel_id,
          error: String(admission.error),
        });
        return 'decided';
      case 'refused':
        if (admission.decided.outcome === 'limited') {
          channel.refused++;
          logger.info('mattermost post refused', {
            id: post.id,
            channel: post.channel_id,
            retryAfterMs: admission.decided.retryAfterMs,
          });
          return 'decided';
        }
        break; // undecided: held below
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
