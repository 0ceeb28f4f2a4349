/**
 * The cold-start alternatives measured side by side (issue 30 item 5): the
 * Redis clients the layer could bundle (ioredis as one module, minified or
 * not, or left in node_modules as its many CommonJS files; iovalkey;
 * `@redis/client`), the Node built-ins a client loads, the layer's ioredis
 * as it ships (one CommonJS bundle run with the V8 code cache made for it at
 * build, scripts/bundle.ts) with and without that cache, with and without
 * `debug` evaluated at import, under default and Lambda's V8 flags, and
 * Node's module compile cache (NODE_COMPILE_CACHE) over the same modules. Each variant is
 * imported in fresh processes, the variants interleaved run by run (this host
 * is shared: a burst of load then hits every variant alike), and each reports
 * its median and its spread (min–max).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { build, type Plugin } from 'esbuild';
import { lambdaV8Flags } from '../config/lambda-runtime.ts';
import {
  assertForRedisErrors,
  builtinsByRequire,
  bundleLayer,
  commandTableInDictionaryMode,
  debugOnlyWithDebugEnv,
  IOREDIS_PATCHES,
  IOREDIS_VENDOR,
} from '../scripts/bundle.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const NODE_MODULES = join(ROOT, 'node_modules');

export interface AlternativeFigures {
  readonly name: string;
  /** Bytes of the module files the variant loads (built-ins not counted). */
  readonly bytes: number;
  /** Median of fresh-process import times, ms. */
  readonly coldImportMs: number;
  readonly minMs: number;
  readonly maxMs: number;
}

export interface Variant {
  readonly name: string;
  /** Modules imported, in order (file paths or bare specifiers resolved from the repository). */
  readonly imports: readonly string[];
  readonly bytes: number;
  readonly env?: Readonly<Record<string, string>>;
  readonly nodeArgs?: readonly string[];
}

const run = promisify(execFile);
const size = (file: string) => statSync(file).size;

/** One fresh process: the time from the first `import()` to the last one's settlement. */
async function importOnce(variant: Variant): Promise<number> {
  const imports = variant.imports
    .map((m) => `await import(${JSON.stringify(m.startsWith('/') ? pathToFileURL(m).href : m)});`)
    .join(' ');
  const { stdout } = await run(
    process.execPath,
    [
      ...(variant.nodeArgs ?? []),
      '--input-type=module',
      '-e',
      `const t = performance.now(); ${imports} console.log(performance.now() - t); process.exit(0);`,
    ],
    { cwd: ROOT, env: { ...process.env, ...variant.env } },
  );
  return Number(stdout.trim());
}

/** Every variant `runs` times, interleaved; median and spread of each. */
export async function measureVariants(variants: readonly Variant[], runs: number): Promise<AlternativeFigures[]> {
  const times = variants.map(() => [] as number[]);
  for (let i = 0; i < runs; i++) {
    for (const [v, variant] of variants.entries()) times[v]?.push(await importOnce(variant));
  }
  return variants.map((variant, v) => {
    const sorted = (times[v] as number[]).sort((a, b) => a - b);
    return {
      name: variant.name,
      bytes: variant.bytes,
      coldImportMs: sorted[Math.floor(sorted.length / 2)] as number,
      minMs: sorted[0] as number,
      maxMs: sorted.at(-1) as number,
    };
  });
}

/** `source` bundled alone into `outfile` as the layer bundles its dependencies (ESM, node24, CommonJS given `require`). */
async function bundleAlone(
  dir: string,
  name: string,
  source: string,
  { minify = true, plugins = [] as Plugin[] } = {},
): Promise<string> {
  const entry = join(dir, `${name}-entry.mjs`);
  writeFileSync(entry, source);
  const outfile = join(dir, `${name}.mjs`);
  await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'esm',
    minify,
    legalComments: 'none',
    nodePaths: [NODE_MODULES],
    plugins,
    banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
    logLevel: 'error',
  });
  return outfile;
}

/** Bytes of every .js file of a package folder (what an unbundled client may load). */
function packageBytes(dir: string): number {
  let bytes = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && /\.(c|m)?js(on)?$/.test(entry.name))
      bytes += statSync(join(entry.parentPath, entry.name)).size;
  }
  return bytes;
}

