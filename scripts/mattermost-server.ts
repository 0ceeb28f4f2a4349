/**
 * Enough of Mattermost's server for the listener to run against (tests and
 * `npm start`), with `ws`:
 *
 * - WebSocket `/api/v4/websocket`: `hello` on connect; the client's
 *   `{seq, action: "authentication_challenge", data: {token}}` answered
 *   `{status: "OK", seq_reply}` (or an error and a close for a wrong token);
 *   then `posted` events `{event, data: {post: "<the post as a JSON string>",
 *   channel_type, …}, broadcast: {channel_id}, seq}` with `seq` counting up
 *   per connection. Pings are answered with pongs (ws does it).
 * - REST (Bearer token): `GET /api/v4/channels/{id}/posts?since=<ms>`:
 *   `{order, posts}` of the posts created at or after `since`;
 *   `GET /api/v4/users/me/channels`: the channels the bot is a member of
 *   (here: every channel that has a post), each with `last_post_at` and
 *   `total_msg_count`; and `POST /api/v4/posts` `{channel_id, message}` to
 *   post (and broadcast) one.
 * - For tests: `post()` creates and broadcasts a post (`{ live: false }`:
 *   created, its event never sent, as one still on its way when the socket
 *   drops), `dropConnections()`
 *   cuts every socket without a close frame, as a network failure does;
 *   `failRequests(n, how)` makes the next n REST reads fail (a 503, or a
 *   connection reset: "fetch failed"); `delayRequests(ms)` slows every REST
 *   read, so a test can cut the socket while a catch-up is under way;
 *   `refuseChannel(id, status)` answers that channel's posts with a 4xx (the
 *   bot removed from it: 403) until cleared.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';

export interface MattermostPost {
  readonly id: string;
  readonly channel_id: string;
  readonly user_id: string;
  readonly message: string;
  readonly create_at: number;
  readonly update_at: number;
}

/** A channel as `GET /api/v4/users/me/channels` lists it (the fields the API documents that a listener uses). */
export interface MattermostChannel {
  readonly id: string;
  readonly team_id: string;
  readonly type: 'O';
  readonly name: string;
  readonly display_name: string;
  readonly create_at: number;
  readonly update_at: number;
  readonly delete_at: number;
  last_post_at: number;
  total_msg_count: number;
}

export interface MattermostServer {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  readonly token: string;
  /** Creates a post and sends its event (`live: false`: none, the post is only in the REST answers). */
  post(channelId: string, message: string, options?: { live?: boolean }): MattermostPost;
  /** Terminates every socket (no close frame): the listener must notice and reconnect. */
  dropConnections(): void;
  /** The next `count` REST reads fail: a 503 answer, or the connection reset before any answer. */
  failRequests(count: number, how?: 'status' | 'reset'): void;
  /** Every REST read waits this long before its answer (0: none). */
  delayRequests(ms: number): void;
  /** Answers `GET /api/v4/channels/{id}/posts` of this channel with `status` (undefined: answers again). */
  refuseChannel(channelId: string, status: number | undefined): void;
  /** REST reads answered or failed so far, by path (without the query). */
  readonly requests: ReadonlyMap<string, number>;
  /** How many sockets have authenticated since the start. */
  readonly authenticated: number;
  /** Sockets open now. */
  readonly open: number;
  /** Sockets not closed yet (open, or closing: the close handshake under way). */
  readonly connections: number;
  close(): Promise<void>;
}

