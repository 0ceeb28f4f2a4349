/**
 * `node bench/spread.ts <run.json>...`: the bars of several `npm run bench`
 * runs side by side, with how far apart they are (this host is shared and
 * noisy: one run's figure is not the figure). Appends the table to
 * bench/results/latest.md as its closing note (BENCH_OUT: another directory).
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { basename } from 'node:path';
import type { BenchResults } from './report.ts';

const files = process.argv.slice(2);
if (files.length < 2) throw new Error('usage: node bench/spread.ts <run.json> <run.json> [...]');
const runs = files.map((f) => JSON.parse(readFileSync(f, 'utf8')) as BenchResults);

/** A bar's figure as one number: its ratio (the first `n ×`), else its first number. */
function figureValue(figure: string): number {
  const ratio = /([\d.]+) ×/.exec(figure) ?? /([\d.]+)/.exec(figure);
  return Number(ratio?.[1] ?? Number.NaN);
}

const lines = [
  '',
  `## Closing note: ${runs.length} runs side by side`,
  '',
  `Runs ${files.map((f) => `\`${basename(f, '.json')}\``).join(', ')} (the tables above are the last one's). Spread: (max − min) / min of the figure over the runs.`,
  '',
  `| shape | bar | ${runs.map((_, i) => `run ${i + 1}`).join(' | ')} | spread | met |`,
  `|---|---|${runs.map(() => '---|').join('')}---|---|`,
];
for (const [i, bar] of (runs[0]?.bars ?? []).entries()) {
  const same = runs.map((r) => r.bars[i]);
  if (same.some((b) => b?.bar !== bar.bar)) continue; // runs of different code: only the bars they share
  const values = same.map((b) => figureValue(b?.figure ?? ''));
  const spread = (Math.max(...values) - Math.min(...values)) / Math.min(...values);
  const met = same.filter((b) => b?.met).length;
  lines.push(
    `| ${bar.shape} | ${bar.bar} | ${values.map((v) => v.toFixed(2)).join(' | ')} | ${(100 * spread).toFixed(0)} % | ${met} of ${runs.length} |`,
  );
}
const dir = process.env.BENCH_OUT ?? new URL('./results/', import.meta.url).pathname;
appendFileSync(`${dir.replace(/\/?$/, '/')}latest.md`, `${lines.join('\n')}\n`);
console.log(lines.join('\n'));
