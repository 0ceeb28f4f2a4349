/**
 * The soak's chart: memory (the platform process's RSS, Redis's
 * used_memory) and each route's latency (p50 and p99 per window, as its
 * load generator saw the answers) over the soak's time, one above the other
 * on the same time axis. A leak shows as a rising memory line, a slowdown as
 * a rising latency line.
 */
import { renderSvg } from '../scripts/chart.ts';

export interface MemorySample {
  /** Seconds since the soak began. */
  readonly t: number;
  readonly rssMb: number;
  readonly redisMb: number;
}

export interface LatencyPoint {
  /** Seconds since the soak began (the window's start). */
  readonly t: number;
  readonly route: string;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

export function soakChart(
  memory: readonly MemorySample[],
  latency: readonly LatencyPoint[],
  width = 640,
): Promise<string> {
  const time = { field: 't', type: 'quantitative' as const, title: 'seconds' };
  return renderSvg({
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    vconcat: [
      {
        width,
        height: 160,
        title: 'memory',
        data: {
          values: memory.flatMap((s) => [
            { t: s.t, series: 'platform RSS', mb: s.rssMb },
            { t: s.t, series: 'Redis used_memory', mb: s.redisMb },
          ]),
        },
        mark: { type: 'line', point: true },
        encoding: {
          x: time,
          y: { field: 'mb', type: 'quantitative', title: 'MiB' },
          color: { field: 'series', type: 'nominal', title: null },
        },
      },
      {
        width,
        height: 200,
        title: 'latency per route (p50 solid, p99 dashed)',
        data: {
          values: latency.flatMap((p) => [
            { t: p.t, route: p.route, percentile: 'p50', ms: p.p50Ms },
            { t: p.t, route: p.route, percentile: 'p99', ms: p.p99Ms },
          ]),
        },
        mark: { type: 'line' },
        encoding: {
          x: time,
          y: { field: 'ms', type: 'quantitative', title: 'ms' },
          color: { field: 'route', type: 'nominal' },
          strokeDash: {
            field: 'percentile',
            type: 'nominal',
            scale: {
              domain: ['p50', 'p99'],
              range: [
                [1, 0],
                [4, 3],
              ],
            },
          },
          detail: { field: 'percentile' },
        },
      },
    ],
  });
}
