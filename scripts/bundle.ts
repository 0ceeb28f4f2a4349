/**
 * esbuild bundles for Lambda (nodejs24.x, ESM): the shared layer, with its Lua
 * inlined, and the consumer functions, which take the layer as external.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { build, type Plugin } from 'esbuild';
import { lambdaV8Flags } from '../config/lambda-runtime.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const LUA_DIR = join(ROOT, 'lua');

/** The layer's import name in functions; resolved from /opt/nodejs/node_modules in Lambda. */
export const LAYER_PACKAGE = '@platform/rate-limit';

function luaFragments(dir = LUA_DIR): Record<string, string> {
  const fragments: Record<string, string> = {};
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) Object.assign(fragments, luaFragments(path));
    else if (entry.name.endsWith('.lua'))
      fragments[relative(LUA_DIR, path).replace(/\.lua$/, '')] = readFileSync(path, 'utf8');
  }
  return fragments;
}

/** Replaces layer/src/lua/sources.ts with the fragments inlined. */
export const inlineLua: Plugin = {
  name: 'inline-lua',
  setup(b) {
    b.onResolve({ filter: /(^|\/)lua\/sources\.ts$|^\.\/sources\.ts$/ }, (args) => ({
      path: join(args.resolveDir, args.path),
      namespace: 'inline-lua',
    }));
    b.onLoad({ filter: /.*/, namespace: 'inline-lua' }, () => ({
      loader: 'js',
      contents: `const fragments = ${JSON.stringify(luaFragments())};
export function readLua(fragment) {
  const source = fragments[fragment];
  if (source === undefined) throw new Error('no Lua fragment ' + fragment);
  return source;
}`,
    }));
  },
};

/**
 * A built-in imported by an ESM `import` statement gets an ES module facade
 * at load, which reads every export once: `node:fs` then loads its streams,
 * `node:crypto` all of its getters. `require()` has no facade and leaves those
 * getters lazy. So the bundles take their built-ins through `require` (the
 * banner's), read where used. Dynamic `import()` stays as written.
 */
export const builtinsByRequire: Plugin = {
  name: 'builtins-by-require',
  setup(b) {
    b.onResolve({ filter: /^node:/ }, (args) =>
      args.kind === 'import-statement' ? { path: args.path, namespace: 'builtin-by-require' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'builtin-by-require' }, (args) => ({
      loader: 'js',
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
    }));
  },
};

/**
 * redis-errors takes `node:assert` for two argument checks in ParserError's
 * constructor (the parser's own misuse, never a server's reply); loading
 * `assert` costs a cold start its AssertionError and a stderr stream (~3-8 ms
 * here). The same checks, thrown as a plain Error.
 */
export const assertForRedisErrors: Plugin = {
  name: 'assert-for-redis-errors',
  setup(b) {
    b.onResolve({ filter: /^assert$/ }, (args) =>
      /node_modules\/redis-errors\//.test(args.importer) ? { path: 'assert', namespace: 'small-assert' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'small-assert' }, () => ({
      loader: 'js',
      contents: `function assert(value) { if (!value) throw new Error('assertion failed'); }
assert.strictEqual = (a, b) => { if (a !== b) throw new Error('assertion failed: ' + String(a) + ' !== ' + String(b)); };
module.exports = assert;`,
    }));
  },
};

/**
 * ioredis adds its ~600 command methods (each command and its Buffer form) to
 * Commander.prototype one by one at import. V8 keeps an object used as a
 * prototype in fast mode and copies its descriptors on each added property, so
 * that loop is quadratic: 17-21 ms of ioredis's ~50 ms import here (timed in
 * the bundle). A property added and deleted first puts the prototype in
 * dictionary mode, where each add is constant time (the loop then takes
 * 1-7 ms); the methods, their names and the prototype they are own properties
 * of are unchanged. Fails the build if ioredis's loop is no longer there.
 */
