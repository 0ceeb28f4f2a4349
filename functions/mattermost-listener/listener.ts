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
 *   claim per post id in Redis, taken by every decision: admitted, refused,
 *   refused undecided). When the limiter cannot decide, posts wait in a
 *   bounded buffer and are retried until `holdMs` after they arrived, then
 *   refused (`expired`); a post arriving to a full buffer is refused at once
 *   (`overflow`). An admitted post the sink does not take waits the same way,
 *   its hand-on alone tried again, then is given up (`unsunk`). `stop()`
 *   (SIGTERM on Fargate) closes the socket, gives held posts one last try a
 *   few at a time, refuses in one batch what is not decided by its deadline,
 *   logs the summary.
 */

import { type Decision, type Limiter, mayHaveRun, type RateLimitObserver, verdictFor } from '@platform/rate-limit';
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
  /** The server's base URL, http(s)://host[:port][/path] (settings.ts's readMattermostUrl). */
  readonly url: string;
  /** The bot's access token. */
  readonly token: string;
  readonly limiter: Limiter;
  readonly once: AcceptedOnce;
  readonly sink: EventSink;
  readonly logger: ListenerLogger;
  /** The heartbeat; also how long the upgrade, then the authentication's answer, may take. @default 15000 */
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
  /**
   * How long `stop()` may take: what is in hand and not decided by then is
   * refused, logged in one line (Fargate's stopTimeout is 30 s, then SIGKILL). @default 20000
   */
  readonly stopDeadlineMs?: number;
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

/** A post in hand: being decided, or held until `until`. */
interface InHand {
  readonly post: Post;
  readonly until: number;
  /** Admitted (its claim taken with it) but not yet taken by the sink: only the hand-on is tried again. */
  admitted: boolean;
}

/** How a post was decided, counted in its channel's summary. */
type Outcome =
  | { readonly kind: 'admitted' | 'duplicate' | 'expired' | 'overflow' }
  | { readonly kind: 'refused'; readonly retryAfterMs: number }
  | { readonly kind: 'unsunk'; readonly error: unknown };

/** How long Redis may take to take or give back a post's claim on its own. */
const CLAIM_BUDGET_MS = 1000;

/** Held posts given their last try at once at stop: each may cost a time budget when Redis does not answer. */
const LAST_TRIES_AT_ONCE = 32;

/**
 * admitOnce's sink here: it hands nothing on, so a post the real sink does
 * not take keeps its claim (it was decided) and is held to be handed on
 * again (#try), where admitOnce would give the claim back for a sender to
 * retry: Mattermost does not.
 */
const HANDED_ON_BY_THE_LISTENER: EventSink = { put: async () => {} };

export class MattermostListener {
  readonly #options: ListenerOptions;
  readonly #summaries = new ChannelSummaries();
  readonly #marks: ChannelMarks;
  readonly #socket: MattermostSocket;
  /** Posts in hand (being decided or held) by id, so one coming twice is decided once. */
  readonly #inHand = new Map<string, InHand>();
  readonly #held: InHand[] = [];
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
      recallMs: options.once.ttlMs,
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
          void this.#marks.connected(first);
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

