/**
 * The cold-start plugins of scripts/bundle.ts: built-ins imported by ESM
 * statements are taken through `require` (no module facade), and
 * redis-errors gets its two argument checks without `node:assert`, ioredis
 * evaluates `debug` only under DEBUG and takes its command table through
 * JSON.parse, and chunks that never call require lose the require banner;
 * the bundled code still behaves as the source does.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { build, type Plugin } from 'esbuild';
import {
  builtinsByRequire,
  commandTableThroughJsonParse,
  debugOnlyWithDebugEnv,
  dropUnusedRequireBanner,
  IOREDIS_PATCHES,
} from '../../scripts/bundle.ts';

const NODE_MODULES = new URL('../../node_modules/', import.meta.url).pathname;
const BANNER = "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);";

/** ioredis bundled with one of its files replaced (upstream moved what a patch stands in for), then `patch`. */
function ioredisWithFileReplaced(file: RegExp, contents: string, patch: Plugin) {
  const replaced: Plugin = {
    name: 'upstream-changed',
    setup(b) {
      b.onLoad({ filter: file }, () => ({ loader: 'js', contents }));
    },
  };
  return build({
    stdin: { contents: "module.exports = require('ioredis');\n", resolveDir: NODE_MODULES, loader: 'js' },
    bundle: true,
    platform: 'node',
    write: false,
    logLevel: 'silent',
    plugins: [replaced, patch],
  });
}

