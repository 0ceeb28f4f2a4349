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
  it('runs every limiter in both shapes (1 connection × 128, 32 connections × 1), measures and reports each', {
    timeout: 240_000,
  }, async () => {
    const out = mkdtempSync(join(tmpdir(), 'rl-bench-'));
    try {
      await promisify(execFile)(process.execPath, [RUN], {
        env: {
          ...process.env,
          BENCH_SECONDS: '0.05',
          BENCH_ROUNDS: '1',
          BENCH_COLD_RUNS: '1',
          BENCH_KEYS: '2000',
          BENCH_CONNECTIONS: '32',
          BENCH_OUT: out,
        },
        maxBuffer: 16 * 1024 * 1024,
      });
      const files = readdirSync(out).sort();
      assert.ok(files.includes('latest.md') && files.includes('chart.svg'), files.join(', '));
      const json = files.find((f) => f.endsWith('.json')) ?? assert.fail('no JSON results');
      const results = JSON.parse(readFileSync(join(out, json), 'utf8')) as {
        runs: { shape: string; figures: Record<string, number> }[];
        bars: { shape: string }[];
      };
      assert.equal(results.runs.length, 9 * 2 * 2); // limiters (the coalesced reference too) × scenarios × shapes
      assert.deepEqual([...new Set(results.runs.map((r) => r.shape))], ['1×128', '32×1']);
      for (const { figures } of results.runs) {
        for (const field of ['checksPerSecond', 'redisCpuUsPerCheck', 'scriptUsPerCheck', 'clientCpuUsPerCheck']) {
          assert.ok(Number.isFinite(figures[field]) && (figures[field] as number) > 0, `${field}: ${figures[field]}`);
        }
      }
      assert.deepEqual([...new Set(results.bars.map((b) => b.shape))].sort(), ['1×128', '32×1', 'admitted', 'both']);
      const latest = readFileSync(join(out, 'latest.md'), 'utf8');
      assert.match(latest, /## The bar/);
      // a bar table per shape, each with its script-time and peer rows
      for (const shape of ['1×128: one connection', '32×1: 32 connections']) {
        const table = latest.split(`### ${shape}`)[1]?.split('###')[0] ?? assert.fail(`no bar table for ${shape}`);
        assert.match(table, /script time per call ≤ 1\.1 × reference/);
        assert.match(table, /Redis CPU per check below rlf's/);
        assert.match(table, /client CPU per check/);
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

describe('The write-coalescing and auto-pipelining comparison (npm run bench:pipelining)', () => {
  it('measures the bucket with each command written alone, coalesced and auto-pipelined in both shapes and prints each', {
    timeout: 120_000,
  }, async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [new URL('../../bench/auto-pipelining.ts', import.meta.url).pathname],
      { env: { ...process.env, BENCH_SECONDS: '0.05', BENCH_ROUNDS: '1' } },
    );
    const lines = stdout.trim().split('\n');
    const pattern =
      /^(64×1|1×128) (alone|coalesced|auto-pipelining) *: client ([\d.]+) µs\/check, Redis ([\d.]+) µs\/check, p50 (\d+) µs, (\d+) checks\/s$/;
    assert.deepEqual(
      lines.map((line) => (pattern.exec(line) ?? assert.fail(`unexpected line: ${line}`)).slice(1, 3).join(' ')),
      ['64×1', '1×128'].flatMap((shape) => ['alone', 'coalesced', 'auto-pipelining'].map((v) => `${shape} ${v}`)),
    );
    for (const line of lines) {
      const figures = (pattern.exec(line) as RegExpExecArray).slice(3).map(Number);
      assert.ok(
        figures.every((f) => Number.isFinite(f) && f > 0),
        line,
      );
    }
  });
});

describe("The limiter's client CPU in the Lambda shape (npm run bench:lambda-client)", () => {
  it('measures the reference, the bare script and the check, interleaved, and writes their ratios per scenario', {
    timeout: 120_000,
  }, async () => {
    const out = mkdtempSync(join(tmpdir(), 'rl-lambda-client-'));
    try {
      await promisify(execFile)(process.execPath, [new URL('../../bench/lambda-client.ts', import.meta.url).pathname], {
        env: { ...process.env, BENCH_SECONDS: '0.05', BENCH_ROUNDS: '1', BENCH_CONNECTIONS: '4', BENCH_OUT: out },
      });
      const files = readdirSync(out);
      const file = files[0] ?? assert.fail('no result written');
      assert.ok(file.startsWith('lambda-client-') && files.length === 1, files.join(', '));
      const rows = readFileSync(join(out, file), 'utf8')
        .split('\n')
        .filter((line) => /^\| (hot key|100k keys) \|/.test(line))
        .map((line) => line.split('|').map((cell) => cell.trim()));
      assert.deepEqual(
        rows.map((cells) => `${cells[1]} ${cells[2]}`),
        ['hot key', '100k keys'].flatMap((s) => ['reference', 'bare script', 'check'].map((row) => `${s} ${row}`)),
      );
      for (const cells of rows) {
        // client CPU per check, split into its user and kernel parts, which add up to it
        const [total, user, kernel] = (/^(\d+\.\d) \((\d+\.\d) \+ (\d+\.\d)\)$/.exec(cells[3] ?? '') ?? [])
          .slice(1)
          .map(Number);
        assert.ok(total !== undefined && total > 0, cells.join(' | '));
        assert.ok(Math.abs((user as number) + (kernel as number) - total) <= 0.11, cells.join(' | '));
        // the reference is its own ratio; every ratio a median with its min–max
        for (const ratio of cells.slice(4, 8)) assert.match(ratio, /^\d+\.\d\d \(\d+\.\d\d–\d+\.\d\d\)$/);
        if (cells[2] === 'reference') assert.deepEqual(cells.slice(4, 6), ['1.00 (1.00–1.00)', '1.00 (1.00–1.00)']);
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
