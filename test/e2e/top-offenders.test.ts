/**
 * Top offenders: a flood of known keys through the local platform, then
 * `npx ratelimit top` over the refusal log it wrote: each key with exactly
 * the refusals it got, most first; keys as stored (here client IPs), never
 * a raw email from the bodies; and only the refused attempts are in the log.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { consumers, type TestPlatform } from '../support/consumers.ts';
import { call } from '../support/http.ts';

const CLI = new URL('../../cli/ratelimit.ts', import.meta.url).pathname;
const refusalLog = join(mkdtempSync(join(tmpdir(), 'rl-top-')), 'refusals.jsonl');

let platform: TestPlatform;
before(async () => {
  process.env.RATE_LIMIT_REFUSAL_LOG = refusalLog; // read when the platform is made (by the gateway)
  platform = await consumers();
});
after(() => platform.close());

function top(args: string[]) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [CLI, 'top', ...args],
      { env: { ...process.env, RATE_LIMIT_REFUSAL_LOG: refusalLog } },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('npx ratelimit top <policy>', () => {
  it('lists the keys a flood of known keys got refused, each with its exact count, most first', async () => {
    const limit = 20; // login-ip: 20 per 15 min
    const flood = { '127.9.0.1': limit + 10, '127.9.0.2': limit + 5, '127.9.0.3': limit + 1, '127.9.0.4': limit };
    for (const [ip, attempts] of Object.entries(flood)) {
      for (let i = 0; i < attempts; i++) {
        const answer = await call(platform.base, {
          method: 'POST',
          path: '/auth/login',
          from: ip,
          body: JSON.stringify({ email: `victim${i}@example.com`, password: 'guess' }),
        });
        assert.equal(answer.status, i < limit ? 401 : 429, `${ip} attempt ${i + 1}`);
      }
    }
    const result = await top(['login-ip', '--since', '1h', '--json']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual((JSON.parse(result.stdout) as { top: unknown[] }).top, [
      { key: '127.9.0.1', refused: 10 },
      { key: '127.9.0.2', refused: 5 },
      { key: '127.9.0.3', refused: 1 },
    ]);
    const human = await top(['login-ip']);
    assert.match(human.stdout, /^\s+10 {2}127\.9\.0\.1$/m);
    const log = readFileSync(refusalLog, 'utf8');
    assert.doesNotMatch(log, /@example\.com/, 'no email reaches the log');
    assert.equal(log.trim().split('\n').length, 16, 'one line per refusal, nothing for an admitted attempt');
    assert.match((await top(['slack-ip'])).stdout, /no refusals of slack-ip/);
    assert.equal((await top(['login-ip', '--since', 'soon'])).code, 2);
  });
});
