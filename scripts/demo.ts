/**
 * `npm run demo`: the platform at work, one scenario per consumer, played
 * through the real gateway, the Mattermost listener on its socket and the
 * harvester against its source, on a private Redis (stopped for a few
 * seconds in the last scenario). Prints a table and writes
 * `demo-report/index.html`: self-contained (opens from disk, no network),
 * one chart per scenario drawn by Vega-Lite at build time.
 *
 * What each scenario should show is derived from config/policies.json (the
 * limit numbers), never typed twice; "ok" compares what was recorded to it.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TopLevelSpec } from 'vega-lite';
import { PLATFORM_POLICIES } from '../config/catalogue.ts';
import { signSlackBody } from '../functions/slack/signature.ts';
import { crawlChart, renderSvg } from './chart.ts';
import { type Answer, call, loopbackAddress } from './http-client.ts';
import { localStageEnvironment, plainRedisEnvironment } from './local-stage.ts';
import { type RedisProcess, startRedis } from './redis-process.ts';

const ROOT = new URL('..', import.meta.url).pathname;

type Outcome = 'admitted' | 'limited' | 'degraded';

/** An inclusive range of counts a scenario should end with. */
type Range = readonly [number, number];

export interface ScenarioResult {
  readonly id: string;
  readonly title: string;
  /** What the reader should see, in one sentence. */
  readonly story: string;
  readonly counts: Record<Outcome, number>;
  readonly expected: Readonly<Record<Outcome, Range>>;
  readonly ok: boolean;
  /** Each request's time (ms from the scenario's start) and outcome. */
  readonly timeline: readonly { t: number; outcome: Outcome }[];
  /** The limit to draw, in admitted requests. */
  readonly limit?: number;
  readonly chart: string;
}

interface Recorder {
  record(outcome: Outcome): void;
  readonly timeline: { t: number; outcome: Outcome }[];
}

function recorder(): Recorder {
  const started = Date.now();
  const timeline: { t: number; outcome: Outcome }[] = [];
  return { timeline, record: (outcome) => timeline.push({ t: Date.now() - started, outcome }) };
}

function countsOf(timeline: readonly { outcome: Outcome }[]): Record<Outcome, number> {
  const counts = { admitted: 0, limited: 0, degraded: 0 };
  for (const { outcome } of timeline) counts[outcome]++;
  return counts;
}

/** ok: every recorded count inside its expected range. */
export function judge(counts: Record<Outcome, number>, expected: Readonly<Record<Outcome, Range>>): boolean {
  return (Object.keys(expected) as Outcome[]).every(
    (o) => counts[o] >= (expected[o] as Range)[0] && counts[o] <= (expected[o] as Range)[1],
  );
}

const policy = (name: string) => PLATFORM_POLICIES[name] as Record<string, unknown>;
const limitOf = (name: string) => policy(name).limit as number;

/** An HTTP answer as the limiter's outcome: 429 limited, 503 degraded (fail-closed), else admitted. */
function outcomeOf(answer: Answer): Outcome {
  if (answer.status === 429) return 'limited';
  if (answer.status === 503) return 'degraded';
  return 'admitted';
}

async function cumulativeChart(title: string, timeline: readonly { t: number; outcome: Outcome }[], limit?: number) {
  const running = { admitted: 0, limited: 0, degraded: 0 };
  const values = timeline.map(({ t, outcome }) => {
    running[outcome]++;
    return { t: t / 1000, ...running };
  });
  const long = values.flatMap((v) =>
    (['admitted', 'limited', 'degraded'] as const).map((series) => ({ t: v.t, series, value: v[series] })),
  );
  const spec: TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    width: 520,
    height: 200,
    layer: [
      {
        data: { values: long },
        mark: { type: 'line', interpolate: 'step-after' },
        encoding: {
          x: { field: 't', type: 'quantitative', title: 'seconds' },
          y: { field: 'value', type: 'quantitative', title: 'requests so far' },
          color: {
            field: 'series',
            type: 'nominal',
            scale: { domain: ['admitted', 'limited', 'degraded'], range: ['#2ca02c', '#d62728', '#ff7f0e'] },
          },
        },
      },
      ...(limit === undefined
        ? []
        : [
            {
              data: { values: [{ limit }] },
              mark: { type: 'rule' as const, strokeDash: [4, 3], color: '#555' },
              encoding: { y: { field: 'limit', type: 'quantitative' as const } },
            },
          ]),
    ],
  };
  return renderSvg(spec);
}

