/**
 * `npm run lua:dump`: the written scripts are the ones the layer runs (same
 * SHA) and run by hand with `redis-cli --eval`.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { productionScripts } from '@platform/rate-limit/lua';

const run = promisify(execFile);
const DUMP = new URL('../../scripts/lua-dump.ts', import.meta.url).pathname;

describe('npm run lua:dump', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lua-dump-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('writes every script byte for byte as the layer sends it, runnable with redis-cli --eval', async () => {
    await run(process.execPath, [DUMP, dir]);
    const index = readFileSync(join(dir, 'README.md'), 'utf8');
    for (const script of Object.values(productionScripts().entries)) {
      assert.ok(index.includes(script.sha), `${script.name} listed with its SHA`);
    }
    const tokenBucket = readFileSync(join(dir, 'check_token_bucket.lua'));
    assert.equal(
      createHash('sha1').update(tokenBucket).digest('hex'),
      productionScripts().entries.check_token_bucket?.sha,
    );
    // a full bucket of 10, one token per 100 ms: cost 1 admitted, answered as one integer, the
    // bucket's debt after it (100 000 µs: 9 tokens left)
    const url = process.env.REDIS_URL as string;
    const key = `rl:{dump:${process.pid}}`;
    const { stdout } = await run('redis-cli', [
      '-u',
      url,
      '--eval',
      join(dir, 'check_token_bucket.lua'),
      key,
      ',',
      // the short form, as the layer sends the common check: capacity, µs per token (cost 1, debited)
      '10',
      '100000',
    ]);
    assert.equal(stdout.trim(), '100000');
  });
});
