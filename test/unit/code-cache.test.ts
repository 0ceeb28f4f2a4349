/**
 * layer/src/redis/code-cache.ts: a CommonJS bundle run with the V8 code cache
 * made for it. A cache is used only when it was made by this Node, under these
 * V8 flags, for this very source; every other case runs the bundle as if there
 * were none (the same exports), it never fails the load.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { cacheFileOf, runWithCodeCache, v8FlagsOf } from '@platform/rate-limit/redis';

// The children resolve the layer by its package name from the repository.
const ROOT = new URL('../..', import.meta.url).pathname;
const CODE_CACHE = '@platform/rate-limit/redis';
// Enough code for V8 to make a cache of; `answer` tells one source from another of the same length.
const source = (answer: number) =>
  `const { EOL } = require('node:os');\nexports.answer = ${answer};\nexports.eol = EOL;\nexports.sum = (...xs) => xs.reduce((a, b) => a + b, 0);\n${Array.from({ length: 50 }, (_, i) => `exports.f${i} = (x) => x * ${i} + ${i};`).join('\n')}\n`;

let dir: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'rl-code-cache-'));
  file = join(dir, 'bundle.cjs');
  writeFileSync(file, source(41));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** The build's step: a fresh Node under `flags` runs the bundle once and writes its cache. */
async function produce(flags: readonly string[] = []): Promise<string> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      ...flags,
      '--input-type=module',
      '-e',
      `import { produceCodeCache } from ${JSON.stringify(CODE_CACHE)}; console.log(produceCodeCache(${JSON.stringify(file)}, (m) => m.sum(1, 2)));`,
    ],
    { cwd: ROOT },
  );
  return stdout.trim();
}

type Loaded = { answer: number; eol: string; sum: (...xs: number[]) => number };

describe('runWithCodeCache', () => {
  it('uses the cache made for this Node and these flags, and the module works', async () => {
    assert.equal(await produce(), cacheFileOf(file, []));
    const { exports, outcome } = runWithCodeCache(file, { execArgv: [] });
    assert.equal(outcome, 'accepted');
    assert.equal((exports as Loaded).answer, 41);
    assert.equal((exports as Loaded).sum(1, 2, 3), 6);
  });

  it('finds no cache for other V8 flags (each flag set has its own file), and runs the bundle without one', async () => {
    await produce();
    const { exports, outcome } = runWithCodeCache(file, { execArgv: ['--max-old-space-size=461'] });
    assert.equal(outcome, 'absent');
    assert.equal((exports as Loaded).answer, 41);
  });

  it('takes the cache made under Lambda-like heap flags when started with them', async () => {
    const flags = ['--expose-gc', '--max-semi-space-size=25', '--max-old-space-size=461'];
    assert.equal(await produce(flags), cacheFileOf(file, v8FlagsOf(flags)));
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        ...flags,
        '--input-type=module',
        '-e',
        `import { runWithCodeCache } from ${JSON.stringify(CODE_CACHE)}; const r = runWithCodeCache(${JSON.stringify(file)}); console.log(JSON.stringify({ outcome: r.outcome, answer: r.exports.answer }));`,
      ],
      { cwd: ROOT },
    );
    assert.deepEqual(JSON.parse(stdout), { outcome: 'accepted', answer: 41 });
  });

  it('does not read a cache made for another source of the same length (V8 would check the length only)', async () => {
    await produce();
    writeFileSync(file, source(42));
    const { exports, outcome } = runWithCodeCache(file, { execArgv: [] });
    assert.equal(outcome, 'stale');
    assert.equal((exports as Loaded).answer, 42, 'the new source runs, not the cached one');
  });

  it('does not read a cache stamped by another Node or for another architecture', async () => {
    const cacheFile = await produce();
    const stamp = JSON.parse(readFileSync(`${cacheFile}.json`, 'utf8')) as Record<string, unknown>;
    writeFileSync(`${cacheFile}.json`, JSON.stringify({ ...stamp, node: 'v24.0.0', v8: '13.6.0.0-node.0' }));
    assert.equal(runWithCodeCache(file, { execArgv: [] }).outcome, 'stale');
    writeFileSync(`${cacheFile}.json`, JSON.stringify({ ...stamp, arch: process.arch === 'arm64' ? 'x64' : 'arm64' }));
    assert.equal(runWithCodeCache(file, { execArgv: [] }).outcome, 'stale');
    writeFileSync(`${cacheFile}.json`, JSON.stringify(stamp));
    assert.equal(runWithCodeCache(file, { execArgv: [] }).outcome, 'accepted', 'the stamp as made is taken');
  });

  it('does not read a damaged cache (bytes changed under its stamp: V8 checks only its header, and may abort on the rest)', async () => {
    const cacheFile = await produce();
    const bytes = readFileSync(cacheFile);
    for (let i = Math.floor(bytes.length / 2); i < Math.floor(bytes.length / 2) + 64 && i < bytes.length; i++)
      bytes[i] = (bytes[i] as number) ^ 0xff;
    writeFileSync(cacheFile, bytes);
    const damaged = runWithCodeCache(file, { execArgv: [] });
    assert.equal(damaged.outcome, 'stale');
    assert.equal((damaged.exports as Loaded).sum(2, 3), 5);
  });

  it('takes a malformed stamp as no match, not as an error', async () => {
    const cacheFile = await produce();
    for (const stamp of [
      'null',
      '{}',
      JSON.stringify({ node: process.version, v8: process.versions.v8, arch: process.arch }),
    ]) {
      writeFileSync(`${cacheFile}.json`, stamp);
      assert.equal(runWithCodeCache(file, { execArgv: [] }).outcome, 'stale', stamp);
    }
  });

  it('runs the bundle when V8 rejects the cache (bytes it did not make, stamped as if), and when there is none or it is off', async () => {
    const cacheFile = await produce();
    const bytes = Buffer.alloc(readFileSync(cacheFile).length, 7);
    writeFileSync(cacheFile, bytes);
    const stamp = JSON.parse(readFileSync(`${cacheFile}.json`, 'utf8')) as Record<string, unknown>;
    const cacheSha256 = createHash('sha256').update(bytes).digest('hex');
    writeFileSync(`${cacheFile}.json`, JSON.stringify({ ...stamp, cacheSha256 }));
    const rejected = runWithCodeCache(file, { execArgv: [] });
    assert.equal(rejected.outcome, 'rejected');
    assert.equal((rejected.exports as Loaded).sum(2, 2), 4);
    assert.equal(runWithCodeCache(file, { execArgv: [], off: true }).outcome, 'off');
    rmSync(cacheFile);
    rmSync(`${cacheFile}.json`);
    const absent = runWithCodeCache(file, { execArgv: [] });
    assert.equal(absent.outcome, 'absent');
    assert.equal((absent.exports as Loaded).eol, '\n');
  });
});

describe('v8FlagsOf', () => {
  it("keeps the V8 flags that key a cache and drops Node's own options", () => {
    assert.deepEqual(
      v8FlagsOf([
        '--max-semi-space-size=25',
        '--import',
        '/x/hooks.ts',
        '--expose-gc',
        '--max-http-header-size',
        '81920',
        '--max-old-space-size=461',
        '--input-type=module',
        '-e',
        'code',
      ]),
      ['--expose-gc', '--max-old-space-size=461', '--max-semi-space-size=25'],
    );
  });
});