export const commandTableInDictionaryMode: Plugin = {
  name: 'command-table-in-dictionary-mode',
  setup(b) {
    b.onLoad({ filter: /node_modules\/ioredis\/built\/utils\/Commander\.js$/ }, (args) => {
      const source = readFileSync(args.path, 'utf8');
      const loop = 'commands.forEach(function (commandName) {';
      if (!source.includes(loop)) throw new Error(`ioredis's command loop not found in ${args.path}`);
      return {
        loader: 'js',
        contents: source.replace(
          loop,
          `Commander.prototype.__dictionaryMode = 0;\ndelete Commander.prototype.__dictionaryMode;\n${loop}`,
        ),
      };
    });
  },
};

/** ioredis's one use of `debug` (utils/debug.js): the factory, called once per namespace at import. */
const IOREDIS_DEBUG_FILE = /node_modules\/ioredis\/built\/utils\/debug\.js$/;
const IOREDIS_DEBUG_USES = ['const debug_1 = require("debug");', '(0, debug_1.default)('];

/**
 * ioredis logs through `debug`, whose Node build, at each of the ~13
 * namespaces ioredis makes at import, asks whether stderr is a terminal: it
 * loads `tty` and `os` (supports-color) and opens process.stderr, for logs
 * only DEBUG can turn on. The bundle's `debug` is private to it (nothing
 * outside can call its `enable()`), so without DEBUG at load every namespace
 * stays off: then ioredis gets off namespaces and `debug` is never evaluated;
 * with DEBUG set, the real one (still bundled). Fails the build if ioredis's
 * use of `debug` is not the one this stands in for.
 */
export const debugOnlyWithDebugEnv: Plugin = {
  name: 'debug-only-with-debug-env',
  setup(b) {
    let used = false;
    let ioredisBundled = false;
    b.onStart(() => {
      used = false;
      ioredisBundled = false;
    });
    b.onLoad({ filter: IOREDIS_DEBUG_FILE }, (args) => {
      const source = readFileSync(args.path, 'utf8');
      // debug_1 appears exactly in its require and its one call
      if (!IOREDIS_DEBUG_USES.every((use) => source.includes(use)) || source.split('debug_1').length !== 3)
        throw new Error(`ioredis's use of debug is not the expected one in ${args.path}`);
      used = true;
      return {
        loader: 'js',
        contents: source.replace(
          IOREDIS_DEBUG_USES[0] as string,
          'const debug_1 = require("debug-only-with-debug-env");',
        ),
      };
    });
    b.onResolve({ filter: /^debug-only-with-debug-env$/ }, (args) => ({
      path: 'debug',
      namespace: 'debug-only-with-debug-env',
      pluginData: { resolveDir: args.resolveDir },
    }));
    b.onLoad({ filter: /.*/, namespace: 'debug-only-with-debug-env' }, (args) => ({
      loader: 'js',
      resolveDir: (args.pluginData as { resolveDir: string }).resolveDir,
      contents: `function off(namespace) {
  const debug = () => {};
  debug.namespace = namespace;
  debug.enabled = false;
  debug.destroy = () => {};
  debug.extend = (sub, delimiter = ':') => off(namespace + delimiter + sub);
  return debug;
}
off.default = off;
module.exports = process.env.DEBUG ? require('debug') : off;`,
    }));
    // seen, not loaded here: the other plugins (or esbuild) load the rest of ioredis
    b.onLoad({ filter: /node_modules\/ioredis\/built\// }, () => {
      ioredisBundled = true;
      return undefined;
    });
    b.onEnd((result) => {
      if (result.errors.length === 0 && ioredisBundled && !used)
        throw new Error('ioredis bundled without its utils/debug.js: its use of debug moved');
    });
  },
};

/** The command table ioredis takes from @ioredis/commands (its name, arity, flags and key positions of each command). */
const IOREDIS_COMMAND_TABLE = /node_modules\/@ioredis\/commands\/built\/commands\.json$/;

/**
 * esbuild turns a JSON file into an object literal; V8 parses a large object
 * literal (ioredis's command table: 100 KB, a third of its bundle) slower than
 * `JSON.parse` of the same text in a string, which it scans as JSON: ~0.8 ms
 * of ioredis's import under Lambda's V8 flags here (interleaved, 15 runs × 2).
 * The same object, made from the file's own JSON. Fails the build if ioredis
 * is bundled without that table.
 */