/** The built-ins ioredis loads at import as the layer bundles it (its require() of node: modules; no node:assert, and no tty or os: `debug` is not evaluated without DEBUG). */
export const IOREDIS_BUILTINS = [
  'node:events',
  'node:net',
  'node:tls',
  'node:util',
  'node:stream',
  'node:crypto',
  'node:dns',
  'node:url',
  'node:diagnostics_channel',
] as const;

/**
 * A compile cache for `files`, filled by one import of them (Node keys its
 * entries by file path and checks each against the file's content hash and
 * its own version and flags), then the same files timed with it.
 */
export async function withCompileCache(variant: Variant, dir: string): Promise<Variant> {
  const cache = mkdtempSync(join(dir, 'compile-cache-'));
  const env = { ...variant.env, NODE_COMPILE_CACHE: cache };
  const imports = variant.imports.map((m) => `await import(${JSON.stringify(pathToFileURL(m).href)});`).join(' ');
  await run(
    process.execPath,
    [
      ...(variant.nodeArgs ?? []),
      '--input-type=module',
      '-e',
      `${imports} (await import('node:module')).flushCompileCache(); process.exit(0);`,
    ],
    { cwd: ROOT, env: { ...process.env, ...env } },
  );
  return { ...variant, name: `${variant.name}, with Node's compile cache`, env };
}

