/**
 * The load and soak benchmarks in their smoke mode (a few seconds): they
 * start the platform on their own Redis, drive every route over HTTP from a
 * process of their own, stop cleanly, and their checks hold (no 5xx, every
 * webhook event answered 200 in the sink exactly once). The figures come from
 * `npm run bench:load` / `bench:soak`, never from here.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';

const LOAD = new URL('../../bench/load.ts', import.meta.url).pathname;
const run = (args: string[]) =>
  promisify(execFile)(process.execPath, [LOAD, ...args], {
    env: { ...process.env, POWERTOOLS_LOG_LEVEL: 'ERROR' },
    maxBuffer: 16 * 1024 * 1024,
  });

describe('npm run bench:load and bench:soak, smoke mode', () => {
  it('drive every route, with no 5xx and the sink exact', async () => {
    const { stdout } = await run(['--smoke']); // a failed check exits non-zero: execFile rejects
    for (const route of ['api-standard', 'api-partner', 'login', 'slack', 'telegram', 'llm']) {
      assert.match(stdout, new RegExp(`^${route}\\s+c=4\\s+\\d+ req/s.*"5xx":0,"errors":0`, 'm'), route);
    }
  });

  it('soak every route at once, with no 5xx, the sink exact, memory sampled and latency charted over time', async () => {
    const { stdout } = await run(['--smoke', '--soak']);
    assert.match(stdout, /5xx or errors: 0; events admitted (\d+), in the sink \1/);
    assert.match(stdout, /RSS slope -?[\d.]+ MiB\/min .* samples/);
    // every route's latency in windows of a second, and the chart drawn from them and the memory samples
    assert.match(stdout, /latency: ([6-9]|[1-9]\d+) windows of 1 s over 6 routes; .* the chart [1-9]\d{3,} bytes/);
  });
});