export const commandTableThroughJsonParse: Plugin = {
  name: 'command-table-through-json-parse',
  setup(b) {
    let loaded = false;
    let ioredisBundled = false;
    b.onStart(() => {
      loaded = false;
      ioredisBundled = false;
    });
    b.onLoad({ filter: IOREDIS_COMMAND_TABLE }, (args) => {
      loaded = true;
      const table: unknown = JSON.parse(readFileSync(args.path, 'utf8'));
      return { loader: 'js', contents: `module.exports = JSON.parse(${JSON.stringify(JSON.stringify(table))});` };
    });
    b.onLoad({ filter: /node_modules\/ioredis\/built\// }, () => {
      ioredisBundled = true;
      return undefined;
    });
    b.onEnd((result) => {
      if (result.errors.length === 0 && ioredisBundled && !loaded)
        throw new Error("ioredis bundled without @ioredis/commands's commands.json: its command table moved");
    });
  },
};

/** The banner that gives an ESM bundle's CommonJS dependencies and its built-ins (builtinsByRequire) a `require`. */
const REQUIRE_BANNER = "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);";

/**
 * esbuild puts the banner on every output file, chunks included, though most
 * of the layer's chunks never call `require`: each one's `createRequire`
 * still costs its module a CommonJS module object and a resolver at load
 * (~1.3 ms over the 16 modules the layer had before it became one shared
 * module, under Lambda's V8 flags here). Takes it off the files whose code
 * names neither `require` nor `__cr` outside the banner (a string that merely
 * contains the word keeps it: never too little).
 * Returns the files changed.
 */
export function dropUnusedRequireBanner(dir: string): string[] {
  const changed: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.mjs')) continue;
    const file = join(entry.parentPath, entry.name);
    const text = readFileSync(file, 'utf8');
    if (!text.startsWith(REQUIRE_BANNER)) continue;
    const code = text.slice(REQUIRE_BANNER.length);
    if (/\brequire\b|\b__cr\b/.test(code)) continue;
    writeFileSync(file, code.replace(/^\n/, ''));
    changed.push(file);
  }
  return changed;
}

/** What the layer's ioredis goes through at build, in this order (every bundle that holds it, and the bench's alternatives). */
export const IOREDIS_PATCHES: readonly Plugin[] = [
  assertForRedisErrors,
  debugOnlyWithDebugEnv,
  commandTableThroughJsonParse,
  commandTableInDictionaryMode,
];

const common = {
  bundle: true,
  platform: 'node',
  target: 'node24',
  format: 'esm',
  minify: true,
  sourcemap: false,
  legalComments: 'none',
  plugins: [builtinsByRequire, ...IOREDIS_PATCHES] as Plugin[],
  // ESM output still meets CommonJS dependencies (ioredis): give them require.
  banner: { js: REQUIRE_BANNER },
} as const;

/**
 * The layer's ioredis, inside its package: one CommonJS bundle, the V8 code
 * caches made for it at build, and the ES module the layer imports it through
 * (the package's private import `#ioredis`, so no public subpath).
 */
export const IOREDIS_VENDOR = { bundle: 'vendor/ioredis.cjs', module: 'vendor/ioredis.mjs' } as const;

/** The layer's `import … from 'ioredis'` taken to the package's own `#ioredis` (vendor/ioredis.mjs). */
export const ioredisFromVendor: Plugin = {
  name: 'ioredis-from-vendor',
  setup(b) {
    b.onResolve({ filter: /^ioredis$/ }, () => ({ path: '#ioredis', external: true }));
  },
};

/**
 * What vendor/ioredis.mjs does at import: runs the bundle with the code cache
 * for this process's V8 flags (layer/src/redis/code-cache.ts). In Lambda, a
 * cache not used is said once in the init's log (INFO when its stamp names
 * another Node, architecture or flags, WARN if V8 refused a matching one): it
 * then costs the compile it would have saved, nothing more.
 * RATE_LIMIT_CODE_CACHE=off runs without it.
 */
