/**
 * Charts as self-contained SVG, drawn by Vega-Lite (compiled to Vega and
 * rendered headless in Node, no browser and no network): the benchmark's
 * and the demo report's.
 */
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  return view.toSVG();
}

/** One second of a crawl: what the source served and refused, and its capacity then. */
export interface CrawlSecond {
  readonly second: number;
  readonly served: number;
  readonly refused: number;
  readonly capacity: number;
  /** A panel per distinct value (the contenders of a comparison). */
  readonly panel?: string;
}

/** Requests per second against a source's capacity (the dashed line), a panel per `panel`. */
export function crawlChart(title: string, seconds: readonly CrawlSecond[], width = 640): Promise<string> {
  const values = seconds.flatMap((s) => [
    { panel: s.panel ?? '', second: s.second, series: 'served', value: s.served },
    { panel: s.panel ?? '', second: s.second, series: 'refused (429)', value: s.refused },
    { panel: s.panel ?? '', second: s.second, series: 'capacity', value: s.capacity },
  ]);
  const layer = {
    width,
    height: 180,
    mark: { type: 'line' as const, interpolate: 'step-after' as const },
    encoding: {
      x: { field: 'second', type: 'quantitative' as const, title: 'seconds' },
      y: { field: 'value', type: 'quantitative' as const, title: 'requests / s' },
      color: {
        field: 'series',
        type: 'nominal' as const,
        scale: { domain: ['served', 'refused (429)', 'capacity'], range: ['#1f77b4', '#d62728', '#7f7f7f'] },
      },
      strokeDash: { condition: { test: "datum.series === 'capacity'", value: [4, 3] }, value: [1, 0] },
    },
  };
  const panels = new Set(seconds.map((s) => s.panel ?? ''));
  return renderSvg(
    panels.size > 1
      ? {
          $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
          title,
          data: { values },
          facet: { row: { field: 'panel', type: 'nominal', title: null } },
          spec: layer,
        }
      : { $schema: 'https://vega.github.io/schema/vega-lite/v6.json', title, data: { values }, ...layer },
  );
}
