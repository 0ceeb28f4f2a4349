/**
 * MATTERMOST_URL (functions/mattermost-listener/settings.ts): read and
 * refused as a typed error, and every server URL the listener builds from it
 * (the WebSocket, the REST requests) kept under its path, for a Mattermost
 * installed under a sub-path.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { InvalidSettingError } from '@platform/rate-limit';
import fc from 'fast-check';
import { WebSocketServer } from 'ws';
import { MattermostRest } from '../../functions/mattermost-listener/rest.ts';
import { readMattermostUrl, serverUrl } from '../../functions/mattermost-listener/settings.ts';
import { MattermostSocket } from '../../functions/mattermost-listener/socket.ts';

const isSettingError = (error: unknown) => error instanceof InvalidSettingError && error.setting === 'MATTERMOST_URL';

describe('MATTERMOST_URL', () => {
  it('takes a server, with a port or a sub-path', () => {
    assert.equal(readMattermostUrl('http://127.0.0.1:8065'), 'http://127.0.0.1:8065/');
    assert.equal(readMattermostUrl('https://chat.example.com'), 'https://chat.example.com/');
    assert.equal(readMattermostUrl('https://example.com/mattermost'), 'https://example.com/mattermost');
    assert.equal(readMattermostUrl('https://example.com/mattermost/'), 'https://example.com/mattermost/');
  });

  for (const [bad, why] of [
    [undefined, 'unset'],
    ['', 'empty'],
    ['chat.example.com', 'no scheme'],
    ['ftp://chat.example.com', 'not http(s)'],
    ['ws://chat.example.com', 'the WebSocket scheme (the listener derives it)'],
    ['http:chat.example.com', 'no // (the parser would take it as http://chat.example.com/)'],
    ['https://', 'no host'],
    ['https://bot:secret@chat.example.com', 'credentials'],
    ['https://bot@chat.example.com', 'a user name'],
    ['https://chat.example.com/?team=a', 'a query'],
    ['https://chat.example.com/?', 'an empty query'],
    ['https://chat.example.com/#top', 'a fragment'],
    ['https://chat.example.com:99999', 'a port out of range'],
    [' https://chat.example.com', 'a leading space (the parser would drop it)'],
    ['https://chat.exa\nmple.com', 'a newline (the parser would drop it)'],
    ['https://chat.example.com/a b', 'a space in the path'],
  ] as const) {
    it(`refuses ${why}: ${JSON.stringify(bad)}`, () => {
      assert.throws(() => readMattermostUrl(bad), isSettingError);
    });
  }

  it('never throws anything but InvalidSettingError, and what it takes is a plain http(s) base', () => {
    const candidates = fc.oneof(
      fc.string(),
      fc.string({ unit: 'binary' }),
      fc.webUrl({ validSchemes: ['http', 'https', 'ftp', 'ws'], withQueryParameters: true, withFragments: true }),
      fc.webUrl({ validSchemes: ['http', 'https'], authoritySettings: { withPort: true } }),
      fc.webUrl({ validSchemes: ['http', 'https'], authoritySettings: { withUserInfo: true, withPort: true } }),
      fc
        .tuple(fc.constantFrom('http://', 'https://', 'HTTP://', 'https:'), fc.string({ unit: 'binary' }))
        .map(([scheme, rest]) => scheme + rest),
    );
    fc.assert(
      fc.property(candidates, (value) => {
        let url: string;
        try {
          url = readMattermostUrl(value);
        } catch (error) {
          assert.ok(isSettingError(error), `${JSON.stringify(value)} threw ${String(error)}`);
          return;
        }
        const parsed = new URL(url);
        assert.ok(parsed.protocol === 'http:' || parsed.protocol === 'https:', url);
        assert.equal(parsed.username + parsed.password + parsed.search + parsed.hash, '', url);
        // every URL built from it stays on its server, under its path
        const built = serverUrl(url, 'api/v4/websocket');
        assert.equal(built.origin, parsed.origin);
        assert.ok(built.pathname.startsWith(parsed.pathname.replace(/\/+$/, '')), built.href);
        assert.ok(built.pathname.endsWith('/api/v4/websocket'), built.href);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('URLs on a server under a sub-path', () => {
  it('keep the base path, with one slash between, and the given query only', () => {
    for (const base of ['https://example.com/mattermost', 'https://example.com/mattermost/']) {
      assert.equal(serverUrl(base, 'api/v4/websocket').href, 'https://example.com/mattermost/api/v4/websocket');
      assert.equal(
        serverUrl(base, '/api/v4/channels/c1/posts', { since: '99' }).href,
        'https://example.com/mattermost/api/v4/channels/c1/posts?since=99',
      );
    }
    assert.equal(
      serverUrl('http://127.0.0.1:8065/', 'api/v4/users/me/channels').href,
      'http://127.0.0.1:8065/api/v4/users/me/channels',
    );
  });

  it('the WebSocket connects under the base path', async () => {
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    const connected = once(server, 'connection');
    const socket = new MattermostSocket(
      {
        url: `http://127.0.0.1:${port}/mattermost`,
        token: 't',
        pingIntervalMs: 60_000,
        reconnectBaseMs: 50,
        maxReconnectMs: 100,
      },
      { authenticated: () => {}, authenticationFailed: () => {}, posted: () => {}, lost: () => {} },
    );
    try {
      socket.open();
      const [, request] = (await connected) as [unknown, { url?: string }];
      assert.equal(request.url, '/mattermost/api/v4/websocket');
    } finally {
      socket.close();
      server.close();
    }
  });

  it("the catch-up's REST requests go under the base path", async () => {
    const asked: string[] = [];
    const server = createServer((req, res) => {
      asked.push(req.url ?? '');
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(req.url?.includes('/posts') ? '{"posts":{}}' : '[]');
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    try {
      const rest = new MattermostRest(`http://127.0.0.1:${port}/mattermost/`, 't');
      await rest.memberChannels();
      await rest.postsSince('c1', 1000);
      assert.deepEqual(asked, [
        '/mattermost/api/v4/users/me/channels',
        '/mattermost/api/v4/channels/c1/posts?since=999',
      ]);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