const IOREDIS_MODULE = `import { fileURLToPath } from 'node:url';
import { runWithCodeCache } from './code-cache.ts';
const loaded = runWithCodeCache(fileURLToPath(new URL('./ioredis.cjs', import.meta.url)), {
  off: process.env.RATE_LIMIT_CODE_CACHE === 'off',
});
if (process.env.AWS_LAMBDA_FUNCTION_NAME && loaded.outcome !== 'accepted' && loaded.outcome !== 'off')
  console.log(JSON.stringify({ level: loaded.outcome === 'rejected' ? 'WARN' : 'INFO', message: "the layer's ioredis code cache was not used", outcome: loaded.outcome, node: process.version, arch: process.arch, execArgv: process.execArgv }));
export const codeCache = loaded.outcome;
export const { Redis, Cluster, Command } = loaded.exports;
export default loaded.exports.default;
`;

/**
 * Runs the bundle once under each V8 flag set its processes start with (none:
 * local runs, the bench; Lambda's for the functions' memory) and writes the
 * code cache of each; a constructed client (not connected) compiles the
 * constructors the init runs.
 */
const PRODUCE_CACHE = (
  file: string,
) => `import { produceCodeCache } from ${JSON.stringify(join(ROOT, 'layer/src/redis/code-cache.ts'))};
produceCodeCache(${JSON.stringify(file)}, ({ Redis, Cluster }) => {
  new Redis({ lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  new Cluster([{ host: 'localhost', port: 6379 }], { lazyConnect: true, enableOfflineQueue: false });
});`;

export const CODE_CACHE_FLAG_SETS: readonly (readonly string[])[] = [[], lambdaV8Flags()];

async function bundleIoredis(packageDir: string): Promise<void> {
  const file = join(packageDir, IOREDIS_VENDOR.bundle);
  await build({
    stdin: { contents: "module.exports = require('ioredis');\n", resolveDir: ROOT, loader: 'js' },
    outfile: file,
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'cjs',
    minify: true,
    legalComments: 'none',
    plugins: [...IOREDIS_PATCHES],
    logLevel: 'error',
  });
  await build({
    ...common,
    stdin: { contents: IOREDIS_MODULE, resolveDir: join(ROOT, 'layer/src/redis'), loader: 'js' },
    outfile: join(packageDir, IOREDIS_VENDOR.module),
  });
  // The build's Node makes the caches: V8 takes them only from its own version (the stamp says which).
  // Without NODE_OPTIONS: V8 flags there would key the cache yet be missing from its name and stamp.
  const { NODE_OPTIONS: _options, ...env } = process.env;
  for (const flags of CODE_CACHE_FLAG_SETS)
    await promisify(execFile)(process.execPath, [...flags, '--input-type=module', '-e', PRODUCE_CACHE(file)], {
      cwd: ROOT,
      env,
    });
}

/**
 * The layer's entry points: the root and its subpaths. Built, all but `ssm`
 * share one module (see bundleLayer); `ssm` keeps the SSM SDK out of a cold
 * start.
 */
export const LAYER_ENTRIES = {
  index: 'layer/src/index.ts',
  config: 'layer/src/config/index.ts',
  core: 'layer/src/core/index.ts',
  lua: 'layer/src/lua/index.ts',
  middleware: 'layer/src/middleware/index.ts',
  policy: 'layer/src/policy/index.ts',
  redis: 'layer/src/redis/index.ts',
  regions: 'layer/src/regions/index.ts',
  ssm: 'layer/src/config/ssm-source.ts',
} as const;

/**
 * The entries that share one module, `chunks/layer.mjs`: all but `ssm`, whose
 * module brings the SSM SDK and so stays apart (loaded at first use; a shared
 * chunk holds what it has in common with the rest).
 */
const SHARED_ENTRIES = Object.keys(LAYER_ENTRIES).filter((name) => name !== 'ssm') as (keyof typeof LAYER_ENTRIES)[];
export const LAYER_SHARED_MODULE = 'chunks/layer.mjs';

