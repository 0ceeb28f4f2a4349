import type { APIGatewayProxyEvent, APIGatewayProxyEventV2 } from 'aws-lambda';

/** The events the middleware reads: API Gateway REST proxy (v1) and HTTP API (v2). */
export type HttpEvent = APIGatewayProxyEvent | APIGatewayProxyEventV2;

export function isHttpApiV2(event: HttpEvent): event is APIGatewayProxyEventV2 {
  return 'http' in event.requestContext;
}

/** A header, whatever its case (REST keeps the client's case, HTTP API lowercases). */
export function header(event: HttpEvent, name: string): string | undefined {
  const headers = event.headers ?? {};
  const direct = headers[name] ?? headers[name.toLowerCase()];
  if (direct !== undefined) return direct;
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === wanted) return value;
  return undefined;
}

const parsedBodies = new WeakMap<object, unknown>();

/**
 * The JSON body as an object: already parsed by a body-parser middleware, or
 * parsed here once per event. Undefined when there is none or it is not JSON.
 */
export function jsonBody(event: HttpEvent): unknown {
  const body = (event as { body?: unknown }).body;
  if (body !== null && typeof body === 'object') return body;
  if (typeof body !== 'string' || body === '') return undefined;
  if (parsedBodies.has(event)) return parsedBodies.get(event);
  let parsed: unknown;
  try {
    parsed = JSON.parse(event.isBase64Encoded ? Buffer.from(body, 'base64').toString('utf8') : body);
  } catch {
    parsed = undefined;
  }
  parsedBodies.set(event, parsed);
  return parsed;
}
