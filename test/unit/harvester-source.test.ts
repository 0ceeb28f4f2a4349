/**
 * One request to a source (fetchPage) against a local HTTP server that
 * misbehaves the way real sources do: every answer is a value, never a
 * rejection, and a page's body is counted, not kept.
 */
import assert from 'node:assert/strict';
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { fetchPage } from '../../functions/harvester/source.ts';

async function serve(t: TestContext, listener: RequestListener): Promise<string> {
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/sites/a/pages/1`;
}

describe('Function: fetchPage', () => {
  it('answers a page with its size in bytes', async (t) => {
    const url = await serve(t, (_req, res) => res.end('é'.repeat(1000)));
    assert.deepEqual(await fetchPage(url), { kind: 'page', bytes: 2000 });
  });

  it('answers a connection reset while the body arrives as a network failure, not a rejection', async (t) => {
    const url = await serve(t, (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': '100000' });
      // the headers and a first part are out: the body is being read when the reset comes
      res.write('partial', () => res.socket?.destroy());
    });
    assert.deepEqual(await fetchPage(url), { kind: 'failed', status: 'network' });
  });

  it('answers a body still trickling at the timeout as a network failure, not a rejection', async (t) => {
    const url = await serve(t, (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      const timer = setInterval(() => res.write('.'), 20);
      res.on('close', () => clearInterval(timer));
    });
    assert.deepEqual(await fetchPage(url, { timeoutMs: 300 }), { kind: 'failed', status: 'network' });
  });

  it('stops reading a body past maxBytes, announced or not', async (t) => {
    let hungUp: () => void = () => {};
    const closed = new Promise<void>((resolve) => {
      hungUp = resolve;
    });
    const url = await serve(t, (req, res) => {
      if (req.url?.endsWith('/announced')) {
        res.writeHead(200, { 'Content-Length': '2048' });
        res.end(Buffer.alloc(2048));
        return;
      }
      // chunked and endless: only the reader hanging up ends it
      res.writeHead(200);
      const timer = setInterval(() => res.write(Buffer.alloc(512)), 5);
      res.on('close', () => {
        clearInterval(timer);
        hungUp();
      });
    });
    assert.deepEqual(await fetchPage(`${url}/announced`, { maxBytes: 1024 }), { kind: 'failed', status: 'oversized' });
    assert.deepEqual(await fetchPage(url, { maxBytes: 4096, timeoutMs: 60_000 }), {
      kind: 'failed',
      status: 'oversized',
    });
    await closed; // the connection was given up, not read on
  });

  it('answers 429 and 503 as throttles with their Retry-After, and other statuses as failures', async (t) => {
    const url = await serve(t, (req, res) => {
      const status = Number(req.url?.split('/').at(-1));
      res.writeHead(status, status === 200 ? {} : { 'Retry-After': '7' });
      res.end('x');
    });
    const base = url.replace(/\/\d+$/, '');
    assert.deepEqual(await fetchPage(`${base}/429`), { kind: 'throttled', status: 429, retryAfterMs: 7000 });
    assert.deepEqual(await fetchPage(`${base}/503`), { kind: 'throttled', status: 503, retryAfterMs: 7000 });
    assert.deepEqual(await fetchPage(`${base}/500`), { kind: 'failed', status: 500 });
    assert.deepEqual(await fetchPage(`${base}/404`), { kind: 'failed', status: 404 });
  });

  it('answers a refused connection as a network failure', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    assert.deepEqual(await fetchPage(`http://127.0.0.1:${port}/sites/a/pages/1`), {
      kind: 'failed',
      status: 'network',
    });
  });
});
