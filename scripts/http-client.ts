/**
 * A small HTTP client through the local gateway (tests, npm run demo): each caller can
 * send from its own loopback address (127/8 all reaches `lo`), so per-IP
 * limits of one test never count another test's requests.
 */
import { randomInt } from 'node:crypto';
import { request as httpRequest } from 'node:http';

export interface Answer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  json(): Record<string, unknown>;
}

export interface Call {
  readonly method?: string;
  readonly path: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  /** The source address: 127.x.y.z. */
  readonly from?: string;
}

/** A fresh loopback address for one test's client. */
export function loopbackAddress(): string {
  return `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
}

const JSON_TYPE = 'application/json';
const saysItsType = (headers: Record<string, string> | undefined) =>
  Object.keys(headers ?? {}).some((name) => name.toLowerCase() === 'content-type');

export function call(base: string, c: Call): Promise<Answer> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: c.path, // sent as is: a fuzzed path must reach the server unparsed
        method: c.method ?? 'GET',
        headers: {
          ...(c.body === undefined ? {} : { 'content-length': Buffer.byteLength(c.body) }),
          // a body is JSON unless the call says otherwise (login takes nothing else)
          ...(c.body === undefined || saysItsType(c.headers) ? {} : { 'content-type': JSON_TYPE }),
          ...c.headers,
        },
        ...(c.from ? { localAddress: c.from } : {}),
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => {
          const headers: Record<string, string> = {};
          for (const [name, value] of Object.entries(res.headers)) headers[name] = String(value);
          resolve({
            status: res.statusCode ?? 0,
            headers,
            body,
            json: () => JSON.parse(body) as Record<string, unknown>,
          });
        });
      },
    );
    req.on('error', reject);
    if (c.body !== undefined) req.write(c.body);
    req.end();
  });
}
