/**
 * The local gateway: what API Gateway does in AWS, for machines without Docker.
 * It mounts functions/routes.ts (the table the CDK app reads), applies the
 * outer line of config/outer-line.json (stage throttle, per-IP rate rule)
 * before any handler, and calls each handler in-process with the REST API (v1)
 * proxy event API Gateway would send: the client IP from the socket, the raw
 * body, headers as sent. `node scripts/gateway.ts` runs it alone (PORT, default
 * 3000; REDIS_URL); `npm start` runs it beside its own durable Redis.
 * GATEWAY_TRUSTED_PROXY names a proxy of ours (nginx) whose X-Real-IP is believed.
 */

import { randomUUID } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { type AddressInfo, isIP } from 'node:net';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { type OuterLine, readOuterLine, type Throttle } from '../config/outer-line.ts';
import { type HttpMethod, type Route, routes } from '../functions/routes.ts';
import { PLATFORM_MADE, type Platform } from '../functions/shared/platform.ts';

/**
 * Every platform the handlers of this process made, whichever copy of
 * functions/shared/platform.ts made it (each bundle has its own): closed with
 * the last gateway. The registry lives here, not in the functions.
 */
/** The timeout the local gateway gives every route, as the CDK app does (its remaining-time signal counts down from it). */
const LOCAL_TIMEOUT_MS = 10_000;

const platforms = new Set<Platform>();
(process as EventEmitter).on(PLATFORM_MADE, (made: Platform) => platforms.add(made));

/** Closes the Redis connection of every platform in this process. */
export function closeAllPlatforms(): void {
  for (const p of platforms) p.redis.disconnect();
  platforms.clear();
}

type Handler = (event: APIGatewayProxyEvent, context: Context) => Promise<APIGatewayProxyResult>;

const MAX_BODY_BYTES = 1024 * 1024;

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
  #refilledAt = performance.now();

  constructor(throttle: Throttle) {
    this.#throttle = throttle;
    this.#tokens = throttle.burstLimit;
  }

  take(now: number): boolean {
    const { rateLimit, burstLimit } = this.#throttle;
    this.#tokens = Math.min(burstLimit, this.#tokens + ((now - this.#refilledAt) / 1000) * rateLimit);
    this.#refilledAt = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}

/** The outer line, in memory: what API Gateway and WAF do before a function runs. */
class OuterLineGate {
  readonly #line: OuterLine;
  readonly #stage: ThrottleBucket;
  /** A route with a throttle of its own draws from it, not from the stage's (method throttling). */
  readonly #routes = new Map<string, ThrottleBucket>();
  /** Per IP: the times of its requests still in the rule's window, oldest first, from `head` on. */
  readonly #perIp = new Map<string, { times: number[]; head: number }>();

  constructor(line: OuterLine) {
    this.#line = line;
    this.#stage = new ThrottleBucket(line.stageThrottle);
    for (const [route, throttle] of Object.entries(line.routeThrottles ?? {})) {
      this.#routes.set(route, new ThrottleBucket(throttle));
    }
  }

  /** Why this request (to `route`, when it matched one) is refused at the edge, or undefined when it passes. */
  refusal(ip: string, route: string | undefined): string | undefined {
    const now = performance.now();
    const windowMs = this.#line.ipRateRule.evaluationWindowSeconds * 1000;
    // The times only ever grow: drop the expired ones from the front, O(1) amortised per request
    // (filtering the whole window on every request made a busy IP quadratic: found by bench:load).
    const seen = this.#perIp.get(ip) ?? { times: [], head: 0 };
    while (seen.head < seen.times.length && now - (seen.times[seen.head] as number) >= windowMs) seen.head++;
    if (seen.head > 1024 && seen.head * 2 > seen.times.length) {
      seen.times = seen.times.slice(seen.head);
      seen.head = 0;
    }
    this.#perIp.set(ip, seen);
    if (seen.times.length - seen.head >= this.#line.ipRateRule.limit) return 'ip-rate-rule';
    const own = route === undefined ? undefined : this.#routes.get(route);
    if (!(own ?? this.#stage).take(now)) return own ? 'route-throttle' : 'stage-throttle';
    seen.times.push(now);
    return undefined;
  }
}

/**
 * The client IP, as API Gateway puts it in the request context: the TCP peer.
 * Behind a proxy of our own (nginx, GATEWAY_TRUSTED_PROXY=127.0.0.1), the
 * peer is the proxy, so its X-Real-IP is taken, from that peer only: a client
 * that sends X-Real-IP itself is not believed (as API Gateway believes
 * CloudFront, not the client).
 */
export function sourceIp(request: IncomingMessage): string {
  const raw = request.socket.remoteAddress ?? '127.0.0.1';
  const peer = raw.startsWith('::ffff:') ? raw.slice(7) : raw;
  const realIp = request.headers['x-real-ip'];
  if (peer === process.env.GATEWAY_TRUSTED_PROXY && typeof realIp === 'string' && isIP(realIp)) return realIp;
  return peer;
}

/** The REST API (v1) proxy event API Gateway sends a route's function (also the synthesized app's test gateway's). */
export function restEvent(
  request: IncomingMessage,
  route: Pick<Route, 'id' | 'path'>,
  url: URL,
  pathParameters: Record<string, string>,
  body: Buffer,
): APIGatewayProxyEvent {
  const headers: Record<string, string> = {};
  const multiValueHeaders: Record<string, string[]> = {};
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    const name = request.rawHeaders[i] as string;
    const value = request.rawHeaders[i + 1] as string;
    headers[name] = value;
    multiValueHeaders[name] = [...(multiValueHeaders[name] ?? []), value];
  }
  const query: Record<string, string> = {};
  const multiQuery: Record<string, string[]> = {};
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
      identity: { sourceIp: sourceIp(request), userAgent: request.headers['user-agent'] ?? null },
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
  /** Told about every request: route id (or why refused at the edge) and status. */
  readonly onRequest?: (entry: { route: string; status: number }) => void;
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

  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    request.on('end', () => {
      serve(request, response, size, Buffer.concat(chunks)).catch(() => {
        // never let one request take the gateway down
        if (!response.headersSent) answer(response, 500, { message: 'Internal server error' });
      });
    });
  });

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

  async function serve(request: IncomingMessage, response: ServerResponse, size: number, body: Buffer) {
    const url = targetOf(request);
    if (!url) {
      log({ route: 'edge:bad-request', status: 400 });
      return answer(response, 400, { message: 'Bad Request' });
    }
    if (size > MAX_BODY_BYTES) {
      log({ route: 'edge:too-large', status: 413 });
      return answer(response, 413, { message: 'Request Entity Too Large' });
    }
    const edge = gate.refusal(sourceIp(request), mounted.find((entry) => entry.regex.test(url.pathname))?.route.id);
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
      const event = restEvent(request, entry.route, url, params, body);
      // as Lambda gives it: the remaining-time signal counts down from the function's timeout (10 s, infra)
      const deadline = Date.now() + LOCAL_TIMEOUT_MS;
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
  openGateways++;
  const { port } = server.address() as AddressInfo;
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    served: mounted.flatMap((m) => m.route.methods.map((method) => `${method} ${m.route.path}`)),
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      openGateways--;
      if (openGateways > 0) return; // the handlers (and their connections) still serve another gateway
      closeAllPlatforms();
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const gateway = await startGateway({ port: Number(process.env.PORT ?? 3000) });
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
