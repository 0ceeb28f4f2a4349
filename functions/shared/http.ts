import middy, { type MiddlewareObj } from '@middy/core';
import httpErrorHandler from '@middy/http-error-handler';
import { MisconfiguredCheckError } from '@platform/rate-limit';
import {
  clientIp,
  clientIp48,
  type HttpEvent,
  header,
  httpError as jsonHttpError,
  type KeyExtractor,
  MissingKeyError,
  type RouteLimit,
  rateLimit,
} from '@platform/rate-limit/middleware';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import * as v from 'valibot';
import { API_KEY_PEPPER, hashApiKey, isApiKey } from '../../config/api-key.ts';
import type { RoleLimits } from '../../config/api-roles.ts';
import type { KeySource, Route } from '../route.ts';
import { UNHANDLED_ERROR } from './metrics.ts';
import { platform } from './platform.ts';

export type HttpResponse = APIGatewayProxyResult;
export type RestEvent = APIGatewayProxyEvent;

/** A JSON answer. */
export function json(statusCode: number, body: unknown, headers: Record<string, string> = {}): HttpResponse {
  return { statusCode, headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) };
}

/** A 4xx (or 503) to throw: the error handler answers it as JSON, with its headers, and no stack (the layer's error: one shape for every answer). */
export function httpError(statusCode: number, error: string, message: string, headers: Record<string, string> = {}) {
  return jsonHttpError(statusCode, { error, message }, headers);
}

const ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A sender's id (workspace, channel, event, bot, chat) that may become part of a Redis key, or a 400. */
export function safeId(value: unknown, what: string): string {
  const text = typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : value;
  if (typeof text !== 'string' || !ID.test(text))
    throw httpError(400, 'bad_request', `${what} is missing or malformed`);
  return text;
}

/** A sender's id in a body schema: a safe integer or a short id string, as a string fit for a Redis key. */
export const SenderId = v.pipe(
  v.union([v.pipe(v.number(), v.safeInteger(), v.transform(String)), v.string()]),
  v.regex(ID),
);

/** The body as sent: API Gateway passes binary bodies base64-encoded. */
export function rawBody(event: RestEvent): string {
  const body = typeof event.body === 'string' ? event.body : '';
  return event.isBase64Encoded === true ? Buffer.from(body, 'base64').toString('utf8') : body;
}

/** How large and how deeply nested a JSON body may be before it is parsed. */
export interface JsonBounds {
  readonly maxBytes: number;
  readonly maxDepth: number;
}

/**
 * Whether a JSON text nests deeper than `maxDepth` (objects and arrays), by
 * one linear scan without recursion, strings skipped: a body 200,000 levels
 * deep parses (V8's parser is iterative) but overflows the stack of anything
 * that walks it after (JSON.stringify in the sink), so it is refused unparsed.
 */
export function nestsDeeperThan(text: string, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/**
 * Why a body is out of bounds (`too-large`: past `maxBytes` as UTF-8;
 * `too-deep`: nested past `maxDepth`), or undefined when it is within them.
 * The size is known from the string's length before any byte is counted.
 */
export function outOfBounds(event: RestEvent, bounds: JsonBounds): 'too-large' | 'too-deep' | undefined {
  const sent = typeof event.body === 'string' ? event.body : '';
  // base64 is 4 characters per 3 bytes; UTF-16 length never exceeds the UTF-8 byte count
  const atLeast = event.isBase64Encoded === true ? Math.floor((sent.length * 3) / 4) - 2 : sent.length;
  if (atLeast > bounds.maxBytes) return 'too-large';
  const body = rawBody(event);
  if (Buffer.byteLength(body) > bounds.maxBytes) return 'too-large';
  return nestsDeeperThan(body, bounds.maxDepth) ? 'too-deep' : undefined;
}

/** `application/json`, with or without parameters (`; charset=utf-8`), in any case. */
const JSON_MEDIA_TYPE = /^application\/json\s*(;.*)?$/i;

/**
 * A body sent as JSON, or a 415 before anything is counted. A page on
 * another site can make a browser send a "simple" request (text/plain, a
 * form) with no CORS preflight, carrying the visitor's IP and cookies; a
 * JSON one needs a preflight, which no route answers. So a route that counts
 * the visitor's own limits (login: its IP windows, its device) takes only
 * JSON: a drive-by page cannot spend them, nor set a cookie through them.
 */
export const jsonRequestsOnly: MiddlewareObj<HttpEvent> = {
  before: function jsonRequestsOnlyBefore(request) {
    const type = header(request.event, 'content-type');
    if (type === undefined || !JSON_MEDIA_TYPE.test(type.trim())) {
      throw httpError(415, 'unsupported_media_type', 'Send the body as JSON (Content-Type: application/json).');
    }
  },
};

/** The body as a JSON object, or a 400 saying it is not one. */
export function jsonObjectBody(event: RestEvent): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(rawBody(event));
  } catch {
    value = undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw httpError(400, 'bad_request', 'the body is not a JSON object');
  }
  return value as Record<string, unknown>;
}

/**
 * The body read through its schema: the typed value, or a 400 naming the
 * first field that does not fit (never what was sent in it). Every body a
 * handler reads goes through one, so a field of the wrong type (an object
 * where a string belongs, a prototype name) is a 400, signed or not.
 */
