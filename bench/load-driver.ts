/**
 * The load generator of `npm run bench:load` / `bench:soak`, in a process of
 * its own (so the platform's process measures only its own CPU): autocannon
 * against one route of the local gateway, each request built fresh (Slack
 * events signed with a new id, Telegram updates with a new update_id).
 * argv[2]: JSON { base, route, connections, seconds, rate?, exact? }. Prints autocannon's
 * result as one JSON line.
 */
import { randomUUID } from 'node:crypto';
import autocannon, { type Request } from 'autocannon';
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
};

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

const result = await autocannon({
  url: input.base,
  connections: input.connections,
  ...(input.exact && input.rate ? { amount: input.rate * input.seconds } : { duration: input.seconds }),
  requests: [REQUESTS[input.route]],
  ...(input.rate ? { overallRate: input.rate } : {}),
});
process.stdout.write(`${JSON.stringify(result)}\n`);
