/** Turns one benchmark run into Markdown (with ratios) and an SVG chart. */
import { renderSvg } from '../scripts/chart.ts';
import type { BundleFigures } from './lambda-figures.ts';
import type { BenchLimiter } from './limiters.ts';
import type { LoadRoundTrips } from './load.ts';
import type { LoadRoute } from './load-driver.ts';
import { pairedRatio, type RunFigures } from './measure.ts';
import { costRatio, SHAPES, type ShapeCost, type ShapeId } from './script-cost.ts';

/** The figures the cold-start bars read (lambda-figures.ts, coldStartSplit): ms, medians of fresh processes. */
export interface ColdStartSplit {
  /** The layer's part without its code cache under Lambda's V8 flags: what Lambda loads (the judged figure). */
  layerWithoutCacheMs: number;
  /** The same under Node's default V8 flags (Node's own built-ins then use their code cache): not Lambda's shape. */
  layerDefaultFlagsMs: number;
  /** The judged import after node:http, which Lambda's runtime interface client loads before the init (not judged: the runtime's internals). */
  layerAfterRuntimeHttpMs: number;
  /** The part with its code cache (local runs; the deployed layer has none). */
  layerMs: number;
  redisClientMs: number;
  layerOwnMs: number;
  slowest: { name: string; coldImportMs: number };
}

/** A figure judged against `bar`, to one decimal, rounded up when over the bar so it never reads as the bar (40.01 → "40.1"). */
export function judgedMs(value: number, bar: number): string {
  // toFixed(6) first: 40.3 * 10 is 403.00000000000006 in binary, which must not round up to 40.4
  return (value > bar ? Math.ceil(Number((value * 10).toFixed(6))) / 10 : value).toFixed(1);
}

/**
 * Issue 30's two cold-start bars, judged in Lambda's shape: under the V8
 * flags its runtime starts Node with, and without the layer's code cache
 * (the deployed layer ships none: docs/deploy.md, "Cold start").
 */
export function coldStartBars(split: ColdStartSplit): BenchResults['bars'] {
  const {
    layerWithoutCacheMs,
    layerDefaultFlagsMs,
    layerAfterRuntimeHttpMs,
    layerMs,
    redisClientMs,
    layerOwnMs,
    slowest,
  } = split;
  return [
    {
      shape: 'both',
      bar: "cold start: the layer's part of an HTTP function, Redis client included ≤ 40 ms (under Lambda's V8 flags, as deployed: no code cache)",
      figure: `${judgedMs(layerWithoutCacheMs, 40)} ms under Lambda's V8 flags without its code cache (${f1(layerAfterRuntimeHttpMs)} ms after node:http, which Lambda's runtime client loads before the init; ${f1(layerDefaultFlagsMs)} ms under default V8 flags, not Lambda's shape; ${f1(layerMs)} ms with its code cache; ioredis alone ${f1(redisClientMs)} ms with it; the layer's own ${f1(layerOwnMs)} ms)`,
      met: layerWithoutCacheMs <= 40,
    },
    {
      shape: 'both',
      bar: "cold start: every function bundle (+ layer) imports in ≤ 120 ms (under Lambda's V8 flags, as deployed)",
      figure: `slowest ${slowest.name.replace('function: ', '')} ${judgedMs(slowest.coldImportMs, 120)} ms`,
      met: slowest.coldImportMs <= 120,
    },
  ];
}

/** 'hot key', or '<n>k keys' drawn uniformly. */
export type Scenario = string;

export interface BenchResults {
  date: string;
  machine: string;
  redis: string;
  durationMsPerRun: number;
  /** Interleaved rounds; each figure is the median over them, each ratio the median of the rounds' own ratios. */
  rounds: number;
  limiters: Pick<BenchLimiter, 'id' | 'label' | 'note'>[];
  /**
   * `shape`: connections × checks in flight on each ('1×128', '64×1'); `concurrency` their product;
   * `perRound`: each round's figures, in round order (absent in results written before 2026-12-07 14:46).
   */
  runs: {
    limiter: string;
    scenario: Scenario;
    shape: string;
    concurrency: number;
    figures: RunFigures;
    perRound?: RunFigures[];
  }[];
  memory: {
    bytesPerKey: Record<string, number>;
    bytesPerInWindowEvent: Record<string, number>;
  };
  bundles: BundleFigures[];
  middlewareOverheadUs?: { p50: number; p99: number };
  /** Redis CPU and script time per check of 1, 2 and 3 buckets and the flat floor (bench/script-cost.ts), by scenario. */
  grouped?: Record<string, Record<string, ShapeCost>>;
  /** `shape`: the run shape a bar is measured in, 'admitted' (bench/script-cost.ts), or 'both'. */
  bars: { shape: string; bar: string; figure: string; met: boolean }[];
}

const f0 = (n: number) => Math.round(n).toLocaleString('en-US');
const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);

function runOf(results: BenchResults, limiter: string, scenario: Scenario, shape: string) {
  const run = results.runs.find((r) => r.limiter === limiter && r.scenario === scenario && r.shape === shape);
  if (!run) throw new Error(`no run ${limiter} ${scenario} ${shape}`);
  return run;
}

