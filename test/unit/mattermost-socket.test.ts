import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { type WebSocket, WebSocketServer } from 'ws';
import { MattermostSocket } from '../../functions/mattermost-listener/socket.ts';

// The listener's socket reads whatever a server (or anything in between) sends.
// Any text frame must be ignored or understood: a throw in the frame handler
// is an uncaught exception, which ends the listener's process.

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