async function scenario(
  id: string,
  title: string,
  story: string,
  timeline: readonly { t: number; outcome: Outcome }[],
  expected: Record<Outcome, Range>,
  limit?: number,
): Promise<ScenarioResult> {
  const counts = countsOf(timeline);
  return {
    id,
    title,
    story,
    counts,
    expected,
    ok: judge(counts, expected),
    timeline,
    ...(limit === undefined ? {} : { limit }),
    chart: await cumulativeChart(title, timeline, limit),
  };
}

const exactly = (n: number): Range => [n, n];
const none: Range = [0, 0];

export interface DemoOptions {
  /** Where demo-report/ goes. @default the repository */
  readonly outDir?: string;
  /** Shorter timed scenarios (the test's). */
  readonly short?: boolean;
  readonly log?: (line: string) => void;
}

/** What every scenario runs against: the local gateway, the platform's Redis (one scenario stops and restarts it), the options. */
interface DemoStage {
  readonly base: string;
  redis: RedisProcess;
  readonly options: DemoOptions;
}

/** Login brute force from one IP: login-ip refuses past its window's limit. */
async function loginFromOneIp(stage: DemoStage): Promise<ScenarioResult[]> {
  const rec = recorder();
  const from = loopbackAddress();
  const attempts = limitOf('login-ip') + 10;
  for (let i = 0; i < attempts; i++) {
    const answer = await call(stage.base, {
      method: 'POST',
      path: '/auth/login',
      from,
      body: JSON.stringify({ email: `victim${i}@example.com`, password: 'guess' }),
    });
    rec.record(outcomeOf(answer));
  }
  return [
    await scenario(
      'login-ip',
      'Login brute force from one IP',
      `${attempts} wrong passwords from one address: the first ${limitOf('login-ip')} are checked (401), the rest refused (429) for the window.`,
      rec.timeline,
      { admitted: exactly(limitOf('login-ip')), limited: exactly(10), degraded: none },
      limitOf('login-ip'),
    ),
  ];
}

/** Login against one account from many IPs: login-account backs off. */
async function loginAgainstOneAccount(stage: DemoStage): Promise<ScenarioResult[]> {
  const rec = recorder();
  const free = policy('login-account').freeFailures as number;
  for (let i = 0; i < 12; i++) {
    const answer = await call(stage.base, {
      method: 'POST',
      path: '/auth/login',
      from: loopbackAddress(),
      body: JSON.stringify({ email: 'bob@example.com', password: `guess ${i}` }),
    });
    rec.record(outcomeOf(answer));
  }
  return [
    await scenario(
      'login-account',
      'Login against one account from 12 IPs',
      `Per-IP limits cannot stop a distributed guess; the account's backoff can: ${free} free failures, then a pause that doubles.`,
      rec.timeline,
      { admitted: [free + 1, free + 2], limited: [12 - free - 2, 12 - free - 1], degraded: none },
      free + 1,
    ),
  ];
}

/** An API key over its role's quota, and a partner key with a per-key override. */
async function apiKeysOverQuota(stage: DemoStage): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = [];
  for (const [key, label, capacity] of [
    ['rk_localDemoStandardKeyNotASecret00', 'standard key (api-key)', policy('api-key').capacity as number],
    ['rk_localDemoPremiumKeyNotASecret000', 'key with a per-key override (capacity 1200)', 1200],
  ] as const) {
    const rec = recorder();
    const requests = (policy('api-key').capacity as number) + 30;
    const started = Date.now();
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        for (let i = 0; i < requests / 10; i++) {
          rec.record(
            outcomeOf(
              await call(stage.base, { path: '/v1/whoami', from: loopbackAddress(), headers: { 'x-api-key': key } }),
            ),
          );
        }
      }),
    );
    const refill = Math.ceil(((Date.now() - started) / 60_000) * 60) + 1; // 60 per minute
    const admitted: Range = capacity >= requests ? exactly(requests) : [capacity, capacity + refill];
    results.push(
      await scenario(
        `api-${key}`,
        `Public API: ${label}`,
        capacity >= requests
          ? `${requests} calls, all within the override's quota.`
          : `${requests} calls at once: the bucket's ${capacity} (plus what refills meanwhile) pass, the rest get 429 with Retry-After.`,
        rec.timeline,
        {
          admitted,
          limited: capacity >= requests ? none : [requests - admitted[1], requests - admitted[0]],
          degraded: none,
        },
        capacity >= requests ? undefined : capacity,
      ),
    );
  }
  return results;
}