export function parseBody<const S extends v.GenericSchema>(
  event: RestEvent,
  schema: S,
  describe: (field: string) => string = (field) => `${field} is missing or malformed`,
): v.InferOutput<S> {
  const result = v.safeParse(schema, jsonObjectBody(event));
  if (result.success) return result.output;
  const issue = result.issues[0];
  throw httpError(400, 'bad_request', describe(v.getDotPath(issue) ?? 'the body'));
}

function keyFrom(source: KeySource): KeyExtractor {
  switch (source.from) {
    case 'clientIp':
      return clientIp;
    case 'clientIp48':
      return clientIp48;
    case 'apiKey':
      // the key's keyed hash (never the key, nor a hash a dump could match without the pepper)
      return (event) => {
        const key = header(event, source.header)?.trim();
        if (!key || !isApiKey(key)) throw new MissingKeyError(`the request has no well-formed ${source.header} header`);
        const pepper = platform().policies.secret(API_KEY_PEPPER);
        if (!pepper) throw new MisconfiguredCheckError('no API key pepper (secrets/api/api-key-pepper)');
        return hashApiKey(key, pepper);
      };
    case 'pathParameter':
      return (event) => {
        const params = (event as RestEvent).pathParameters;
        // own properties only: a parameter name is never an inherited member (`constructor`)
        const value = params && Object.hasOwn(params, source.name) ? params[source.name] : undefined;
        if (typeof value !== 'string' || !ID.test(value)) throw new MissingKeyError(`the path has no ${source.name}`);
        return value;
      };
  }
}

export interface RouteOptions<C extends Context> {
  /**
   * Middlewares that run after configuration is ready and before the rate
   * limit (an API key's auth); what they find they put on the context, typed `C`.
   */
  // biome-ignore lint/suspicious/noExplicitAny: Middy's result type of a middleware that never answers
  readonly before?: readonly MiddlewareObj<HttpEvent, any, Error, C>[];
  /** The limits of the caller's role (a `byRole` limit), from what an earlier middleware put on the context. */
  readonly roleLimits?: (event: HttpEvent, context: C) => RoleLimits;
}

/**
 * Every invocation ends by publishing what the observer holds if it is due
 * (OBSERVER_BATCHING: a degraded check, or a batch 10 s old), however it ends,
 * including what a handler checked itself (the LLM budget, a webhook's
 * workspace and channel); otherwise the checks wait for a later invocation's
 * line, so a busy container writes one EMF line per 100 checks, not per check.
 */
const metricsFlush: MiddlewareObj<HttpEvent> = {
  after: function metricsFlushAfter() {
    platform().observer.flushIfDue();
  },
  onError: function metricsFlushOnError() {
    platform().observer.flushIfDue();
  },
};

/** Cold start: wait for the Redis credentials and (at most 2 s) for SSM's overrides before the first check. */
const policiesReady: MiddlewareObj<HttpEvent> = {
  before: async function policiesReadyBefore() {
    const { ready, policies } = platform();
    await Promise.all([ready, policies.ready()]);
  },
};

/**
 * The house handler: the Middy stack every HTTP consumer shares, built from
 * its row of the route table. Error handler first (its onError answers every
 * thrown HTTP error, and a generic 500 without a stack for anything else),
 * then configuration, the consumer's own middlewares, and the route's limits.
 */
export function routeHandler<C extends Context = Context>(
  route: Route,
  handler: (event: RestEvent, context: C) => Promise<HttpResponse>,
  options: RouteOptions<C> = {},
) {
  const { id } = route;
  const p = platform();
  const limits: RouteLimit[] = route.limits.map((spec) => {
    if (typeof spec.policy === 'string') return { policy: spec.policy, key: keyFrom(spec.key) };
    const { roleLimits } = options;
    if (!roleLimits) throw new Error(`route "${id}" limits by role: its handler must say where the role's limits are`);
    const part = spec.policy.byRole;
    return {
      policy: (event: HttpEvent, context: Context) => roleLimits(event, context as C)[part],
      key: keyFrom(spec.key),
    };
  });
  const stack = middy<HttpEvent, HttpResponse>(handler as (event: HttpEvent, context: Context) => Promise<HttpResponse>)
    .use(
      httpErrorHandler({
        // HTTP errors are answers (400, 429, 503), not faults: only the rest is logged, without the event
        logger: (error: Error) => {
          const http = error as Error & { statusCode?: number; expose?: boolean };
          if (!http.statusCode || !http.expose) {
            p.logger.error(UNHANDLED_ERROR.message, { route: id, error: String(error) });
          }
        },
        fallbackMessage: JSON.stringify({ error: 'internal', message: 'Something went wrong.' }),
      }),
    )
    .use(metricsFlush)
    .use(policiesReady);
  for (const middleware of options.before ?? []) stack.use(middleware as MiddlewareObj<HttpEvent>);
  const scope = route.scope === undefined ? undefined : keyFrom(route.scope);
  if (limits.length > 0)
    stack.use(rateLimit({ limiter: p.limiter, limits, observer: p.observer, ...(scope ? { scope } : {}) }));
  return stack;
}