export function figuresOf(results: BenchResults, limiter: string, scenario: Scenario, shape: string): RunFigures {
  return runOf(results, limiter, scenario, shape).figures;
}

/**
 * A limiter's figure against another's in one scenario and shape: the median
 * of the rounds' own ratios (the host drifts between rounds more than within
 * one: a ratio of medians may set a limiter's round against its base's from
 * another round, a minute or more apart; in one round they ran seconds
 * apart), or, for results without rounds, the ratio of medians.
 */
export function ratioOf(
  results: BenchResults,
  limiter: string,
  base: string,
  scenario: Scenario,
  shape: string,
  field: keyof RunFigures,
): number {
  const run = runOf(results, limiter, scenario, shape);
  const baseRun = runOf(results, base, scenario, shape);
  return (
    pairedRatio(run.perRound, baseRun.perRound, (round) => round[field]) ?? run.figures[field] / baseRun.figures[field]
  );
}

/** Each bar table's heading: what its shape is. */
function shapeHeading(shape: string): string {
  if (shape === 'admitted') return 'script time on the admit path (1 connection × 128 in flight, every check admitted)';
  if (shape === 'both') return 'memory and the Lambda side';
  const [connections, inFlight] = shape.split('×');
  return connections === '1'
    ? `${shape}: one connection, ${inFlight} checks in flight`
    : `${shape}: ${connections} connections, ${inFlight} check in flight on each (the Lambda shape)`;
}

/**
 * Round trips and Redis CPU per request per route, from the newest `npm run bench:load` (its Lambda shape):
 * a route's round trips are what the platform's requests cost beyond one check's script.
 */
/** Issue 30's round trips per request, per route of bench:load (a route's answered requests, whatever their outcome). */
export const ROUND_TRIP_TARGETS: Readonly<Record<LoadRoute, number>> = {
  'api-standard': 1,
  'api-partner': 1,
  login: 2,
  slack: 2,
  telegram: 2,
  llm: 2,
};

/** The round-trip bars: each route of the newest bench:load against its target (the Lambda shape). */
export function roundTripBars(load: LoadRoundTrips | undefined): string[] {
  if (!load) return [];
  const rows = load.routes.map((r) => {
    const target = (ROUND_TRIP_TARGETS as Readonly<Record<string, number | undefined>>)[r.route];
    const met = target !== undefined && r.roundTrips <= target + 0.005;
    return `| ${r.route}: round trips per request ≤ ${target ?? '?'} | ${r.roundTrips.toFixed(2)} (Redis CPU ${r.redisCpuUsPerRequest.toFixed(1)} µs/request) | ${met ? 'yes' : '**no**'} |`;
  });
  return [
    '',
    `### round trips per route (npm run bench:load ${load.date}: ${load.connections} connections × 1 in flight, the Lambda shape)`,
    '',
    '| bar | figure | met |',
    '|---|---|---|',
    ...rows,
  ];
}

export function roundTripsSection(load: LoadRoundTrips | undefined): string[] {
  if (!load) return ['## Round trips per route', '', 'No `npm run bench:load` result in this directory yet.', ''];
  return [
    `## Round trips per route (npm run bench:load ${load.date}, ${load.connections} connections × 1 in flight)`,
    '',
    'Commands the platform sent to Redis per answered request (the bench counts them client-side); a route partly refused by its own limits (login under this load) shows that mix. The route-by-route list of every outcome is docs/design.md, "Round trips per request".',
    '',
    '| route | round trips/req | Redis CPU µs/req | by command | answers |',
    '|---|---|---|---|---|',
    ...load.routes.map(
      (r) =>
        `| ${r.route} | ${r.roundTrips.toFixed(2)} | ${r.redisCpuUsPerRequest.toFixed(1)} | ${Object.entries(
          r.byCommand,
        )
          .map(([c, n]) => `${c} ${n.toFixed(2)}`)
          .join(', ')} | ${JSON.stringify(r.statuses)} |`,
    ),
    '',
  ];
}

