/**
 * `npm run bench` still runs end to end (tiny durations and key counts, into a
 * temporary directory). It measures nothing here: speed is the benchmark's
 * business, never a test's.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';

const RUN = new URL('../../bench/run.ts', import.meta.url).pathname;

describe('The benchmark (npm run bench)', () => {
  it('runs every limiter and writes its JSON, Markdown and chart', { timeout: 180_000 }, async () => {
    const out = mkdtempSync(join(tmpdir(), 'rl-bench-'));
    try {
      await promisify(execFile)(process.execPath, [RUN], {
        env: {
          ...process.env,
          BENCH_SECONDS: '0.05',
          BENCH_ROUNDS: '1',
          BENCH_COLD_RUNS: '1',
          BENCH_KEYS: '2000',
          BENCH_OUT: out,
        },
        maxBuffer: 16 * 1024 * 1024,
      });
      const files = readdirSync(out).sort();
      assert.ok(files.includes('latest.md') && files.includes('chart.svg'), files.join(', '));
      const json = files.find((f) => f.endsWith('.json')) ?? assert.fail('no JSON results');
      const results = JSON.parse(readFileSync(join(out, json), 'utf8')) as { runs: unknown[]; bars: unknown[] };
      assert.equal(results.runs.length, 8 * 2 * 3); // limiters × scenarios × concurrencies
      assert.ok(results.bars.length > 10);
      assert.match(readFileSync(join(out, 'latest.md'), 'utf8'), /## The bar/);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
