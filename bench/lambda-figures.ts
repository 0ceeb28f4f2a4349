/** Lambda-side figures: bundle sizes and cold module init time. */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
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

/** Size of an entry with the chunks it imports (what a cold start loads). */
function loadedBytes(file: string, seen = new Set<string>()): number {
  if (seen.has(file)) return 0;
  seen.add(file);
  const text = readFileSync(file, 'utf8');
  let bytes = statSync(file).size;
  for (const match of text.matchAll(/from\s*"(\.\/[^"]+)"|import\s*"(\.\/[^"]+)"/g)) {
    bytes += loadedBytes(join(dirname(file), match[1] ?? match[2] ?? ''), seen);
  }
  return bytes;
}

export async function bundleFigures(): Promise<BundleFigures[]> {
  const out = mkdtempSync(join(tmpdir(), 'rl-bundles-'));
  const layer = await bundleLayer(join(out, 'layer'));
  const figures: BundleFigures[] = [];
  for (const [entry, file] of Object.entries(layer)) {
    const name = entry === 'index' ? '@platform/rate-limit' : `@platform/rate-limit/${entry}`;
    figures.push({ name: `layer: ${name}`, bytes: loadedBytes(file), coldImportMs: await coldImportMs(file) });
  }
  return figures;
}