/** An entry's export under its name in the shared module: `<entry>$<name>`. */
const sharedName = (entry: string, name: string) => `${entry}$${name}`;

/**
 * The shared module's source: each shared entry's exports, re-exported under
 * `<entry>$<name>` (named re-exports: live bindings, and a name the thin
 * module asks for that is not there fails at link, not as `undefined`).
 */
function layerSharedEntry(exportsOf: Readonly<Record<string, readonly string[]>>): Plugin {
  return {
    name: 'layer-shared-entry',
    setup(b) {
      b.onResolve({ filter: /^layer-shared$/ }, () => ({ path: 'layer-shared', namespace: 'layer-shared' }));
      b.onLoad({ filter: /.*/, namespace: 'layer-shared' }, () => ({
        contents: SHARED_ENTRIES.map(
          (entry) =>
            `export { ${(exportsOf[entry] ?? []).map((name) => `${name} as ${sharedName(entry, name)}`).join(', ')} } from ${JSON.stringify(join(ROOT, LAYER_ENTRIES[entry]))};`,
        ).join('\n'),
        resolveDir: ROOT,
        loader: 'js',
      }));
    },
  };
}

/** A shared entry's module: its names, re-exported from the shared module. */
function thinEntry(entry: string, names: readonly string[]): string {
  return `export { ${names.map((name) => `${sharedName(entry, name)} as ${name}`).join(', ')} } from './${LAYER_SHARED_MODULE}';\n`;
}

/**
 * Each shared entry's export names, as esbuild sees them (a build that writes
 * nothing). Throws for an entry it cannot account for: an entry missing from
 * the metafile, one without exports, a name that is not a plain identifier
 * (`default`, a string name), or one whose exports esbuild cannot list
 * (`export *` from CommonJS or an external).
 */
async function entryExports(
  external: readonly string[],
  plugins: readonly Plugin[],
): Promise<Record<string, readonly string[]>> {
  const result = await build({
    ...common,
    absWorkingDir: ROOT, // the metafile's paths are relative to it
    entryPoints: Object.fromEntries(SHARED_ENTRIES.map((entry) => [entry, join(ROOT, LAYER_ENTRIES[entry])])),
    outdir: join(ROOT, 'node_modules/.cache/layer-exports'),
    outExtension: { '.js': '.mjs' },
    splitting: true,
    write: false,
    metafile: true,
    minify: false,
    external: [...external],
    plugins: [...plugins],
  });
  const outputs = Object.entries(result.metafile.outputs);
  return Object.fromEntries(
    SHARED_ENTRIES.map((entry) => {
      const [path, output] = outputs.find(([, o]) => o.entryPoint === LAYER_ENTRIES[entry]) ?? [];
      if (!path || !output || output.exports.length === 0)
        throw new Error(`the layer entry ${entry} has no exports esbuild lists`);
      const odd = output.exports.filter((name) => name === 'default' || !/^[A-Za-z_$][\w$]*$/.test(name));
      if (odd.length > 0) throw new Error(`the layer entry ${entry} exports names a thin module cannot carry: ${odd}`);
      const text = result.outputFiles.find((file) => file.path === join(ROOT, path))?.text ?? '';
      if (/^export \*/m.test(text))
        throw new Error(`the layer entry ${entry} re-exports a module whose names esbuild cannot list`);
      return [entry, output.exports];
    }),
  );
}

/**
 * The layer: `<outdir>/nodejs/node_modules/@platform/rate-limit/`. Its code is
 * one module, `chunks/layer.mjs` (a cold start loads a few modules, not one per
 * shared chunk: each module costs its load and link), with a thin module per
 * entry and a package.json mapping `@platform/rate-limit` and each subpath of
 * layer/package.json to them. Returns the path of each entry's module.
 */
