/**
 * The load generator of `npm run bench:load` / `bench:soak`, in a process of
 * its own (so the platform's process measures only its own CPU): autocannon
 * against one route of the local gateway, each request built fresh (Slack
 * events signed with a new id, Telegram updates with a new update_id).
 * argv[2]: JSON { base, route, connections, seconds, rate?, exact? }. Prints autocannon's
 * result as one JSON line.
 */
import { randomUUID } from 'node:crypto';
import autocannon, { type Instance, type Request, type Result } from 'autocannon';
import { signSlackBody } from '../functions/slack/signature.ts';

export type LoadRoute = 'api-standard' | 'api-partner' | 'login' | 'slack' | 'telegram' | 'llm';

const input = JSON.parse(process.argv[2] ?? '{}') as {
  base: string;
  route: LoadRoute;
  connections: number;
  seconds: number;
  /** A steady rate (requests per second over all connections) instead of as fast as answered. */
  rate?: number;
  /**
   * With a rate: send rate × seconds requests and wait for every answer, so
   * the counts are exact (a run bounded by time stops with requests in flight,
   * answered by the server but not counted here).
   */
  exact?: boolean;
  /** Latency by window of this many seconds, appended to the result as `latencyWindows` (the soak's chart over time). */
  windowSeconds?: number;
};

/** One window of answers: when it began (ms since the driver started) and its latency percentiles. */
export interface LatencyWindow {
  readonly startMs: number;
  readonly count: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

/** The nearest-rank percentile of sorted values. */
function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

/** Ids never reused across runs (each run is a fresh process): a repeated id would be a redelivery, answered without counting. */
let sequence = Date.now() * 1000;
const REQUESTS: Record<LoadRoute, Request> = {
  'api-standard': {
    method: 'GET',
    path: '/v1/whoami',
    headers: { 'x-api-key': 'rk_localDemoStandardKeyNotASecret00' },
  },
  'api-partner': { method: 'GET', path: '/v1/items', headers: { 'x-api-key': 'rk_localDemoPartnerKeyNotASecret000' } },
  login: {
    method: 'POST',
    path: '/auth/login',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'alice@example.com', password: 'not her password' }),
  },
  slack: {
    method: 'POST',
    path: '/webhooks/slack',
    setupRequest: (request) => {
      const body = JSON.stringify({
        type: 'event_callback',
        team_id: `TLOAD${sequence % 50}`,
        event_id: `Ev${randomUUID()}`,
        event: { type: 'message', channel: `C${sequence++ % 500}` },
      });
      return {
        ...request,
        body,
        headers: { 'content-type': 'application/json', ...signSlackBody('local-only-slack-signing-secret', body) },
      };
    },
  },
  telegram: {
    method: 'POST',
    path: '/webhooks/telegram/demo',
    setupRequest: (request) => ({
      ...request,
      body: JSON.stringify({ update_id: sequence++, message: { chat: { id: sequence % 500 }, text: 'load' } }),
      headers: {
        'content-type': 'application/json',
        'X-Telegram-Bot-Api-Secret-Token': 'local-only-telegram-secret-token',
      },
    }),
  },
  llm: {
    method: 'POST',
    path: '/v1/llm/complete',
    headers: { 'content-type': 'application/json', 'x-api-key': 'rk_localDemoPartnerKeyNotASecret000' },
    body: JSON.stringify({ model: 'nova-lite', prompt: 'load', max_tokens: 4 }),
  },
};

const startedAt = Date.now();
const instance = autocannon({
  url: input.base,
  connections: input.connections,
  ...(input.exact && input.rate ? { amount: input.rate * input.seconds } : { duration: input.seconds }),
  requests: [REQUESTS[input.route]],
  ...(input.rate ? { overallRate: input.rate } : {}),
  // without a callback autocannon answers its tracker, an EventEmitter that is also the result's promise
}) as unknown as Instance & PromiseLike<Result>;
const windows: number[][] = [];
const windowMs = (input.windowSeconds ?? 0) * 1000;
if (windowMs > 0) {
  instance.on('response', (_client: unknown, _status: number, _bytes: number, responseTime: number) => {
    const index = Math.floor((Date.now() - startedAt) / windowMs);
    const window = windows[index] ?? [];
    window.push(responseTime);
    windows[index] = window;
  });
}
const result = await instance;
const latencyWindows: LatencyWindow[] = windows.flatMap((times, index) => {
  if (times === undefined) return [];
  const sorted = [...times].sort((a, b) => a - b);
  return [
    { startMs: index * windowMs, count: sorted.length, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99) },
  ];
});
process.stdout.write(`${JSON.stringify(windowMs > 0 ? { ...result, startedAt, latencyWindows } : result)}\n`);
