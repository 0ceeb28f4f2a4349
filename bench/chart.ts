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