/** The Redis clients and the compile cache, side by side. */
export async function clientAlternatives(
  dir: string,
  runs: number,
  /** The layer's vendor/ioredis.mjs (a layer is built into `dir` if not given). */
  vendorModule?: string,
): Promise<AlternativeFigures[]> {
  const vendor = vendorModule ?? join(dirname((await bundleLayer(join(dir, 'layer'))).index), IOREDIS_VENDOR.module);
  const vendorBytes = size(join(dirname(vendor), 'ioredis.cjs')) + size(vendor);
  const layerPlugins = { plugins: [builtinsByRequire, assertForRedisErrors] };
  const ioredis = await bundleAlone(dir, 'ioredis', "export { Redis, Cluster } from 'ioredis';\n", layerPlugins);
  const ioredisDictionary = await bundleAlone(
    dir,
    'ioredis-dictionary',
    "export { Redis, Cluster } from 'ioredis';\n",
    {
      plugins: [builtinsByRequire, assertForRedisErrors, commandTableInDictionaryMode],
    },
  );
  const ioredisNoDebug = await bundleAlone(dir, 'ioredis-no-debug', "export { Redis, Cluster } from 'ioredis';\n", {
    plugins: [builtinsByRequire, assertForRedisErrors, debugOnlyWithDebugEnv, commandTableInDictionaryMode],
  });
  const ioredisJsonTable = await bundleAlone(dir, 'ioredis-json-table', "export { Redis, Cluster } from 'ioredis';\n", {
    plugins: [builtinsByRequire, ...IOREDIS_PATCHES],
  });
  const ioredisBefore = await bundleAlone(dir, 'ioredis-before', "export { Redis, Cluster } from 'ioredis';\n");
  const ioredisPlain = await bundleAlone(dir, 'ioredis-plain', "export { Redis, Cluster } from 'ioredis';\n", {
    ...layerPlugins,
    minify: false,
  });
  const iovalkey = await bundleAlone(dir, 'iovalkey', "export { Redis, Cluster } from 'iovalkey';\n", layerPlugins);
  const nodeRedis = await bundleAlone(
    dir,
    'node-redis',
    "export { createClient, createCluster } from '@redis/client';\n",
  );
  // The unbundled client as a layer's node_modules would hold it: the repository's own copy.
  const unbundledEntry = new URL(import.meta.resolve('ioredis')).pathname;
  const oneModule: Variant = {
    name: 'ioredis 6.0.0, one minified module, as the layer bundled it before (redis-errors without node:assert)',
    imports: [ioredis],
    bytes: size(ioredis),
  };
  const variants: Variant[] = [
    oneModule,
    {
      name: 'ioredis 6.0.0, one minified module, plain esbuild (the layer before)',
      imports: [ioredisBefore],
      bytes: size(ioredisBefore),
    },
    { name: 'ioredis 6.0.0, one module not minified', imports: [ioredisPlain], bytes: size(ioredisPlain) },
    {
      name: 'ioredis 6.0.0, unbundled (its CommonJS files from node_modules)',
      imports: [unbundledEntry],
      bytes: [
        'ioredis',
        '@ioredis/commands',
        'denque',
        'redis-parser',
        'redis-errors',
        'cluster-key-slot',
        'debug',
        'ms',
        'standard-as-callback',
      ]
        .map((p) => {
          try {
            return packageBytes(join(NODE_MODULES, p));
          } catch {
            return 0;
          }
        })
        .reduce((a, b) => a + b, 0),
    },
    await withCompileCache(oneModule, dir),
    {
      name: 'ioredis 6.0.0, one minified module, its command table added in dictionary mode (no code cache)',
      imports: [ioredisDictionary],
      bytes: size(ioredisDictionary),
    },
    {
      name: "the same under Lambda's V8 flags (debug evaluated at import: loads tty and os, opens stderr)",
      imports: [ioredisDictionary],
      bytes: size(ioredisDictionary),
      nodeArgs: lambdaV8Flags(),
    },
    {
      name: "the same with debug evaluated only under DEBUG (debugOnlyWithDebugEnv), under Lambda's V8 flags",
      imports: [ioredisNoDebug],
      bytes: size(ioredisNoDebug),
      nodeArgs: lambdaV8Flags(),
    },
    {
      name: "the same, its command table through JSON.parse (commandTableThroughJsonParse), under Lambda's V8 flags",
      imports: [ioredisJsonTable],
      bytes: size(ioredisJsonTable),
      nodeArgs: lambdaV8Flags(),
    },
    {
      name: 'ioredis 6.0.0 as the layer ships it: one CommonJS bundle run with its V8 code cache (vendor/ioredis.mjs)',
      imports: [vendor],
      bytes: vendorBytes,
    },
    {
      name: "the same under Lambda's V8 flags (its own cache: config/lambda-runtime.ts)",
      imports: [vendor],
      bytes: vendorBytes,
      nodeArgs: lambdaV8Flags(),
    },
    {
      name: 'the same with its code cache off (RATE_LIMIT_CODE_CACHE=off: what a rejected cache costs)',
      imports: [vendor],
      bytes: vendorBytes,
      env: { RATE_LIMIT_CODE_CACHE: 'off' },
    },
    {
      name: "the same with its code cache off, under Lambda's V8 flags (what Lambda loads: the deployed layer has no cache)",
      imports: [vendor],
      bytes: vendorBytes,
      env: { RATE_LIMIT_CODE_CACHE: 'off' },
      nodeArgs: lambdaV8Flags(),
    },
    { name: 'iovalkey 0.4.0, one minified module', imports: [iovalkey], bytes: size(iovalkey) },
    { name: '@redis/client 6.3.1, one minified module', imports: [nodeRedis], bytes: size(nodeRedis) },
    {
      name: "the Node built-ins the layer's ioredis loads, alone (the floor of any client)",
      imports: [...IOREDIS_BUILTINS],
      bytes: 0,
    },
    {
      name: "the same built-ins under Lambda's V8 flags (Node's own code cache for them refused)",
      imports: [...IOREDIS_BUILTINS],
      bytes: 0,
      nodeArgs: lambdaV8Flags(),
    },
  ];
  return measureVariants(variants, runs);
}

export function alternativesTable(figures: readonly AlternativeFigures[]): string[] {
  return [
    '| alternative | bytes loaded | cold import, median (min–max) |',
    '|---|---|---|',
    ...figures.map(
      (f) =>
        `| ${f.name} | ${f.bytes} | ${f.coldImportMs.toFixed(1)} ms (${f.minMs.toFixed(1)}–${f.maxMs.toFixed(1)}) |`,
    ),
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const dir = mkdtempSync(join(NODE_MODULES, '.cache', 'rl-cold-alt-'));
  try {
    console.log(alternativesTable(await clientAlternatives(dir, Number(process.env.BENCH_COLD_RUNS ?? 9))).join('\n'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