export async function bundleLayer(
  outdir: string,
  /** Packages left out of the bundle (the cold-start figures leave ioredis out to time the layer's own part). */
  alsoExternal: readonly string[] = [],
): Promise<Record<keyof typeof LAYER_ENTRIES, string>> {
  const packageDir = join(outdir, 'nodejs', 'node_modules', LAYER_PACKAGE);
  // The runtime ships the SDK (as for the functions); Powertools and ioredis are the layer's own.
  const external = ['@aws-sdk/*', ...alsoExternal];
  const plugins = [inlineLua, ...(alsoExternal.includes('ioredis') ? [] : [ioredisFromVendor]), ...common.plugins];
  const exportsOf = await entryExports(external, plugins);
  await build({
    ...common,
    absWorkingDir: ROOT,
    entryPoints: { [LAYER_SHARED_MODULE.replace(/\.mjs$/, '')]: 'layer-shared', ssm: join(ROOT, LAYER_ENTRIES.ssm) },
    outdir: packageDir,
    outExtension: { '.js': '.mjs' },
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    external,
    plugins: [layerSharedEntry(exportsOf), ...plugins],
  });
  for (const name of SHARED_ENTRIES)
    writeFileSync(join(packageDir, `${name}.mjs`), thinEntry(name, exportsOf[name] ?? []));
  if (!alsoExternal.includes('ioredis')) await bundleIoredis(packageDir);
  dropUnusedRequireBanner(packageDir);
  const exports = Object.fromEntries(
    Object.keys(LAYER_ENTRIES).map((name) => [name === 'index' ? '.' : `./${name}`, `./${name}.mjs`]),
  );
  writeFileSync(
    join(packageDir, 'package.json'),
    `${JSON.stringify({ name: LAYER_PACKAGE, type: 'module', exports, imports: { '#ioredis': `./${IOREDIS_VENDOR.module}` } }, null, 2)}\n`,
  );
  return Object.fromEntries(
    Object.keys(LAYER_ENTRIES).map((name) => [name, join(packageDir, `${name}.mjs`)]),
  ) as Record<keyof typeof LAYER_ENTRIES, string>;
}

/** Modules a function bundle leaves to its environment: the layer, and the AWS SDK the runtime ships. */
export const FUNCTION_EXTERNALS = [LAYER_PACKAGE, `${LAYER_PACKAGE}/*`, '@aws-sdk/*'] as const;

/**
 * One bundle per route of functions/routes.ts and per scheduled worker of
 * functions/workers.ts: `<outdir>/functions/<id>/handler.mjs`,
 * with the layer and `@aws-sdk/*` external (setting esbuild's `external`
 * replaces its default, so the SDK is listed again). Returns each route's bundle path.
 */
export async function bundleFunctions(outdir: string): Promise<Record<string, string>> {
  const { routes } = await import('../functions/routes.ts');
  const { scheduled, operated } = await import('../functions/workers.ts');
  const built: Record<string, string> = {};
  for (const { id, handler } of [...routes, ...scheduled, ...operated]) {
    const outfile = join(outdir, 'functions', id, 'handler.mjs');
    await build({
      ...common,
      entryPoints: [join(ROOT, 'functions', handler)],
      outfile,
      external: [...FUNCTION_EXTERNALS],
    });
    built[id] = outfile;
  }
  return built;
}

/** The image of a long-running service: Node 24 and its one bundle, run as an unprivileged user. */
const SERVICE_DOCKERFILE = `FROM public.ecr.aws/docker/library/node:24-slim
WORKDIR /app
COPY main.mjs .
USER node
CMD ["node", "main.mjs"]
`;

/**
 * One self-contained bundle per long-running service (functions/workers.ts):
 * `<outdir>/services/<id>/main.mjs`, the layer and the SDK included, since a
 * container has no layer mount and no runtime SDK.
 */
export async function bundleServices(outdir: string): Promise<Record<string, string>> {
  const { services } = await import('../functions/workers.ts');
  const built: Record<string, string> = {};
  for (const service of services) {
    const outfile = join(outdir, 'services', service.id, 'main.mjs');
    await build({
      ...common,
      entryPoints: [join(ROOT, 'functions', service.entry)],
      outfile,
      plugins: [inlineLua, ...common.plugins],
    });
    writeFileSync(join(outdir, 'services', service.id, 'Dockerfile'), SERVICE_DOCKERFILE);
    built[service.id] = outfile;
  }
  return built;
}
