/**
 * `npm run bench:harvester`: the harvester against the AWS SDK's adaptive
 * limiter, side by side in one run. Each contender runs 4 worker processes
 * against one site of a local source (scripts/harvest-source.ts) whose
 * hidden capacity is C, halved at HALVE_AT and doubled back at DOUBLE_AT.
 * Reported per contender: achieved rate / C and the share refused once
 * converged, time to converge, and the recovery after each change; plus a
 * chart (SVG, Vega-Lite) of the rate over time. Results go to bench/results/.
 *
 * The harvester shares one adaptive bucket per site through Redis (policy
 * harvester-source of config/policies.json, max raised above C so AIMD, not
 * the cap, finds the capacity); the SDK's processes each pace themselves.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { crawlChart } from '../scripts/chart.ts';
import { startHarvestSource } from '../scripts/harvest-source.ts';
import { startRedis } from '../scripts/redis-process.ts';

const C = 20;
const WORKERS = 4;
const SECONDS = 60;
const HALVE_AT = 25;
const DOUBLE_AT = 40;
/** A contender has converged once a 3 s average reaches this share of C. */
const CONVERGED = 0.9;

const ROOT = new URL('..', import.meta.url).pathname;
const run = promisify(execFile);

type Contender = 'harvester' | 'sdk-adaptive';

interface Second {
  readonly contender: Contender;
  readonly second: number;
  readonly capacity: number;
  readonly served: number;
  readonly refused: number;
}

const capacityAt = (second: number) => (second >= HALVE_AT && second < DOUBLE_AT ? C / 2 : C);

async function contend(contender: Contender, redisUrl: string): Promise<Second[]> {
  const source = await startHarvestSource({ capacity: { site: C } });
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-harvest-'));
  const parameters = {
    ...(JSON.parse(readFileSync(join(ROOT, 'config/local-parameters.json'), 'utf8')) as Record<string, unknown>),
    '/ratelimit/local/overrides/harvester-source': { adaptive: { max: 50 }, timeBudget: '1 s' },
  };
  writeFileSync(join(dir, 'parameters.json'), JSON.stringify(parameters));
  const env = {
    PATH: process.env.PATH ?? '',
    REDIS_URL: redisUrl,
    RATE_LIMIT_PARAMETER_PATH: '/ratelimit/local',
    RATE_LIMIT_PARAMETERS_FILE: join(dir, 'parameters.json'),
    EVENT_SINK_FILE: join(dir, 'events.jsonl'),
    POWERTOOLS_LOG_LEVEL: 'ERROR',
    POWERTOOLS_METRICS_DISABLED: 'true',
  };
  // The source's log is in ms since it started, as are these timers (within a few ms).
  const halve = setTimeout(() => source.setCapacity('site', C / 2), HALVE_AT * 1000);
  const double = setTimeout(() => source.setCapacity('site', C), DOUBLE_AT * 1000);
  await Promise.all(
    Array.from({ length: WORKERS }, (_, i) =>
      contender === 'harvester'
        ? run(
            process.execPath,
            [
              join(ROOT, 'functions/harvester/run.ts'),
              '--source',
              source.url,
              '--site',
              'site',
              '--seconds',
              String(SECONDS),
            ],
            { env },
          )
        : run(process.execPath, [join(ROOT, 'bench/sdk-worker.ts'), source.url, 'site', String(SECONDS), String(i)], {
            env,
          }),
    ),
  );
  clearTimeout(halve);
  clearTimeout(double);
  const { log } = source.stats('site');
  await source.close();
  const seconds: Second[] = [];
  for (let s = 0; s < SECONDS; s++) {
    const inSecond = log.filter(([t]) => t >= s * 1000 && t < (s + 1) * 1000);
    seconds.push({
      contender,
      second: s,
      capacity: capacityAt(s),
      served: inSecond.filter(([, ok]) => ok === 1).length,
      refused: inSecond.filter(([, ok]) => ok === 0).length,
    });
  }
  return seconds;
}

interface Figures {
  readonly convergeS: number | undefined;
  /** Over [from, to): served / capacity, refused / all requests. */
  readonly steady: { achieved: number; refused: number };
  readonly halved: { refusedRequests: number; recoverS: number | undefined; achieved: number; refused: number };
  readonly doubled: { recoverS: number | undefined; achieved: number; refused: number };
}

function windowOf(seconds: readonly Second[], from: number, to: number) {
  const w = seconds.filter((s) => s.second >= from && s.second < to);
  const served = w.reduce((n, s) => n + s.served, 0);
  const refused = w.reduce((n, s) => n + s.refused, 0);
  const capacity = w.reduce((n, s) => n + s.capacity, 0);
  return { achieved: served / capacity, refused: refused / Math.max(1, served + refused), refusedRequests: refused };
}

