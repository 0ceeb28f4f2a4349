/**
 * A source for the harvester to crawl (tests, benchmarks, `npm start`): pages
 * of each site at `GET /sites/<site>/pages/<n>`, behind a hidden capacity per
 * site (its own token bucket: `capacity` requests per second, a burst of one
 * second's worth) and `429` with `Retry-After` beyond it, as a real site
 * answers a crawler. Capacity can change at run time, and a test can make the
 * next answer a throttle with a given Retry-After (seconds or an HTTP date):
 *
 *   PUT  /admin/sites/<site>            {"capacity": 20}
 *   POST /admin/sites/<site>/throttle   {"status": 429, "retryAfter": "5"}
 *   GET  /admin/sites/<site>/stats      served and refused, per request time
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

interface Site {
  capacity: number;
  tokens: number;
  refilledAt: number;
  forced: { status: number; retryAfter: string }[];
  /** [ms since start, 1 served | 0 refused] */
  log: [number, 0 | 1][];
}

export interface SiteStats {
  readonly capacity: number;
  readonly served: number;
  readonly refused: number;
  /** Each request's time (ms since the server started) and whether it was served. */
  readonly log: readonly (readonly [number, 0 | 1])[];
}

export interface HarvestSource {
  readonly url: string;
  setCapacity(site: string, perSecond: number): void;
  throttleNext(site: string, status: 429 | 503, retryAfter: string): void;
  stats(site: string): SiteStats;
  close(): Promise<void>;
}

const DEFAULT_CAPACITY = 10;

export async function startHarvestSource(
  options: { port?: number; host?: string; capacity?: Record<string, number> } = {},
): Promise<HarvestSource> {
  const started = Date.now();
  const sites = new Map<string, Site>();
  const site = (name: string): Site => {
    let found = sites.get(name);
    if (!found) {
      const capacity = options.capacity?.[name] ?? DEFAULT_CAPACITY;
      found = { capacity, tokens: capacity, refilledAt: Date.now(), forced: [], log: [] };
      sites.set(name, found);
    }
    return found;
  };
  const setCapacity = (name: string, perSecond: number) => {
    const s = site(name);
    s.capacity = perSecond;
    s.tokens = Math.min(s.tokens, perSecond);
  };
  const throttleNext = (name: string, status: 429 | 503, retryAfter: string) => {
    site(name).forced.push({ status, retryAfter });
  };
  const stats = (name: string): SiteStats => {
    const s = site(name);
    const served = s.log.filter(([, ok]) => ok === 1).length;
    return { capacity: s.capacity, served, refused: s.log.length - served, log: s.log };
  };

  function page(name: string, n: string, res: ServerResponse) {
    const s = site(name);
    const now = Date.now();
    s.tokens = Math.min(s.capacity, s.tokens + ((now - s.refilledAt) / 1000) * s.capacity);
    s.refilledAt = now;
    const forced = s.forced.shift();
    if (forced) {
      s.log.push([now - started, 0]);
      res.writeHead(forced.status, { 'Retry-After': forced.retryAfter, 'Content-Type': 'text/plain' });
      res.end('throttled');
      return;
    }
    if (s.tokens < 1) {
      s.log.push([now - started, 0]);
      const seconds = Math.max(1, Math.ceil((1 - s.tokens) / s.capacity));
      res.writeHead(429, { 'Retry-After': String(seconds), 'Content-Type': 'text/plain' });
      res.end('slow down');
      return;
    }
    s.tokens -= 1;
    s.log.push([now - started, 1]);
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ site: name, page: Number(n), items: [`${name}-${n}-a`, `${name}-${n}-b`] }));
  }

  async function body(req: IncomingMessage): Promise<Record<string, unknown>> {
    let text = '';
    for await (const chunk of req) text += chunk;
    const parsed: unknown = JSON.parse(text || '{}');
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://source');
    const parts = url.pathname.split('/').filter(Boolean);
    const answer = (status: number, value: unknown) => {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    if (req.method === 'GET' && parts[0] === 'sites' && parts[2] === 'pages' && parts.length === 4) {
      page(parts[1] as string, parts[3] as string, res);
      return;
    }
    if (parts[0] === 'admin' && parts[1] === 'sites' && parts[2]) {
      const name = parts[2];
      if (req.method === 'GET' && parts[3] === 'stats') return answer(200, stats(name));
      body(req)
        .then((input) => {
          if (req.method === 'PUT' && parts.length === 3 && typeof input.capacity === 'number' && input.capacity > 0) {
            setCapacity(name, input.capacity);
            return answer(200, { capacity: input.capacity });
          }
          if (req.method === 'POST' && parts[3] === 'throttle' && typeof input.retryAfter === 'string') {
            throttleNext(name, input.status === 503 ? 503 : 429, input.retryAfter);
            return answer(202, { queued: true });
          }
          return answer(400, { error: 'bad_request' });
        })
        .catch(() => answer(400, { error: 'bad_request', message: 'the body is not JSON' }));
      return;
    }
    answer(404, { error: 'not_found' });
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    setCapacity,
    throttleNext,
    stats,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
