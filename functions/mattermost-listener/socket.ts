/**
 * The listener's WebSocket (`/api/v4/websocket`) and its lifecycle:
 * authentication, a heartbeat (a ping every `pingIntervalMs`; no pong by the
 * next one and the socket is dropped: a half-open TCP connection never says
 * so), and reconnecting with capped, jittered exponential backoff. Before the
 * heartbeat starts, the same bound holds each step: the HTTP upgrade, then the
 * answer to the authentication challenge, each within `pingIntervalMs`, or
 * the socket is dropped and a reconnect follows. What a connection means for
 * the posts is the listener's.
 */
import * as v from 'valibot';
import { WebSocket } from 'ws';
import { jitteredBackoffMs } from './backoff.ts';
import { Posted } from './posts.ts';
import { serverUrl } from './settings.ts';

export interface SocketOptions {
  /** The server's base URL (its path kept: a sub-path install). */
  readonly url: string;
  readonly token: string;
  /** The heartbeat's interval, and the bound on the upgrade and on the authentication's answer. */
  readonly pingIntervalMs: number;
  readonly reconnectBaseMs: number;
  readonly maxReconnectMs: number;
}

export interface SocketEvents {
  /** An authentication succeeded; `first` on the socket's first one. */
  authenticated(first: boolean): void;
  /** The server refused the token. */
  authenticationFailed(): void;
  /** A `posted` event's post, as sent (not validated yet). */
  posted(post: unknown): void;
  /** The connection was lost (not closed by `close()`); a reconnect is scheduled. */
  lost(): void;
}

export class MattermostSocket {
  readonly #options: SocketOptions;
  readonly #events: SocketEvents;
  #socket: WebSocket | undefined;
  #seq = 1;
  #attempt = 0;
  #closed = false;
  #authenticatedOnce = false;
  #awaitingPong = false;
  #pingTimer: NodeJS.Timeout | undefined;
  /** Until the authentication's answer: none in time and the socket is dropped (no heartbeat runs yet). */
  #authTimer: NodeJS.Timeout | undefined;
  #reconnectTimer: NodeJS.Timeout | undefined;

  constructor(options: SocketOptions, events: SocketEvents) {
    this.#options = options;
    this.#events = events;
  }

  /** Whether the socket is open and has authenticated. */
  get connected(): boolean {
    return this.#socket?.readyState === WebSocket.OPEN && this.#authenticatedOnce;
  }

  open(): void {
    const url = serverUrl(this.#options.url, 'api/v4/websocket');
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    // a server that accepts the connection and never answers the upgrade: ws aborts it (error, then close)
    const socket = new WebSocket(url, { handshakeTimeout: this.#options.pingIntervalMs });
    this.#socket = socket;
    socket.on('open', () => {
      socket.send(
        JSON.stringify({ seq: this.#seq++, action: 'authentication_challenge', data: { token: this.#options.token } }),
      );
      // a half-open connection never answers the challenge, and the heartbeat starts only once it has
      this.#authTimer = setTimeout(() => socket.terminate(), this.#options.pingIntervalMs);
    });
    socket.on('message', (raw) => this.#onFrame(String(raw)));
    socket.on('pong', () => {
      this.#awaitingPong = false;
    });
    socket.on('error', () => {}); // a close follows; that is where we act
    socket.on('close', () => {
      clearInterval(this.#pingTimer);
      clearTimeout(this.#authTimer);
      if (this.#socket !== socket || this.#closed) return;
      this.#events.lost();
      this.#scheduleReconnect();
    });
  }

  /** Closes for good: no reconnect, no heartbeat. */
  close(): void {
    this.#closed = true;
    clearInterval(this.#pingTimer);
    clearTimeout(this.#authTimer);
    clearTimeout(this.#reconnectTimer);
    this.#socket?.close(1000, 'shutting down');
  }

  #scheduleReconnect(): void {
    const delay = jitteredBackoffMs(this.#attempt, this.#options.reconnectBaseMs, this.#options.maxReconnectMs);
    this.#attempt++;
    this.#reconnectTimer = setTimeout(() => this.open(), delay);
  }

  #onFrame(text: string): void {
    let frame: unknown;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    // any JSON may arrive (`null`, a number): only an object can be a reply or an event
    if (typeof frame !== 'object' || frame === null) return;
    const reply = frame as { status?: string; seq_reply?: number };
    if (reply.status === 'OK' && reply.seq_reply !== undefined) {
      this.#authenticated();
      return;
    }
    if (reply.status === 'FAIL') {
      this.#events.authenticationFailed();
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
    this.#events.posted(post);
  }

  #authenticated(): void {
    this.#attempt = 0;
    const first = !this.#authenticatedOnce;
    this.#authenticatedOnce = true;
    this.#awaitingPong = false;
    clearTimeout(this.#authTimer);
    // a second OK reply on this socket: one heartbeat still (two would leak one, and drop the socket on each other's ping)
    clearInterval(this.#pingTimer);
    this.#pingTimer = setInterval(() => {
      if (this.#awaitingPong) {
        this.#socket?.terminate();
        return;
      }
      this.#awaitingPong = true;
      this.#socket?.ping();
    }, this.#options.pingIntervalMs);
    this.#events.authenticated(first);
  }
}