export async function startMattermostServer(
  options: { port?: number; token?: string } = {},
): Promise<MattermostServer> {
  const token = options.token ?? 'local-mattermost-bot-token';
  const posts: MattermostPost[] = [];
  const channels = new Map<string, MattermostChannel>();
  const requests = new Map<string, number>();
  let failing: { count: number; how: 'status' | 'reset' } = { count: 0, how: 'status' };
  let delayMs = 0;
  const refused = new Map<string, number>();
  const clients = new Map<WebSocket, { seq: number; authenticated: boolean }>();
  let authenticated = 0;
  let lastCreateAt = 0;

  const authorized = (req: IncomingMessage) => req.headers.authorization === `Bearer ${token}`;

  let post: (channelId: string, message: string, live: boolean) => MattermostPost = () => {
    throw new Error('not started');
  };
  const http = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://mattermost');
    const match = /^\/api\/v4\/channels\/([a-z0-9]+)\/posts$/.exec(url.pathname);
    const answer = (status: number, value: unknown) => {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    if (!authorized(req)) return answer(401, { id: 'api.context.session_expired.app_error', status_code: 401 });
    if (req.method === 'POST' && url.pathname === '/api/v4/posts') {
      let text = '';
      req.on('data', (chunk) => {
        text += chunk;
      });
      req.on('end', () => {
        try {
          const input = JSON.parse(text) as { channel_id?: unknown; message?: unknown };
          if (typeof input.channel_id !== 'string' || !/^[a-z0-9]{1,64}$/.test(input.channel_id)) throw new Error();
          answer(201, post(input.channel_id, String(input.message ?? ''), true));
        } catch {
          answer(400, { id: 'api.context.invalid_body_param.app_error', status_code: 400 });
        }
      });
      return;
    }
    if (req.method !== 'GET') return answer(405, { id: 'api.context.405.app_error', status_code: 405 });
    const read = (): unknown => {
      if (url.pathname === '/api/v4/users/me/channels') return [...channels.values()];
      if (!match) return undefined;
      const since = Number(url.searchParams.get('since') ?? '0');
      const found = posts.filter((p) => p.channel_id === match[1] && p.create_at >= since);
      return { order: found.map((p) => p.id).reverse(), posts: Object.fromEntries(found.map((p) => [p.id, p])) };
    };
    requests.set(url.pathname, (requests.get(url.pathname) ?? 0) + 1);
    setTimeout(() => {
      if (failing.count > 0) {
        failing.count--;
        if (failing.how === 'reset') return req.socket.destroy();
        return answer(503, { id: 'api.context.unavailable', status_code: 503 });
      }
      const refusal = match ? refused.get(match[1] as string) : undefined;
      if (refusal !== undefined)
        return answer(refusal, { id: 'api.context.permissions.app_error', status_code: refusal });
      // read when answering, as a server that takes this long to build its answer does
      const value = read();
      if (value === undefined) return answer(404, { id: 'api.context.404.app_error', status_code: 404 });
      answer(200, value);
    }, delayMs);
  });

  const wss = new WebSocketServer({ noServer: true });
  http.on('upgrade', (req, socket, head) => {
    if (new URL(req.url ?? '/', 'http://mattermost').pathname !== '/api/v4/websocket') {
      socket.destroy();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  wss.on('connection', (ws) => {
    const state = { seq: 0, authenticated: false };
    clients.set(ws, state);
    ws.send(JSON.stringify({ event: 'hello', data: { server_version: 'local' }, broadcast: {}, seq: state.seq++ }));
    ws.on('message', (raw) => {
      let frame: { seq?: number; action?: string; data?: { token?: string } };
      try {
        frame = JSON.parse(String(raw));
      } catch {
        return;
      }
      if (frame.action !== 'authentication_challenge') return;
      if (frame.data?.token === token) {
        state.authenticated = true;
        authenticated++;
        ws.send(JSON.stringify({ status: 'OK', seq_reply: frame.seq }));
      } else {
        ws.send(
          JSON.stringify({
            status: 'FAIL',
            seq_reply: frame.seq,
            error: { id: 'api.web_socket_router.not_authenticated.app_error' },
          }),
        );
        ws.close(1008, 'not authenticated');
      }
    });
    ws.on('close', () => clients.delete(ws));
  });

  await new Promise<void>((resolve) => http.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;

  post = (channelId, message, live) => {
    // Strictly increasing create_at, as posts of one server are ordered.
    lastCreateAt = Math.max(Date.now(), lastCreateAt + 1);
    const created: MattermostPost = {
      id: randomBytes(13).toString('hex').slice(0, 26),
      channel_id: channelId,
      user_id: 'u1',
      message,
      create_at: lastCreateAt,
      update_at: lastCreateAt,
    };
    posts.push(created);
    let channel = channels.get(channelId);
    if (!channel) {
      channel = {
        id: channelId,
        team_id: 'localteam',
        type: 'O',
        name: channelId,
        display_name: channelId,
        create_at: lastCreateAt,
        update_at: lastCreateAt,
        delete_at: 0,
        last_post_at: 0,
        total_msg_count: 0,
      };
      channels.set(channelId, channel);
    }
    channel.last_post_at = lastCreateAt;
    channel.total_msg_count++;
    if (!live) return created;
    for (const [ws, state] of clients) {
      if (!state.authenticated || ws.readyState !== WebSocket.OPEN) continue;
      ws.send(
        JSON.stringify({
          event: 'posted',
          data: { channel_type: 'O', post: JSON.stringify(created), sender_name: 'someone' },
          broadcast: { channel_id: channelId, omit_users: null, user_id: '', team_id: '' },
          seq: state.seq++,
        }),
      );
    }
    return created;
  };

  return {
    url: `http://127.0.0.1:${port}`,
    token,
    post: (channelId, message, options = {}) => post(channelId, message, options.live ?? true),
    dropConnections() {
      for (const ws of clients.keys()) ws.terminate();
    },
    failRequests(count, how = 'status') {
      failing = { count, how };
    },
    delayRequests(ms) {
      delayMs = ms;
    },
    refuseChannel(channelId, status) {
      if (status === undefined) refused.delete(channelId);
      else refused.set(channelId, status);
    },
    requests,
    get authenticated() {
      return authenticated;
    },
    get open() {
      return [...clients.keys()].filter((ws) => ws.readyState === WebSocket.OPEN).length;
    },
    get connections() {
      return clients.size;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const ws of clients.keys()) ws.terminate();
        wss.close();
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
