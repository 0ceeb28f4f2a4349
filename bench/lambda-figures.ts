/** Lambda-side figures: bundle sizes and cold module init time. */
import { execFile } from 'node:child_process';
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { bundleLayer } from '../scripts/bundle.ts';

export interface BundleFigures {
  name: string;
  bytes: number;
  /** Median of fresh-process `import()` times, ms. */
  coldImportMs: number;
}

async function coldImportMs(file: string, runs = 7): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const { stdout } = await promisify(execFile)(process.execPath, [
      '--input-type=module',
      '-e',
      `const t = performance.now(); await import(${JSON.stringify(file)}); console.log(performance.now() - t);`,
    ]);
    times.push(Number(stdout.trim()));
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] as number;
}

export async function bundleFigures(): Promise<BundleFigures[]> {
  const out = mkdtempSync(join(tmpdir(), 'rl-bundles-'));
  const layer = await bundleLayer(join(out, 'layer'));
  return [
    { name: 'layer (@platform/rate-limit)', bytes: statSync(layer).size, coldImportMs: await coldImportMs(layer) },
  ];
}
