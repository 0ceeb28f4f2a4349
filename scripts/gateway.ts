/**
 * The local gateway: what API Gateway does in AWS, for machines without Docker.
 * It mounts functions/routes.ts (the table the CDK app reads), applies the
 * outer line of config/outer-line.json (stage throttle, per-IP rate rule)
 * before any handler, and calls each handler in-process with the REST API (v1)
 * proxy event API Gateway would send: the client IP from the socket, the raw
 * body, headers as sent. `node scripts/gateway.ts` runs it alone (PORT, default
 * 3000; REDIS_URL); `npm start` runs it beside its own durable Redis.
 * GATEWAY_TRUSTED_PROXY names a proxy of ours (nginx) whose X-Real-IP is
 * believed: a dedicated address nginx binds to (`proxy_bind 127.0.0.2`), never
 * 127.0.0.1 or ::1, the address every local client connects from. Or
 * GATEWAY_PROXY_SOCKET: a unix socket (mode 0660) the proxy connects over
 * (`proxy_pass http://unix:<path>:`), whose X-Real-IP is believed.
 */

import { randomUUID } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { chmodSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { type AddressInfo, isIP, type Socket } from 'node:net';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { localPortSetting } from '../config/local-data.ts';
import { type OuterLine, readOuterLine, type Throttle } from '../config/outer-line.ts';
import { type HttpMethod, type Route, routes } from '../functions/routes.ts';
import { PLATFORM_MADE, type Platform } from '../functions/shared/platform.ts';

/**
 * Every platform the handlers of this process made, whichever copy of
 * functions/shared/platform.ts made it (each bundle has its own): closed with
 * the last gateway. The registry lives here, not in the functions.
 */
/** The timeout the local gateway gives a route naming none (`timeoutSeconds`), as the CDK app does (its remaining-time signal counts down from it). */
const LOCAL_TIMEOUT_MS = 10_000;

const platforms = new Set<Platform>();
(process as EventEmitter).on(PLATFORM_MADE, (made: Platform) => platforms.add(made));

/** Closes the Redis connection of every platform in this process. */
export function closeAllPlatforms(): void {
  for (const p of platforms) {
    p.redis.disconnect();
    p.homeRedis?.disconnect();
  }
  platforms.clear();
}

type Handler = (event: APIGatewayProxyEvent, context: Context) => Promise<APIGatewayProxyResult>;

/** The largest body the gateway takes (API Gateway's is 10 MB; the consumers need far less). */
export const MAX_BODY_BYTES = 1024 * 1024;

/** How long a refused upload's connection is kept, unread, so its client reads the 413 before the reset. */
const REFUSED_LINGER_MS = 1000;

/** Addresses every local client connects from by default: a proxy there would let any of them pick its IP. */
const SHARED_LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/**
 * The trusted proxy's address from GATEWAY_TRUSTED_PROXY, or undefined when
 * none; a shared loopback address or a non-address is a setting error, not a
 * silently trusted world.
 */
export function trustedProxyOf(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (isIP(value) === 0) throw new Error(`GATEWAY_TRUSTED_PROXY=${value} is not an IP address`);
  if (SHARED_LOOPBACK.has(value)) {
    throw new Error(
      `GATEWAY_TRUSTED_PROXY=${value} is the address every local client connects from: bind the proxy to a dedicated one (nginx: proxy_bind 127.0.0.2) and name that`,
    );
  }
  return value;
}

/** A route's path as a pattern: `{name}` one segment, `{proxy+}` the rest. */
function matcher(route: Route): { regex: RegExp; names: string[] } {
  const names: string[] = [];
  const pattern = route.path.replace(/\{([A-Za-z0-9]+)(\+?)\}/g, (_, name: string, greedy: string) => {
    names.push(name);
    return greedy ? '(.+)' : '([^/]+)';
  });
  return { regex: new RegExp(`^${pattern}$`), names };
}

/** A token bucket, as API Gateway throttles a stage or a method. */
class ThrottleBucket {
  readonly #throttle: Throttle;
  #tokens: number;
  /** When it was last refilled, on the callers' clock: unset until the first take (it starts full). */
  #refilledAt: number | undefined;

  constructor(throttle: Throttle) {
    this.#throttle = throttle;
    this.#tokens = throttle.burstLimit;
  }

  take(now: number): boolean {
    const { rateLimit, burstLimit } = this.#throttle;
    // a caller's `now` from another clock, or one earlier than the last, refills nothing and drains nothing
    const elapsedMs = Math.max(0, now - (this.#refilledAt ?? now));
    this.#tokens = Math.min(burstLimit, this.#tokens + (elapsedMs / 1000) * rateLimit);
    this.#refilledAt = Math.max(this.#refilledAt ?? now, now);
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}

/**
 * The outer line, in memory: what API Gateway and WAF do before a function runs.
 * Its per-IP state holds only IPs with a request admitted within the rule's
 * window, and is swept once per window: at most the stage's admitted requests
 * of one window, however many addresses send (an IPv6 flood has plenty).
 */
export class OuterLineGate {
  readonly #line: OuterLine;
  readonly #stage: ThrottleBucket;
  /** A route with a throttle of its own draws from it, not from the stage's (method throttling). */
  readonly #routes = new Map<string, ThrottleBucket>();
  /** Per IP: the times of its requests still in the rule's window, oldest first, from `head` on. */
  readonly #perIp = new Map<string, { times: number[]; head: number }>();
  /** When the per-IP state was last swept (the first request starts the clock). */
  #sweptAt: number | undefined;

  constructor(line: OuterLine) {
    this.#line = line;
    this.#stage = new ThrottleBucket(line.stageThrottle);
    for (const [route, throttle] of Object.entries(line.routeThrottles ?? {})) {
      this.#routes.set(route, new ThrottleBucket(throttle));
    }
  }

  /** The bucket of a route: its own from `routeThrottles`, else one of its own at the default, else none (the stage's). */
  #routeBucket(route: string): ThrottleBucket | undefined {
    const known = this.#routes.get(route);
    if (known || !this.#line.defaultRouteThrottle) return known;
    // route ids come from the route table, not the request: the map stays as small as the table
    const made = new ThrottleBucket(this.#line.defaultRouteThrottle);
    this.#routes.set(route, made);
    return made;
  }

  /** Why this request (to `route`, when it matched one) is refused at the edge, or undefined when it passes. */
  refusal(ip: string, route: string | undefined, now = performance.now()): string | undefined {
    const windowMs = this.#line.ipRateRule.evaluationWindowSeconds * 1000;
    this.#sweptAt ??= now;
    if (now - this.#sweptAt >= windowMs) this.#sweep(now, windowMs);
    // The times only ever grow: drop the expired ones from the front, O(1) amortised per request
    // (filtering the whole window on every request made a busy IP quadratic: found by bench:load).
    const seen = this.#perIp.get(ip) ?? { times: [], head: 0 };
    while (seen.head < seen.times.length && now - (seen.times[seen.head] as number) >= windowMs) seen.head++;
    if (seen.head > 1024 && seen.head * 2 > seen.times.length) {
      seen.times = seen.times.slice(seen.head);
      seen.head = 0;
    }
    if (seen.times.length - seen.head >= this.#line.ipRateRule.limit) return 'ip-rate-rule';
    const own = route === undefined ? undefined : this.#routeBucket(route);
    if (!(own ?? this.#stage).take(now)) return own ? 'route-throttle' : 'stage-throttle';
    // only an admitted request makes an entry: refused ones (a throttled flood) leave nothing behind
    seen.times.push(now);
    this.#perIp.set(ip, seen);
    return undefined;
  }

  /** How many IPs the gate holds state for. */
  get trackedIps(): number {
    return this.#perIp.size;
  }

  /** Forgets every IP whose last admitted request left the window: O(IPs), once per window. */
  #sweep(now: number, windowMs: number): void {
    this.#sweptAt = now;
    for (const [ip, seen] of this.#perIp) {
      if (now - (seen.times[seen.times.length - 1] as number) >= windowMs) this.#perIp.delete(ip);
    }
  }
}

/**
 * The client IP, as API Gateway puts it in the request context: the TCP peer.
 * Behind a proxy of our own (nginx bound to a dedicated address,
 * GATEWAY_TRUSTED_PROXY=127.0.0.2), the peer is the proxy, so its X-Real-IP is
 * taken, from that peer only: a client that sends X-Real-IP itself is not
 * believed (as API Gateway believes CloudFront, not the client).
 */
function sourceIp(request: IncomingMessage, trustedProxy: string | undefined, viaProxySocket: boolean): string {
  if (viaProxySocket) {
    // the proxy's own unix socket: only what may open the file (mode 0660) connects, so its X-Real-IP stands
    const forwarded = request.headers['x-real-ip'];
    return typeof forwarded === 'string' && isIP(forwarded) ? forwarded : '127.0.0.1';
  }
  const raw = request.socket.remoteAddress ?? '127.0.0.1';
  const peer = raw.startsWith('::ffff:') ? raw.slice(7) : raw;
  const realIp = request.headers['x-real-ip'];
  if (trustedProxy !== undefined && peer === trustedProxy && typeof realIp === 'string' && isIP(realIp)) return realIp;
  return peer;
}

/**
 * A map without a prototype: a header or query name such as `__proto__`,
 * `constructor` or `toString` is a key like any other, never an inherited
 * member (a `multiValue[name] ?? []` on a plain object once answered 500).
 */
function bare<V>(): Record<string, V> {
  return Object.create(null) as Record<string, V>;
}

/** The REST API (v1) proxy event API Gateway sends a route's function (also the synthesized app's test gateway's). */
export function restEvent(
  request: IncomingMessage,
  route: Pick<Route, 'id' | 'path'>,
  url: URL,
  pathParameters: Record<string, string>,
  body: Buffer,
  clientIp: string,
): APIGatewayProxyEvent {
  const headers = bare<string>();
  const multiValueHeaders = bare<string[]>();
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    const name = request.rawHeaders[i] as string;
    const value = request.rawHeaders[i + 1] as string;
    headers[name] = value;
    multiValueHeaders[name] = [...(multiValueHeaders[name] ?? []), value];
  }
  const query = bare<string>();
  const multiQuery = bare<string[]>();
  for (const [name, value] of url.searchParams) {
    query[name] = value;
    multiQuery[name] = [...(multiQuery[name] ?? []), value];
  }
  const hasQuery = url.searchParams.size > 0;
  const method = request.method ?? 'GET';
  return {
    resource: route.path,
    path: url.pathname,
    httpMethod: method,
    headers,
    multiValueHeaders,
    queryStringParameters: hasQuery ? query : null,
    multiValueQueryStringParameters: hasQuery ? multiQuery : null,
    pathParameters: Object.keys(pathParameters).length ? pathParameters : null,
    stageVariables: null,
    body: body.length ? body.toString('utf8') : null,
    isBase64Encoded: false,
    requestContext: {
      accountId: 'local',
      apiId: 'local',
      authorizer: null,
      protocol: `HTTP/${request.httpVersion}`,
      httpMethod: method,
      identity: { sourceIp: clientIp, userAgent: request.headers['user-agent'] ?? null },
      path: `/local${url.pathname}`,
      stage: 'local',
      requestId: randomUUID(),
      requestTimeEpoch: Date.now(),
      resourceId: route.id,
      resourcePath: route.path,
    } as unknown as APIGatewayProxyEvent['requestContext'],
  };
}

function answer(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  response.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  response.end(typeof body === 'string' ? body : JSON.stringify(body));
}

export interface GatewayOptions {
  readonly port?: number;
  readonly outerLine?: OuterLine;
  /** The module of a route's handler. @default its source under functions/ (the built bundles: npm start -- --bundles) */
  readonly handlerModule?: (route: Route) => URL;
  /** Told about every request: route id (or why refused at the edge), status, and the body bytes read. */
  readonly onRequest?: (entry: { route: string; status: number; bodyBytesRead?: number }) => void;
  /** The proxy whose X-Real-IP is believed. @default GATEWAY_TRUSTED_PROXY (trustedProxyOf) */
  readonly trustedProxy?: string;
  /**
   * A unix socket the gateway also listens on, for the proxy alone (mode
   * 0660: its owner and group): X-Real-IP is believed from connections on it,
   * and no TCP client can reach it. @default GATEWAY_PROXY_SOCKET
   */
  readonly proxySocket?: string;
}

export interface Gateway {
  readonly server: Server;
  readonly url: string;
  /** What it serves: `<method> <path>` of every mounted route. */
  readonly served: readonly string[];
  /** Stops listening; the last gateway of the process also closes the handlers' Redis connections. */
  close(): Promise<void>;
}

/** Gateways of this process still listening: the handlers' connections close with the last. */
let openGateways = 0;

/** Starts the gateway on 127.0.0.1; resolves once it listens. */
export async function startGateway(options: GatewayOptions = {}): Promise<Gateway> {
  const moduleOf =
    options.handlerModule ?? ((route: Route) => new URL(`../functions/${route.handler}`, import.meta.url));
  // as API Gateway: a route without a greedy `{proxy+}` is tried before one with it
  const bySpecificity = [...routes].sort((a, b) => Number(a.path.includes('+}')) - Number(b.path.includes('+}')));
  const mounted = await Promise.all(
    bySpecificity.map(async (route) => {
      const module = (await import(moduleOf(route).href)) as { handler: Handler };
      return { route, handler: module.handler, ...matcher(route) };
    }),
  );
  const outerLine = options.outerLine ?? readOuterLine();
  const gate = new OuterLineGate(outerLine);
  const log = options.onRequest ?? (() => {});
  const trustedProxy = trustedProxyOf(options.trustedProxy ?? process.env.GATEWAY_TRUSTED_PROXY);
  const proxySocket = options.proxySocket ?? (process.env.GATEWAY_PROXY_SOCKET || undefined);
  /** Connections made over the proxy's unix socket. */
  const viaProxy = new WeakSet<Socket>();

  /**
   * A body past the limit is refused as soon as it is known to be (by its
   * Content-Length before any of it is read, or by the byte that crosses the
   * limit): 413, `Connection: close`, nothing more read; the connection is
   * half-closed and reset after a linger, so the sender reads the answer and
   * no more than the limit (plus one chunk) was ever taken in.
   */
  function refuseTooLarge(request: IncomingMessage, response: ServerResponse, bodyBytesRead: number): void {
    request.pause();
    log({ route: 'edge:too-large', status: 413, bodyBytesRead });
    response.shouldKeepAlive = false;
    response.on('finish', () => {
      // Node resumes an unread request once its answer is sent (to drain it): not this one
      request.pause();
      request.socket.pause();
      request.socket.end();
      setTimeout(() => request.socket.destroy(), REFUSED_LINGER_MS).unref();
    });
    answer(response, 413, { message: 'Request Entity Too Large' }, { Connection: 'close' });
  }

  const onRequest = (request: IncomingMessage, response: ServerResponse) => {
    const declared = Number(request.headers['content-length'] ?? 0);
    if (declared > MAX_BODY_BYTES) return refuseTooLarge(request, response, 0);
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    request.on('data', (chunk: Buffer) => {
      if (refused) return;
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      else {
        refused = true;
        chunks.length = 0;
        refuseTooLarge(request, response, size);
      }
    });
    request.on('end', () => {
      if (refused) return;
      serve(request, response, Buffer.concat(chunks)).catch(() => {
        // never let one request take the gateway down
        if (!response.headersSent) answer(response, 500, { message: 'Internal server error' });
      });
    });
  };
  const server = createServer(onRequest);

  /** Parses a request target as API Gateway would see it; undefined when it is not a path. */
  function targetOf(request: IncomingMessage): URL | undefined {
    const target = request.url ?? '/';
    if (!target.startsWith('/')) return undefined;
    try {
      return new URL(`http://localhost${target}`); // not `new URL(target, base)`: '//x' would name a host
    } catch {
      return undefined;
    }
  }

  async function serve(request: IncomingMessage, response: ServerResponse, body: Buffer) {
    const url = targetOf(request);
    if (!url) {
      log({ route: 'edge:bad-request', status: 400 });
      return answer(response, 400, { message: 'Bad Request' });
    }
    const clientIp = sourceIp(request, trustedProxy, viaProxy.has(request.socket));
    const edge = gate.refusal(clientIp, mounted.find((entry) => entry.regex.test(url.pathname))?.route.id);
    if (edge) {
      log({ route: `edge:${edge}`, status: 429 });
      // as the WAF rule's custom response: a 429 with the rule's window as Retry-After (API Gateway's throttles send none)
      const retryAfter: Record<string, string> =
        edge === 'ip-rate-rule' ? { 'Retry-After': String(outerLine.ipRateRule.evaluationWindowSeconds) } : {};
      return answer(response, 429, { message: 'Too Many Requests' }, retryAfter);
    }
    for (const entry of mounted) {
      const match = entry.regex.exec(url.pathname);
      if (!match) continue;
      if (!entry.route.methods.includes(request.method as HttpMethod)) {
        log({ route: entry.route.id, status: 405 });
        return answer(response, 405, { message: 'Method Not Allowed' });
      }
      let params: Record<string, string>;
      try {
        params = Object.fromEntries(entry.names.map((name, i) => [name, decodeURIComponent(match[i + 1] ?? '')]));
      } catch {
        log({ route: entry.route.id, status: 400 });
        return answer(response, 400, { message: 'Bad Request' }); // a malformed %-escape
      }
      const event = restEvent(request, entry.route, url, params, body, clientIp);
      // as Lambda gives it: the remaining-time signal counts down from the function's timeout (10 s or the route's, infra)
      const deadline = Date.now() + (entry.route.timeoutSeconds ? entry.route.timeoutSeconds * 1000 : LOCAL_TIMEOUT_MS);
      const context = {
        functionName: entry.route.id,
        awsRequestId: event.requestContext.requestId,
        getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
      } as Context;
      try {
        const result = await entry.handler(event, context);
        log({ route: entry.route.id, status: result.statusCode });
        return answer(response, result.statusCode, result.body ?? '', (result.headers ?? {}) as Record<string, string>);
      } catch {
        // what API Gateway answers when a function fails: no detail to the caller
        log({ route: entry.route.id, status: 502 });
        return answer(response, 502, { message: 'Internal server error' });
      }
    }
    log({ route: 'none', status: 404 });
    return answer(response, 404, { message: 'Not Found' });
  }
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const proxyServer = proxySocket === undefined ? undefined : createServer(onRequest);
  if (proxyServer && proxySocket !== undefined) {
    proxyServer.on('connection', (socket) => viaProxy.add(socket));
    rmSync(proxySocket, { force: true }); // a socket file left by a gateway that died
    await new Promise<void>((resolve) => proxyServer.listen(proxySocket, resolve));
    chmodSync(proxySocket, 0o660);
  }
  openGateways++;
  const { port } = server.address() as AddressInfo;
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    served: mounted.flatMap((m) => m.route.methods.map((method) => `${method} ${m.route.path}`)),
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      if (proxyServer) await new Promise<void>((resolve) => proxyServer.close(() => resolve()));
      openGateways--;
      if (openGateways > 0) return; // the handlers (and their connections) still serve another gateway
      closeAllPlatforms();
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const gateway = await startGateway({ port: localPortSetting('PORT') ?? 3000 });
  console.log(`gateway listening on ${gateway.url}`);
  const stop = async () => {
    await gateway.close();
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

/** The built bundle of a route (npm run build). */
export function builtHandler(route: Route): URL {
  return new URL(`../dist/functions/${route.id}/handler.mjs`, import.meta.url);
}