/** Slack: a flood on one channel beside a quiet one. */
async function slackFloodedChannel(stage: DemoStage): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = [];
  for (const [channel, count] of [
    ['CFLOOD', limitOf('slack-channel') + 20],
    ['CQUIET', 5],
  ] as const) {
    const rec = recorder();
    const from = loopbackAddress();
    for (let i = 0; i < count; i++) {
      const body = JSON.stringify({
        type: 'event_callback',
        team_id: 'TDEMO',
        event_id: `Ev${randomUUID().slice(0, 12)}`,
        event: { type: 'message', channel },
      });
      const headers = signSlackBody('local-only-slack-signing-secret', body);
      rec.record(outcomeOf(await call(stage.base, { method: 'POST', path: '/webhooks/slack', from, body, headers })));
    }
    const limit = limitOf('slack-channel');
    results.push(
      await scenario(
        `slack-${channel}`,
        `Slack: ${channel === 'CFLOOD' ? 'a flooded channel' : 'a quiet channel of the same workspace'}`,
        channel === 'CFLOOD'
          ? `${count} events on one channel: ${limit} a minute pass, the rest get 429 + X-Slack-No-Retry (dropped, counted).`
          : 'The flood next door does not touch it.',
        rec.timeline,
        channel === 'CFLOOD'
          ? { admitted: exactly(limit), limited: exactly(count - limit), degraded: none }
          : { admitted: exactly(count), limited: none, degraded: none },
        channel === 'CFLOOD' ? limit : undefined,
      ),
    );
  }
  return results;
}

/** Telegram: a flood in one chat. */
async function telegramFloodedChat(stage: DemoStage): Promise<ScenarioResult[]> {
  const rec = recorder();
  const from = loopbackAddress();
  const limit = limitOf('telegram-chat');
  const count = limit + 20;
  for (let i = 0; i < count; i++) {
    const body = JSON.stringify({
      update_id: Date.now() * 1000 + i,
      message: { chat: { id: 777 }, text: `spam ${i}` },
    });
    const headers = { 'X-Telegram-Bot-Api-Secret-Token': 'local-only-telegram-secret-token' };
    rec.record(
      outcomeOf(await call(stage.base, { method: 'POST', path: '/webhooks/telegram/demo', from, body, headers })),
    );
  }
  return [
    await scenario(
      'telegram',
      'Telegram: a flooded chat',
      `${count} updates from one chat: ${limit} a minute pass; the 429s make Telegram deliver the rest later (nothing lost).`,
      rec.timeline,
      { admitted: exactly(limit), limited: exactly(count - limit), degraded: none },
      limit,
    ),
  ];
}