async function bundled(source: string): Promise<{ text: string; file: string; dispose: () => void }> {
  // under node_modules, so the bundle resolves the packages; .cache is not there on a fresh install
  mkdirSync(join(NODE_MODULES, '.cache'), { recursive: true });
  const dir = mkdtempSync(join(NODE_MODULES, '.cache', 'rl-plugins-'));
  const entry = join(dir, 'entry.mjs');
  writeFileSync(entry, source);
  const file = join(dir, 'out.mjs');
  const result = await build({
    entryPoints: [entry],
    outfile: file,
    bundle: true,
    platform: 'node',
    format: 'esm',
    banner: { js: BANNER },
    nodePaths: [NODE_MODULES],
    plugins: [builtinsByRequire, ...IOREDIS_PATCHES],
    write: true,
    metafile: true,
    logLevel: 'error',
  });
  assert.ok(result.metafile);
  return { text: readFileSync(file, 'utf8'), file, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

describe('Plugin: builtinsByRequire', () => {
  it('turns an import statement of a built-in into a require, and the named import still works', async (t) => {
    const out = await bundled(
      "import { basename } from 'node:path';\nimport * as os from 'node:os';\nexport const name = basename('/a/b.txt');\nexport const eol = os.EOL;\n",
    );
    t.after(out.dispose);
    assert.doesNotMatch(out.text, /^import .* from ["']node:path["']/m);
    assert.match(out.text, /require\("node:path"\)/);
    const loaded = (await import(pathToFileURL(out.file).href)) as { name: string; eol: string };
    assert.equal(loaded.name, 'b.txt');
    assert.equal(loaded.eol, '\n');
  });

  it('leaves a dynamic import() of a built-in as written (loaded when reached)', async (t) => {
    const out = await bundled("export const later = () => import('node:fs/promises');\n");
    t.after(out.dispose);
    assert.match(out.text, /import\("node:fs\/promises"\)/);
  });
});

describe('Plugin: assertForRedisErrors', () => {
  it('bundles redis-errors without node:assert, and its ParserError still checks its arguments', async (t) => {
    const out = await bundled("export { ParserError, ReplyError } from 'redis-errors';\n");
    t.after(out.dispose);
    assert.doesNotMatch(out.text, /require\("assert"\)|require\("node:assert"\)/);
    const { ParserError, ReplyError } = (await import(pathToFileURL(out.file).href)) as {
      ParserError: new (message: string, buffer: unknown, offset: unknown) => Error & { offset: number };
      ReplyError: new (message: string) => Error;
    };
    assert.equal(new ParserError('bad reply', Buffer.from('x'), 3).offset, 3);
    assert.throws(() => new ParserError('bad reply', undefined, 3), /assertion failed/);
    assert.throws(() => new ParserError('bad reply', Buffer.from('x'), '3'), /assertion failed/);
    assert.equal(new ReplyError('ERR x').message, 'ERR x');
  });
});

describe('Plugin: commandTableInDictionaryMode', () => {
  it("bundles ioredis with its command methods still own properties of the commander's prototype, each sending its command", async (t) => {
    const out = await bundled("export { Redis, Cluster } from 'ioredis';\n");
    t.after(out.dispose);
    assert.match(out.text, /__dictionaryMode/);
    const { Redis, Cluster } = (await import(pathToFileURL(out.file).href)) as {
      Redis: new (options: object) => Record<string, unknown>;
      Cluster: new (nodes: object[], options: object) => Record<string, unknown>;
    };
    const redis = new Redis({ lazyConnect: true, enableOfflineQueue: false });
    const commander = Object.getPrototypeOf(Object.getPrototypeOf(redis)) as object;
    for (const name of ['get', 'getBuffer', 'evalsha', 'evalshaBuffer', 'script', 'cluster', 'call'])
      assert.ok(Object.hasOwn(commander, name), `${name} is an own method of the commander's prototype`);
    assert.ok(!Object.hasOwn(commander, '__dictionaryMode'), 'the marker property is gone');
    assert.equal(typeof new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true }).evalsha, 'function');
    // What a command method hands the connection (taken here, so nothing connects): the command and its arguments.
    redis.sendCommand = (command: unknown) => command;
    const sent = (redis.evalsha as (...args: unknown[]) => { name: string; args: unknown[] })('abc', 1, 'k');
    assert.deepEqual({ name: sent.name, args: sent.args }, { name: 'evalsha', args: ['abc', '1', 'k'] });
  });
});

describe('Plugin: debugOnlyWithDebugEnv', () => {
  /** A fresh process importing the bundle and constructing a client (not connected), with DEBUG as given. */
  const run = (file: string, debug: string | undefined) => {
    const { DEBUG: _debug, ...env } = process.env;
    return promisify(execFile)(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { Redis } = await import(${JSON.stringify(pathToFileURL(file).href)});
new Redis({ lazyConnect: true, enableOfflineQueue: false });
console.log(JSON.stringify(process.moduleLoadList.filter((m) => m === 'NativeModule tty' || m === 'NativeModule os')));`,
      ],
      { env: debug === undefined ? env : { ...env, DEBUG: debug } },
    );
  };

  it('bundles ioredis whose debug namespaces are off and load no terminal check without DEBUG, and log with it', async (t) => {
    const out = await bundled("export { Redis } from 'ioredis';\n");
    t.after(out.dispose);
    const quiet = await run(out.file, undefined);
    assert.deepEqual(JSON.parse(quiet.stdout), []);
    assert.equal(quiet.stderr, '');
    // the real debug, bundled still: a client's first status change is logged under DEBUG=ioredis:*
    const loud = await run(out.file, 'ioredis:*');
    assert.match(loud.stderr, /ioredis:redis status\[localhost:6379\]: wait -> wait/);
    assert.ok(JSON.parse(loud.stdout).includes('NativeModule tty'));
  });

  it('fails the build when ioredis no longer takes debug as it stands in for', async () => {
    await assert.rejects(
      ioredisWithFileReplaced(
        /node_modules\/ioredis\/built\/utils\/debug\.js$/,
        'exports.default = require("debug");',
        debugOnlyWithDebugEnv,
      ),
      /its use of debug moved/,
    );
  });

  it('fails the build when ioredis still has utils/debug.js but uses debug otherwise (a third use)', async (t) => {
    // a copy of the file under a path the plugin matches, with one more use of debug_1
    const dir = mkdtempSync(join(tmpdir(), 'rl-debug-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const utils = join(dir, 'node_modules/ioredis/built/utils');
    mkdirSync(utils, { recursive: true });
    const original = readFileSync(join(NODE_MODULES, 'ioredis/built/utils/debug.js'), 'utf8');
    writeFileSync(join(utils, 'debug.js'), `${original}\nexports.also = debug_1.default;\n`);
    const bundle = (file: string) =>
      build({
        entryPoints: [file],
        bundle: true,
        platform: 'node',
        write: false,
        logLevel: 'silent',
        external: ['debug'],
        plugins: [debugOnlyWithDebugEnv],
      });
    await assert.rejects(bundle(join(utils, 'debug.js')), /ioredis's use of debug is not the expected one/);
    writeFileSync(join(utils, 'debug.js'), original);
    await bundle(join(utils, 'debug.js')); // the same file unchanged bundles: the check, not the copy, refused it
  });
});

describe('dropUnusedRequireBanner', () => {
  it('takes the require banner off the modules that never name require, keeps it where code does, and each still loads', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-banner-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    mkdirSync(join(dir, 'chunks'));
    const write = (name: string, code: string) => writeFileSync(join(dir, name), `${BANNER}\n${code}\n`);
    write('chunks/plain.mjs', 'export const requirement = 1;');
    write('uses.mjs', "export const os = require('node:os').EOL;");
    write('mentions.mjs', "export const text = 'require';");
    const changed = dropUnusedRequireBanner(dir).map((f) => f.slice(dir.length + 1));
    assert.deepEqual(changed, ['chunks/plain.mjs']);
    assert.doesNotMatch(readFileSync(join(dir, 'chunks/plain.mjs'), 'utf8'), /createRequire/);
    assert.match(readFileSync(join(dir, 'uses.mjs'), 'utf8'), /^import \{ createRequire as __cr \}/);
    assert.equal((await import(pathToFileURL(join(dir, 'chunks/plain.mjs')).href)).requirement, 1);
    assert.equal((await import(pathToFileURL(join(dir, 'uses.mjs')).href)).os, '\n');
    assert.deepEqual(dropUnusedRequireBanner(dir), [], 'a second pass changes nothing');
  });
});

describe('Plugin: commandTableThroughJsonParse', () => {
  it("bundles @ioredis/commands's table as JSON.parse of its text, the same table as the package's own", async (t) => {
    const out = await bundled("export { list, exists, getKeyIndexes, hasFlag } from '@ioredis/commands';\n");
    t.after(out.dispose);
    assert.match(out.text, /JSON\.parse\(['"]\{\\?"acl\\?":/);
    type Commands = {
      list: string[];
      exists: (name: string) => boolean;
      getKeyIndexes: (name: string, args: unknown[]) => number[];
      hasFlag: (name: string, flag: string) => boolean;
    };
    const bundledCommands = (await import(pathToFileURL(out.file).href)) as Commands;
    const own = (await import('@ioredis/commands')) as unknown as Commands;
    assert.deepEqual(bundledCommands.list, own.list);
    // the whole table, not only its names: arity, flags, key positions of every command
    const path = join(NODE_MODULES, '@ioredis/commands/built/commands.json');
    const table = await bundled(`export { default } from ${JSON.stringify(path)};\n`);
    t.after(table.dispose);
    assert.match(table.text, /JSON\.parse\(/);
    assert.deepEqual((await import(pathToFileURL(table.file).href)).default, JSON.parse(readFileSync(path, 'utf8')));
    assert.ok(bundledCommands.list.length > 200);
    assert.deepEqual(bundledCommands.getKeyIndexes('evalsha', ['sha', '2', 'a', 'b', 'c']), [2, 3]);
    assert.equal(bundledCommands.hasFlag('get', 'readonly'), true);
    assert.equal(bundledCommands.exists('no-such-command'), false);
  });

  it('fails the build when ioredis is bundled without that table', async () => {
    await assert.rejects(
      ioredisWithFileReplaced(/commands\/built\/commands\.json$/, 'module.exports = {};', commandTableThroughJsonParse),
      /its command table moved/,
    );
  });
});