  /** Posts held: waiting for the limiter to be able to decide, or for the sink to take them. */
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
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.#options.stopDeadlineMs ?? 20_000);
    });
    // What is being decided finishes (nothing is held again once stopped), what waits gets one last try: by the deadline.
    const last = { over: false };
    const work = Promise.allSettled([...this.#inFlight, this.#lastTries(this.#held.splice(0), last)]);
    await Promise.race([work, deadline]);
    clearTimeout(timer);
    last.over = true;
    this.#refuseUnfinished();
    this.#options.observer?.flush?.();
    this.#options.logger.info('mattermost listener stopped', { channels: this.#summaries.all() });
  }

  /** Held posts' last tries, a few at a time (one at a time, 1000 posts at a 100 ms budget would outlast the stop). */
  async #lastTries(held: readonly InHand[], last: { readonly over: boolean }): Promise<void> {
    const next = held.values(); // shared: each post is taken by one worker
    const worker = async () => {
      for (const entry of next) {
        if (last.over) return;
        await this.#settle(entry, true);
      }
    };
    await Promise.all(Array.from({ length: Math.min(LAST_TRIES_AT_ONCE, held.length) }, worker));
  }

  /**
   * At the stop's deadline: what is still in hand is refused (counted:
   * `unsunk` once admitted, else `expired`) and logged in one line, without
   * the claims there is no time left for. A try still running is not counted
   * again (main.ts exits under it).
   */
  #refuseUnfinished(): void {
    if (this.#inHand.size === 0) return;
    const byChannel: Record<string, string[]> = {};
    for (const { post, admitted } of this.#inHand.values()) {
      this.#summaries.of(post.channel_id)[admitted ? 'unsunk' : 'expired']++;
      const ids = byChannel[post.channel_id] ?? [];
      ids.push(post.id);
      byChannel[post.channel_id] = ids;
    }
    this.#inHand.clear();
    this.#options.logger.warn('mattermost posts refused: not decided before the stop deadline', { posts: byChannel });
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
    // once stopped, a decision could start after stop() took stock, and the exit cut it between claim and sink
    if (this.#stopped) return;
    if (!v.is(Post, raw)) return;
    const post = raw as Post;
    if (live) this.#marks.live(post);
    // its channel is in the summary from its first post, decided or not yet
    const channel = this.#summaries.of(post.channel_id);
    if (this.#inHand.has(post.id)) {
      channel.duplicates++;
      return;
    }
    const entry: InHand = { post, until: Date.now() + (this.#options.holdMs ?? 30_000), admitted: false };
    this.#inHand.set(post.id, entry);
    void this.#track(this.#settle(entry, false));
  }

  /** Tries a post; once decided (not held), it leaves the hand and is counted. */
  async #settle(entry: InHand, last: boolean): Promise<void> {
    const outcome = await this.#try(entry, last);
    // held: still in hand; no longer in hand: refused at the stop's deadline, counted there
    if (outcome === 'held' || this.#inHand.get(entry.post.id) !== entry) return;
    this.#inHand.delete(entry.post.id);
    this.#record(entry.post, outcome);
  }

  #track(work: Promise<void>): Promise<void> {
    this.#inFlight.add(work);
    return work.finally(() => this.#inFlight.delete(work));
  }

  /**
   * One try of a post: decided (admitted and handed on, refused), or held
   * while the limiter cannot decide or the sink does not take it, until its
   * time is up, the buffer is full, or this is its last try.
   */
  async #try(entry: InHand, last: boolean): Promise<Outcome | 'held'> {
    const { post } = entry;
    // once stopped (asked after each wait), this try is the last: nothing is held again
    const noMoreTries = () => last || this.#stopped || Date.now() >= entry.until;
    const holds = () => !noMoreTries() && this.#held.length < (this.#options.holdCapacity ?? 1000);
    if (!entry.admitted) {
      const admission = await this.#admit(post);
      // pending: never here (a claim is pending only with a sink budget, which the listener's sink has not)
      if (admission.kind === 'duplicate' || admission.kind === 'pending') return { kind: 'duplicate' };
      if (admission.kind === 'refused') {
        if (admission.decided.outcome === 'limited') {
          return { kind: 'refused', retryAfterMs: admission.decided.retryAfterMs };
        }
        // undecided (the limiter could not tell)
        if (holds()) {
          this.#held.push(entry);
          return 'held';
        }
        return this.#refuseUndecided(post, noMoreTries() ? 'expired' : 'overflow');
      }
      entry.admitted = true;
    }
    try {
      await this.#options.sink.put({ source: 'mattermost', id: post.id, scope: post.channel_id, payload: post });
      return { kind: 'admitted' };
    } catch (error) {
      // an SQS outage or throttling passes: tried again like an undecided post, its claim kept
      if (holds()) {
        this.#held.push(entry);
        return 'held';
      }
      return { kind: 'unsunk', error };
    }
  }

  /** The post's claim and its channel's window, in one script; nothing handed on yet. */
  #admit(post: Post) {
    const { limiter, once, observer } = this.#options;
    return admitOnce<Decision>(
      { source: 'mattermost', id: post.id, scope: post.channel_id, payload: post },
      {
        once,
        sink: HANDED_ON_BY_THE_LISTENER,
        budgetMs: CLAIM_BUDGET_MS,
        check: async (claim) => {
          const started = performance.now();
          // the post's claim in the same script as its channel's window (one slot: the channel is the scope)
          const decided = await limiter.checkOnce([{ policy: MATTERMOST_POLICY, key: post.channel_id }], claim, {
            scope: post.channel_id,
          });
          if (typeof decided === 'string') return decided; // held: its claims are never pending (no sink budget)
          const decision = (decided.enforced ?? decided.shadow) as Decision;
          observer?.observe(verdictFor(decision, MATTERMOST_POLICY, performance.now() - started, post.channel_id));
          return decision;
        },
        admits: (decision) => decision.outcome === 'allowed',
        mayRunLate: (decision) => decision.outcome === 'degraded' && mayHaveRun(decision.reason),
        // a limited post stays claimed: it was decided; an undecided one (Redis down) takes it when refused
        keepsClaim: true,
      },
    );
  }

  /**
   * Refuses a post the limiter could not decide, taking its claim as a
   * decision does (best effort: Redis may still not answer), so a catch-up
   * bringing it again answers duplicate rather than deciding it twice.
   */
  async #refuseUndecided(post: Post, kind: 'expired' | 'overflow'): Promise<Outcome> {
    const claimed = await this.#options.once.claim('mattermost', post.channel_id, post.id, CLAIM_BUDGET_MS);
    // decided already elsewhere (the task a restart overlaps): not refused a second time
    return { kind: claimed === 'seen' ? 'duplicate' : kind };
  }

  /** Counts a decided post in its channel's summary; a refusal is logged by id (never the text). */
  #record(post: Post, outcome: Outcome): void {
    const { logger } = this.#options;
    const channel = this.#summaries.of(post.channel_id);
    const at = { id: post.id, channel: post.channel_id };
    switch (outcome.kind) {
      case 'admitted':
        channel.admitted++;
        return;
      case 'duplicate':
        channel.duplicates++;
        return;
      case 'refused':
        channel.refused++;
        logger.info('mattermost post refused', { ...at, retryAfterMs: outcome.retryAfterMs });
        return;
      case 'expired':
        channel.expired++;
        logger.warn('mattermost post refused: the limiter could not decide in time', at);
        return;
      case 'overflow':
        channel.overflow++;
        logger.warn('mattermost post refused: the hold buffer is full', at);
        return;
      case 'unsunk':
        channel.unsunk++;
        logger.warn('mattermost post not handed on', { ...at, error: String(outcome.error) });
        return;
    }
  }

  #retryHeld(): void {
    if (this.#held.length === 0) return;
    const held = this.#held.splice(0);
    for (const entry of held) void this.#track(this.#settle(entry, false));
  }
}
