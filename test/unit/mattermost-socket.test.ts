import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { type WebSocket, WebSocketServer } from 'ws';
import { MattermostSocket } from '../../functions/mattermost-listener/socket.ts';
import { within } from '../support/within.ts';

// The listener's socket reads whatever a server (or anything in between) sends.
// Any text frame must be ignored or understood: a throw in the frame handler
// is an uncaught exception, which ends the listener's process. And a server
// that goes quiet before the socket is authenticated (below) must not hold it
// for ever: the socket is dropped and connects again.

let server: WebSocketServer;
let peer: WebSocket;
let socket: MattermostSocket;
const posted: unknown[] = [];
let markerSeen: (() => void) | undefined;
let lost: ((error: Error) => void) | undefined;
const isMarker = (post: unknown) => (post as { id?: unknown } | null)?.id === 'marker';

before(async () => {
  server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(server, 'listening');
  const connected = once(server, 'connection');
  const { port } = server.address() as AddressInfo;
  const authenticated = new Promise<void>((resolve) => {
    socket = new MattermostSocket(
      { url: `http://127.0.0.1:${port}`, token: 't', pingIntervalMs: 60_000, reconnectBaseMs: 50, maxReconnectMs: 100 },
      {
        authenticated: () => resolve(),
        authenticationFailed: () => {},
        posted: (post) => {
          if (isMarker(post)) markerSeen?.();
          else posted.push(post);
        },
        lost: () => lost?.(new Error('the socket was lost: a frame broke it')),
      },
    );
  });
  socket.open();
  [peer] = (await connected) as [WebSocket];
  const [challenge] = await once(peer, 'message');
  const { seq } = JSON.parse(String(challenge)) as { seq: number };
  peer.send(JSON.stringify({ status: 'OK', seq_reply: seq }));
  await authenticated;
});

after(() => {
  socket.close();
  server.close();
});

/** Sends `frames`, then a marker post; once the marker arrives, every frame before it has been read. */
async function deliver(frames: readonly string[]): Promise<unknown[]> {
  posted.length = 0;
  let crashed: ((error: Error) => void) | undefined;
  const seen = new Promise<void>((resolve, reject) => {
    markerSeen = resolve;
    lost = reject;
    // a throw in the frame handler is uncaught (the test runner would only wait for the marker)
    crashed = reject;
    process.once('uncaughtException', reject);
  });
  for (const frame of frames) peer.send(frame);
  const marker = { id: 'marker', channel_id: 'c', create_at: 1 };
  peer.send(
    JSON.stringify({ event: 'posted', data: { post: JSON.stringify(marker) }, broadcast: { channel_id: 'c' } }),
  );
  try {
    await seen;
  } finally {
    if (crashed) process.off('uncaughtException', crashed);
  }
  return [...posted];
}

test('a frame of JSON that is not an object (null, a number, a string) is ignored', async () => {
  const got = await deliver(['null', '0', '"OK"', 'true', '[]', '[null]', '{"status":null}']);
  assert.deepEqual(got, []);
});

test('arbitrary text and JSON frames are ignored or read as posts, never thrown on', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.oneof(
          fc.string(),
          fc.jsonValue().map((value) => JSON.stringify(value)),
          fc
            .record({ event: fc.constantFrom('posted', 'typing'), data: fc.jsonValue(), broadcast: fc.jsonValue() })
            .map((value) => JSON.stringify(value)),
          fc
            .jsonValue()
            .map((post) =>
              JSON.stringify({ event: 'posted', data: { post: JSON.stringify(post) }, broadcast: { channel_id: 'c' } }),
            ),
        ),
        { maxLength: 8 },
      ),
      async (frames) => {
        const got = await deliver(frames);
        // a `posted` event's post is handed on as sent (the listener validates it); nothing else is
        const postedFrames = frames.filter((frame) => {
          try {
            const parsed = JSON.parse(frame) as {
              event?: unknown;
              data?: { post?: unknown };
              broadcast?: { channel_id?: unknown };
            };
            return (
              parsed?.event === 'posted' &&
              typeof parsed.data?.post === 'string' &&
              typeof parsed.broadcast?.channel_id === 'string' &&
              (() => {
                JSON.parse(parsed.data.post as string);
                return true;
              })()
            );
          } catch {
            return false;
          }
        });
        assert.equal(got.length, postedFrames.length);
      },
    ),
    { numRuns: 50 },
  );
});