/** Seconds from `from` until a 3 s average of served reaches CONVERGED × capacity. */
function reach(seconds: readonly Second[], from: number, to: number): number | undefined {
  for (let s = from; s + 3 <= to; s++) {
    const w = windowOf(seconds, s, s + 3);
    if (w.achieved >= CONVERGED) return s - from;
  }
  return undefined;
}

function figuresOf(seconds: readonly Second[]): Figures {
  const convergeS = reach(seconds, 0, HALVE_AT);
  const settled = Math.min(HALVE_AT - 5, (convergeS ?? HALVE_AT) + 3);
  const halvedRecover = reach(seconds, HALVE_AT, DOUBLE_AT);
  const doubledRecover = reach(seconds, DOUBLE_AT, SECONDS);
  return {
    convergeS,
    steady: windowOf(seconds, settled, HALVE_AT),
    halved: {
      ...windowOf(seconds, HALVE_AT, DOUBLE_AT),
      refusedRequests: windowOf(seconds, HALVE_AT, DOUBLE_AT).refusedRequests,
      recoverS: halvedRecover,
    },
    doubled: { ...windowOf(seconds, DOUBLE_AT, SECONDS), recoverS: doubledRecover },
  };
}

const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
const secs = (x: number | undefined) => (x === undefined ? 'never' : `${x} s`);

async function main() {
  const redis = await startRedis();
  const all: Second[] = [];
  const figures: Partial<Record<Contender, Figures>> = {};
  try {
    for (const contender of ['harvester', 'sdk-adaptive'] as const) {
      const seconds = await contend(contender, redis.url);
      all.push(...seconds);
      figures[contender] = figuresOf(seconds);
    }
  } finally {
    await redis.stop();
  }
  const lines = [
    `# Harvester vs the AWS SDK's adaptive limiter (${new Date().toISOString()})`,
    '',
    `${WORKERS} worker processes against one site of capacity C = ${C}/s, halved at ${HALVE_AT} s and doubled back at ${DOUBLE_AT} s; ${SECONDS} s each, one after the other, \`npm run bench:harvester\`.`,
    '',
    '| | harvester (shared AIMD in Redis) | SDK adaptive (DefaultRateLimiter per process) |',
    '|---|---|---|',
  ];
  const h = figures.harvester as Figures;
  const s = figures['sdk-adaptive'] as Figures;
  const row = (label: string, a: string, b: string) => lines.push(`| ${label} | ${a} | ${b} |`);
  row('time to 0.9 C from a cold start', secs(h.convergeS), secs(s.convergeS));
  row('achieved / C once converged (to the halving)', pct(h.steady.achieved), pct(s.steady.achieved));
  row('refused by the source once converged', pct(h.steady.refused), pct(s.steady.refused));
  row('after C halves: time to 0.9 C', secs(h.halved.recoverS), secs(s.halved.recoverS));
  row(
    'after C halves: achieved / C, refused',
    `${pct(h.halved.achieved)}, ${pct(h.halved.refused)}`,
    `${pct(s.halved.achieved)}, ${pct(s.halved.refused)}`,
  );
  row('after C doubles: time to 0.9 C', secs(h.doubled.recoverS), secs(s.doubled.recoverS));
  row(
    'after C doubles: achieved / C, refused',
    `${pct(h.doubled.achieved)}, ${pct(h.doubled.refused)}`,
    `${pct(s.doubled.achieved)}, ${pct(s.doubled.refused)}`,
  );
  lines.push(
    '',
    `Goal: ≥ 90 % of C with ≤ 2 % refused after convergence (harvester: ${h.steady.achieved >= 0.9 && h.steady.refused <= 0.02 ? 'met' : 'not met'}), and fewer refusals than the SDK's limiter at the same achieved rate (refused per served request, converged: harvester ${pct(h.steady.refused)} vs SDK ${pct(s.steady.refused)}).`,
  );
  const stamp = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
  const dir = join(ROOT, 'bench/results');
  mkdirSync(dir, { recursive: true });
  const svg = await crawlChart(
    `Requests per second against a source of capacity C (${WORKERS} workers)`,
    all.map((x) => ({ ...x, panel: x.contender })),
  );
  writeFileSync(join(dir, `harvester-${stamp}.svg`), svg);
  lines.push('', `![rate over time](harvester-${stamp}.svg)`);
  writeFileSync(join(dir, `harvester-${stamp}.md`), `${lines.join('\n')}\n`);
  console.log(lines.join('\n'));
  console.log(`\nwritten: bench/results/harvester-${stamp}.md and .svg`);
}

await main();