export function markdown(results: BenchResults, load?: LoadRoundTrips): string {
  const lines: string[] = [];
  const shapes = [...new Set(results.runs.map((r) => r.shape))];
  const scenarios = [...new Set(results.runs.map((r) => r.scenario))];
  lines.push(`# Benchmark ${results.date}`, '');
  lines.push(
    `${results.machine}; ${results.redis} on loopback, no persistence; ${results.durationMsPerRun / 1000} s per run after a warm-up, ${results.rounds} interleaved rounds, medians; ${results.runs.some((r) => r.perRound) ? "each × is the median of the rounds' own ratios" : 'each × is a ratio of the medians'}.`,
    "Every limiter: limit 1000 per 1 s, the same Redis and keys. Ratios are to the minimal references of the same run (a token bucket, a sorted-set log: bench/reference/). Script time is Redis' time in the commands a check sends (INFO commandstats): the script's, for a script.",
    '',
  );
  lines.push('## The bar');
  for (const shape of [...new Set(results.bars.map((b) => b.shape))]) {
    lines.push('', `### ${shapeHeading(shape)}`, '', '| bar | figure | met |', '|---|---|---|');
    for (const b of results.bars.filter((bar) => bar.shape === shape)) {
      lines.push(`| ${b.bar} | ${b.figure} | ${b.met ? 'yes' : '**no**'} |`);
    }
  }
  lines.push(...roundTripBars(load));
  lines.push('', '![throughput per shape](chart.svg)', '');
  for (const scenario of scenarios) {
    lines.push(`## ${scenario}`, '');
    lines.push(
      '| limiter | shape | checks/s | × ref | admitted | p50 µs | p99 µs | client CPU µs/check | × ref | Redis CPU µs/check | × ref | script µs/check | × ref |',
    );
    lines.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const shape of shapes) {
      for (const l of results.limiters) {
        const r = figuresOf(results, l.id, scenario, shape);
        const x = (field: keyof RunFigures) => f2(ratioOf(results, l.id, 'reference-tb', scenario, shape, field));
        lines.push(
          `| ${l.label} | ${shape} | ${f0(r.checksPerSecond)} | ${x('checksPerSecond')} | ${f0(r.admittedShare * 100)}% | ${f0(r.p50Us)} | ${f0(r.p99Us)} | ${f1(r.clientCpuUsPerCheck)} | ${x('clientCpuUsPerCheck')} | ${f1(r.redisCpuUsPerCheck)} | ${x('redisCpuUsPerCheck')} | ${f1(r.scriptUsPerCheck)} | ${x('scriptUsPerCheck')} |`,
        );
      }
    }
    lines.push('');
  }
  lines.push(
    '## Memory',
    '',
    '| limiter | Redis bytes per key (100k keys, one check each, 1000 per hour) | bytes per in-window event (one key filled to 1000) |',
    '|---|---|---|',
  );
  for (const l of results.limiters) {
    const perKey = results.memory.bytesPerKey[l.id];
    const perEvent = results.memory.bytesPerInWindowEvent[l.id];
    lines.push(
      `| ${l.label} | ${perKey === undefined ? '–' : f0(perKey)} | ${perEvent === undefined ? '–' : f1(perEvent)} |`,
    );
  }
  lines.push(
    '',
    '## Lambda side',
    '',
    "| bundle (functions come with their consumers) | bytes loaded (entry + its chunks) | cold import (median; under Lambda's V8 flags unless the row says default) |",
    '|---|---|---|',
  );
  for (const b of results.bundles) lines.push(`| ${b.name} | ${f0(b.bytes)} | ${f1(b.coldImportMs)} ms |`);
  if (results.middlewareOverheadUs) {
    lines.push(
      '',
      `Middleware overhead per invocation, Redis time excluded: p50 ${f1(results.middlewareOverheadUs.p50)} µs, p99 ${f1(results.middlewareOverheadUs.p99)} µs.`,
    );
  }
  if (results.grouped) {
    lines.push(
      '',
      "## Grouped checks: what Redis spends per check (admitted, c=128; ratios: the median of each round's)",
      '',
      '| scenario | shape | Redis CPU µs/check | × one bucket | script µs/call | × one bucket |',
      '|---|---|---|---|---|---|',
    );
    for (const [scenario, byShape] of Object.entries(results.grouped)) {
      const base = byShape.one as ShapeCost;
      for (const [id, cost] of Object.entries(byShape)) {
        lines.push(
          `| ${scenario} | ${SHAPES[id as ShapeId].name} | ${f2(cost.cpuUs)} | ${f2(costRatio(cost, base, 'cpuUs'))} | ${f2(cost.scriptUs)} | ${f2(costRatio(cost, base, 'scriptUs'))} |`,
        );
      }
    }
  }
  lines.push('', '## What each limiter is', '');
  for (const l of results.limiters) lines.push(`- **${l.label}** (\`${l.id}\`): ${l.note}`);
  lines.push('');
  lines.push(...roundTripsSection(load));
  return lines.join('\n');
}

/** Throughput per shape, one panel per scenario, one bar per limiter (Vega-Lite, rendered to SVG). */
export function chart(results: BenchResults): Promise<string> {
  return renderSvg({
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    data: {
      values: results.runs.map((r) => ({
        scenario: r.scenario,
        shape: r.shape,
        limiter: results.limiters.find((l) => l.id === r.limiter)?.label ?? r.limiter,
        checksPerSecond: Math.round(r.figures.checksPerSecond),
      })),
    },
    facet: { column: { field: 'scenario', type: 'nominal', title: 'checks per second' } },
    spec: {
      width: 380,
      height: 260,
      mark: { type: 'line', point: true },
      encoding: {
        x: { field: 'shape', type: 'ordinal', title: 'connections × checks in flight' },
        y: { field: 'checksPerSecond', type: 'quantitative', title: 'checks / s' },
        color: { field: 'limiter', type: 'nominal', legend: { orient: 'bottom', columns: 2, labelLimit: 400 } },
      },
    },
  });
}