/** Mattermost: a channel flood, read from the WebSocket. */
async function mattermostFloodedChannel(_stage: DemoStage): Promise<ScenarioResult[]> {
  const { startMattermostServer } = await import('./mattermost-server.ts');
  const { MattermostListener } = await import('../functions/mattermost-listener/listener.ts');
  const { platform } = await import('../functions/shared/platform.ts');
  const mattermost = await startMattermostServer();
  const parts = platform();
  const listener = new MattermostListener({
    url: mattermost.url,
    token: mattermost.token,
    limiter: parts.limiter,
    once: parts.acceptedOnce,
    sink: parts.sink,
    logger: { info: () => {}, warn: () => {} },
  });
  await listener.start();
  const rec = recorder();
  const limit = limitOf('mattermost-channel');
  const count = limit + 20;
  const channel = `flood${Date.now().toString(36)}`;
  for (let i = 0; i < count; i++) mattermost.post(channel, `spam ${i}`);
  // Posts are decided concurrently: record what each poll of the summary adds.
  const recorded = { admitted: 0, limited: 0 };
  while (recorded.admitted + recorded.limited < count) {
    const s = listener.summary.get(channel);
    const now = {
      admitted: s?.admitted ?? 0,
      limited: (s?.refused ?? 0) + (s?.expired ?? 0) + (s?.overflow ?? 0) + (s?.unsunk ?? 0),
    };
    for (const outcome of ['admitted', 'limited'] as const) {
      for (; recorded[outcome] < now[outcome]; recorded[outcome]++) rec.record(outcome);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await listener.stop();
  await mattermost.close();
  return [
    await scenario(
      'mattermost',
      'Mattermost: a flooded channel (WebSocket)',
      `${count} posts on one channel: ${limit} a minute are processed, the rest refused, each counted and logged by id.`,
      rec.timeline,
      { admitted: exactly(limit), limited: exactly(count - limit), degraded: none },
      limit,
    ),
  ];
}

/** The harvester meets a source whose capacity halves. */
async function harvesterFollowsSource(stage: DemoStage): Promise<ScenarioResult[]> {
  const { startHarvestSource } = await import('./harvest-source.ts');
  const seconds = stage.options.short ? 8 : 16;
  const capacity = 10;
  const source = await startHarvestSource({ capacity: { demo: capacity } });
  const { runHarvest } = await import('../functions/harvester/job.ts');
  const until = Date.now() + seconds * 1000;
  const halve = setTimeout(() => source.setCapacity('demo', capacity / 2), (seconds / 2) * 1000);
  await Promise.all([0, 1].map(() => runHarvest({ source: source.url, site: 'demo', until })));
  clearTimeout(halve);
  const { log: requests } = source.stats('demo');
  await source.close();
  const timeline = requests.map(([t, ok]) => ({ t, outcome: (ok === 1 ? 'admitted' : 'limited') as Outcome }));
  const counts = countsOf(timeline);
  const offered = capacity * (seconds / 2) + (capacity / 2) * (seconds / 2);
  const perSecond = Array.from({ length: seconds }, (_, s) => {
    const inSecond = requests.filter(([t]) => t >= s * 1000 && t < (s + 1) * 1000);
    return {
      second: s,
      served: inSecond.filter(([, ok]) => ok === 1).length,
      refused: inSecond.filter(([, ok]) => ok === 0).length,
      capacity: s < seconds / 2 ? capacity : capacity / 2,
    };
  });
  const expected = {
    admitted: [Math.floor(offered * 0.6), Math.ceil(offered * 1.2) + capacity] as Range,
    limited: [0, Math.ceil(timeline.length * 0.1)] as Range,
    degraded: none,
  };
  return [
    {
      id: 'harvester',
      title: 'Harvester: a source whose capacity halves',
      story: `Two workers share one adaptive rate per site: they climb to the source's hidden capacity (${capacity}/s), back off on its 429s, and follow it down to ${capacity / 2}/s.`,
      counts,
      expected,
      ok: judge(counts, expected),
      timeline,
      chart: await crawlChart('Harvester: requests per second against the source capacity', perSecond, 520),
    },
  ];
}

/** Redis stopped for a few seconds: fail-closed login answers 503, the fail-open API keeps serving. */
async function redisStopped(stage: DemoStage): Promise<ScenarioResult[]> {
  const seconds = stage.options.short ? 3 : 6;
  const login = recorder();
  const api = recorder();
  const started = Date.now();
  const outage = (async () => {
    await new Promise((resolve) => setTimeout(resolve, (seconds * 1000) / 3));
    await stage.redis.stop(true);
    await new Promise((resolve) => setTimeout(resolve, (seconds * 1000) / 3));
    stage.redis = await stage.redis.restart();
  })();
  // the user's browser keeps its device cookie, as a browser does: a success clears nothing, so logins without
  // one would soon wait the account's backoff; with it each counts on its own (new) device
  let cookie: string | undefined;
  while (Date.now() - started < seconds * 1000 + 1000) {
    const l = await call(stage.base, {
      method: 'POST',
      path: '/auth/login',
      from: loopbackAddress(),
      body: JSON.stringify({ email: 'alice@example.com', password: 'correct horse battery staple' }),
      ...(cookie ? { headers: { Cookie: cookie } } : {}),
    });
    login.record(outcomeOf(l));
    const set = l.headers['set-cookie'] as string | string[] | undefined;
    if (set) cookie = String(Array.isArray(set) ? set[0] : set).split(';')[0];
    const a = await call(stage.base, {
      path: '/v1/whoami',
      from: loopbackAddress(),
      headers: { 'x-api-key': 'rk_localDemoPartnerKeyNotASecret000' },
    });
    // Served without RateLimit headers: the limiter could not decide and the API failed open.
    api.record(a.status === 200 && a.headers.ratelimit === undefined ? 'degraded' : outcomeOf(a));
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await outage;
  const n = login.timeline.length;
  return [
    await scenario(
      'redis-down-login',
      'Redis stopped: login (fail-closed)',
      `Redis stopped for ${seconds / 3} s: login answers 503 with Retry-After instead of guessing, and decides again once Redis is back.`,
      login.timeline,
      { admitted: [1, n], limited: none, degraded: [1, n] },
    ),
    await scenario(
      'redis-down-api',
      'Redis stopped: public API (fail-open)',
      'Same outage: the API keeps serving (counted as degraded), never a 5xx.',
      api.timeline,
      { admitted: [1, n], limited: none, degraded: [1, n] },
    ),
  ];
}

/** The scenarios, in the order the report shows them. */
const SCENARIOS: readonly ((stage: DemoStage) => Promise<ScenarioResult[]>)[] = [
  loginFromOneIp,
  loginAgainstOneAccount,
  apiKeysOverQuota,
  slackFloodedChannel,
  telegramFloodedChat,
  mattermostFloodedChannel,
  harvesterFollowsSource,
  redisStopped,
];

export async function runDemo(options: DemoOptions = {}): Promise<{ results: ScenarioResult[]; report: string }> {
  const log = options.log ?? ((line: string) => console.log(line));
  const redis = await startRedis();
  const work = mkdtempSync(join(tmpdir(), 'rl-demo-'));
  writeFileSync(join(work, 'parameters.json'), readFileSync(join(ROOT, 'config/local-parameters.json')));
  Object.assign(process.env, {
    ...plainRedisEnvironment(redis.url, { withoutAuth: true }), // its own plain Redis: no user
    ...localStageEnvironment({ parametersFile: join(work, 'parameters.json'), sinkFile: join(work, 'events.jsonl') }),
    POWERTOOLS_LOG_LEVEL: 'ERROR',
    POWERTOOLS_METRICS_DISABLED: 'true',
  });
  // imported once the environment above is set: the platform reads it when first made
  const { startGateway, closeAllPlatforms } = await import('./gateway.ts');
  const gateway = await startGateway({ port: 0 });
  const stage: DemoStage = { base: gateway.url, redis, options };
  const results: ScenarioResult[] = [];
  try {
    log(`demo: gateway ${stage.base}, Redis ${redis.url}`);

    for (const run of SCENARIOS) results.push(...(await run(stage)));
  } finally {
    await gateway.close();
    closeAllPlatforms();
    await stage.redis.stop();
  }

  const outDir = join(options.outDir ?? ROOT, 'demo-report');
  mkdirSync(outDir, { recursive: true });
  const report = join(outDir, 'index.html');
  writeFileSync(report, html(results));
  log(table(results));
  log(`report: ${report}`);
  return { results, report };
}

export function table(results: readonly ScenarioResult[]): string {
  const range = ([a, b]: Range) => (a === b ? String(a) : `${a}–${b}`);
  const rows = results.map((r) => [
    r.title,
    String(r.timeline.length),
    String(r.counts.admitted),
    String(r.counts.limited),
    String(r.counts.degraded),
    `${range(r.expected.admitted)} / ${range(r.expected.limited)} / ${range(r.expected.degraded)}`,
    r.ok ? 'ok' : 'NOT OK',
  ]);
  const head = ['scenario', 'requests', 'admitted', 'limited', 'degraded', 'expected (a / l / d)', 'ok'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => c.padEnd(widths[i] as number)).join('  ');
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c] as string);

function html(results: readonly ScenarioResult[]): string {
  const rows = results
    .map(
      (r) =>
        `<tr class="${r.ok ? 'ok' : 'bad'}"><td>${escapeHtml(r.title)}</td><td>${r.timeline.length}</td><td>${r.counts.admitted}</td><td>${r.counts.limited}</td><td>${r.counts.degraded}</td><td>${r.ok ? 'ok' : 'NOT OK'}</td></tr>`,
    )
    .join('\n');
  const sections = results
    .map(
      (r) =>
        `<section class="scenario" id="${escapeHtml(r.id)}"><h2>${escapeHtml(r.title)}</h2><p>${escapeHtml(r.story)}</p><p class="counts">admitted ${r.counts.admitted} · limited ${r.counts.limited} · degraded ${r.counts.degraded} — ${r.ok ? 'as expected' : 'NOT as expected'}</p><figure class="chart">${r.chart}</figure></section>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Rate limiter demo</title>
<style>
body { font: 15px/1.5 system-ui, sans-serif; max-width: 960px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; } td, th { padding: .25em .75em; border-bottom: 1px solid #ddd; text-align: right; }
td:first-child, th:first-child { text-align: left; } tr.bad td { color: #b00; font-weight: bold; }
section { margin: 2em 0; } .counts { color: #555; } figure { margin: 0; }
</style></head><body>
<h1>The rate limiter at work</h1>
<p>Each scenario below was played against the local platform (the same handlers as in Lambda, a real Redis) by <code>npm run demo</code>, ${escapeHtml(new Date().toISOString())}. Green lines are requests admitted, red ones refused by a limit, orange ones answered while Redis could not decide; the dashed line is the limit.</p>
<table><thead><tr><th>scenario</th><th>requests</th><th>admitted</th><th>limited</th><th>degraded</th><th>ok</th></tr></thead><tbody>
${rows}
</tbody></table>
${sections}
</body></html>
`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { results } = await runDemo();
  process.exit(results.every((r) => r.ok) ? 0 : 1);
}
