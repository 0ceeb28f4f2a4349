import type { APIGatewayProxyEvent, APIGatewayProxyEventV2 } from 'aws-lambda';

/** The events the middleware reads: API Gateway REST proxy (v1) and HTTP API (v2). */
export type HttpEvent = APIGatewayProxyEvent | APIGatewayProxyEventV2;

/** The request context, or undefined when the event has none (not an API Gateway event). */
function requestContextOf(event: HttpEvent): Record<string, unknown> | undefined {
  const context = (event as { requestContext?: unknown } | null | undefined)?.requestContext;
  return typeof context === 'object' && context !== null ? (context as Record<string, unknown>) : undefined;
}

export function isHttpApiV2(event: HttpEvent): event is APIGatewayProxyEventV2 {
  const http = requestContextOf(event)?.http;
  return typeof http === 'object' && http !== null;
}

/** The client IP the gateway saw (v1 `identity.sourceIp`, v2 `http.sourceIp`), whatever the event's shape. */
export function gatewaySourceIp(event: HttpEvent): unknown {
  const context = requestContextOf(event);
  const holder = (isHttpApiV2(event) ? context?.http : context?.identity) as { sourceIp?: unknown } | null | undefined;
  return typeof holder === 'object' && holder !== null ? holder.sourceIp : undefined;
}

/** A header, whatever its case (REST keeps the client's case, HTTP API lowercases). */
export function header(event: HttpEvent, name: string): string | undefined {
  const headers = (event as { headers?: unknown } | null | undefined)?.headers;
  if (typeof headers !== 'object' || headers === null) return undefined;
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === wanted) return typeof value === 'string' ? value : undefined;
  }
  return undefined;
}

const parsedBodies = new WeakMap<object, unknown>();

/**
 * The JSON body as an object: already parsed by a body-parser middleware, or
 * parsed here once per event. Undefined when there is none or it is not JSON.
 */
export function jsonBody(event: HttpEvent): unknown {
  if (typeof event !== 'object' || event === null) return undefined;
  const body = (event as { body?: unknown }).body;
  if (body !== null && typeof body === 'object') return body;
  if (typeof body !== 'string' || body === '') return undefined;
  if (parsedBodies.has(event)) return parsedBodies.get(event);
  let parsed: unknown;
  try {
    parsed = JSON.parse(event.isBase64Encoded === true ? Buffer.from(body, 'base64').toString('utf8') : body);
  } catch {
    parsed = undefined;
  }
  parsedBodies.set(event, parsed);
  return parsed;
}