const ignoring = { authenticated: () => {}, authenticationFailed: () => {}, posted: () => {} };

describe('A connection that stalls before it is authenticated', () => {
  // No heartbeat runs before the authentication: without a bound of their own, each step would wait forever.
  test('is dropped when the authentication challenge is never answered, and connects again', async () => {
    const stalling = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await once(stalling, 'listening');
    const { port } = stalling.address() as AddressInfo;
    const challenges: string[] = [];
    let connections = 0;
    const again = new Promise<void>((resolve) => {
      stalling.on('connection', (peer) => {
        // reads the challenge and never answers it, as a half-open connection does
        peer.on('message', (raw) => challenges.push(String(raw)));
        if (++connections === 2) resolve();
      });
    });
    let losses = 0;
    const stalled = new MattermostSocket(
      { url: `http://127.0.0.1:${port}`, token: 't', pingIntervalMs: 100, reconnectBaseMs: 10, maxReconnectMs: 20 },
      { ...ignoring, lost: () => losses++ },
    );
    try {
      stalled.open();
      await within(again, 10_000, 'a second connection after the first was never authenticated');
      assert.ok(
        challenges.some((c) => (JSON.parse(c) as { action?: string }).action === 'authentication_challenge'),
        'the first connection was open: the challenge was sent, then went unanswered',
      );
      assert.ok(losses >= 1, 'the stalled connection was reported lost');
    } finally {
      stalled.close();
      stalling.close();
    }
  });

  test('is dropped when the HTTP upgrade is never answered, and connects again', async () => {
    const peers: Socket[] = [];
    let connections = 0;
    let again: (() => void) | undefined;
    const reconnected = new Promise<void>((resolve) => {
      again = resolve;
    });
    // takes the TCP connection and never answers the upgrade request
    const silent = createServer((peer) => {
      peers.push(peer);
      if (++connections === 2) again?.();
    });
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const { port } = silent.address() as AddressInfo;
    const stalled = new MattermostSocket(
      { url: `http://127.0.0.1:${port}`, token: 't', pingIntervalMs: 100, reconnectBaseMs: 10, maxReconnectMs: 20 },
      { ...ignoring, lost: () => {} },
    );
    try {
      stalled.open();
      await within(reconnected, 10_000, 'a second connection after the first upgrade was never answered');
    } finally {
      stalled.close();
      for (const peer of peers) peer.destroy();
      silent.close();
    }
  });
});

describe('A socket answered OK twice', () => {
  test('runs one heartbeat, not two (the second would be left running after the socket is gone)', async () => {
    // the heartbeat's interval, told apart from any other timer by its period
    const PING_MS = 54_321;
    const heartbeats = new Set<unknown>();
    const { setInterval: realSet, clearInterval: realClear } = globalThis;
    globalThis.setInterval = ((handler: () => void, ms?: number) => {
      const timer = realSet(handler, ms);
      if (ms === PING_MS) heartbeats.add(timer);
      return timer;
    }) as typeof setInterval;
    globalThis.clearInterval = ((timer: NodeJS.Timeout | undefined) => {
      heartbeats.delete(timer);
      realClear(timer);
    }) as typeof clearInterval;
    const twice = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    twice.on('connection', (peer) => {
      peer.once('message', (raw) => {
        const { seq } = JSON.parse(String(raw)) as { seq: number };
        peer.send(JSON.stringify({ status: 'OK', seq_reply: seq }));
        peer.send(JSON.stringify({ status: 'OK', seq_reply: seq }));
      });
    });
    let repeating: MattermostSocket | undefined;
    try {
      await once(twice, 'listening');
      const { port } = twice.address() as AddressInfo;
      let authentications = 0;
      await new Promise<void>((resolve) => {
        repeating = new MattermostSocket(
          {
            url: `http://127.0.0.1:${port}`,
            token: 't',
            pingIntervalMs: PING_MS,
            reconnectBaseMs: 10,
            maxReconnectMs: 20,
          },
          {
            ...ignoring,
            authenticated: () => {
              if (++authentications === 2) resolve();
            },
            lost: () => {},
          },
        );
        repeating.open();
      });
      assert.equal(heartbeats.size, 1, 'one heartbeat running');
      repeating?.close();
      assert.equal(heartbeats.size, 0, 'none left running once closed');
    } finally {
      globalThis.setInterval = realSet;
      globalThis.clearInterval = realClear;
      repeating?.close();
      twice.close();
    }
  });
});
