/**
 * What a cold start pays: the bytes each module loads (its file, the chunks
 * and layer modules it imports) and the time to import it in a fresh Node
 * process, for the layer's entries, the limiter + middleware + config part
 * every HTTP function loads, ioredis alone (the floor under that part), and
 * each built function with the layer resolved from a folder laid out like
 * Lambda's /opt. `npm run bench:cold` prints these alone; `npm run bench`
 * puts them in its report.
 *
 * Import time is what Node spends between `import()` and its settlement,
 * excluding Node's own start; the median of `runs` fresh processes. Each
 * process exits once measured: a function's platform starts connecting to
 * Redis at import (its init), which would keep it alive.
 *
 * Every row runs under Lambda's V8 flags (config/lambda-runtime.ts) unless its
 * name says "default V8 flags": Lambda's runtime starts Node with heap flags,
 * any V8 flag changes V8's flag hash, and Node's own built-ins (tls, net,
 * crypto, stream …) then lose their embedded code cache and compile from
 * source, ~10 ms more here. The functions' rows, like the judged layer row,
 * leave the layer's code cache out, as the deployed layer does
 * (LAYER_ASSET_EXCLUDES, infra/platform-stack.ts).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { lambdaV8Flags } from '../config/lambda-runtime.ts';
import { buildAll } from '../scripts/build.ts';
import { bundleLayer, IOREDIS_VENDOR, LAYER_PACKAGE } from '../scripts/bundle.ts';
import { lambdaNodeArgs, layOutLikeLambda } from '../scripts/lambda-layout.ts';
import {
  type AlternativeFigures,
  alternativesTable,
  clientAlternatives,
  measureVariants,
  type Variant,
  withCompileCache,
} from './cold-alternatives.ts';
import type { ColdStartSplit } from './report.ts';

export interface BundleFigures {
  name: string;
  bytes: number;
  /** Median of fresh-process `import()` times, ms. */
  coldImportMs: number;
  /** The fastest and the slowest of those processes (this host is shared: the spread says how noisy the run was). */
  minMs?: number;
  maxMs?: number;
}

interface Timing {
  coldImportMs: number;
  minMs: number;
  maxMs: number;
}

function timing(times: number[]): Timing {
  times.sort((a, b) => a - b);
  return {
    coldImportMs: times[Math.floor(times.length / 2)] as number,
    minMs: times[0] as number,
    maxMs: times.at(-1) as number,
  };
}

/** The V8 flags Lambda's Node runtime starts Node with, for the functions' memory. */
const LAMBDA_V8_FLAGS = lambdaV8Flags();

async function coldImportMs(
  files: readonly string[],
  runs: number,
  nodePath: string,
  env: Readonly<Record<string, string>> = {},
  v8Flags: readonly string[] = LAMBDA_V8_FLAGS,
  /** Code run before the clock starts (what the process has loaded before the init). */
  setup = '',
): Promise<Timing> {
  const imports = files.map((file) => `await import(${JSON.stringify(pathToFileURL(file).href)});`).join(' ');
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        ...v8Flags,
        ...lambdaNodeArgs,
        '--input-type=module',
        '-e',
        `${setup} const t = performance.now(); ${imports} console.log(performance.now() - t); process.exit(0);`,
      ],
      { env: { ...process.env, ...env, NODE_PATH: nodePath } },
    );
    times.push(Number(stdout.trim()));
  }
  return timing(times);
}

/** Bytes of the modules a cold start loads from `files`: each file, its relative chunks, the layer modules it imports and the layer's ioredis. */
function loadedBytes(files: readonly string[], layerDir: string, seen = new Set<string>()): number {
  let bytes = 0;
  for (const file of files) {
    if (seen.has(file)) continue;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    bytes += statSync(file).size;
    // the layer's ioredis module reads its CommonJS bundle (its code cache not counted)
    if (file === join(layerDir, IOREDIS_VENDOR.module)) bytes += statSync(join(layerDir, IOREDIS_VENDOR.bundle)).size;
    for (const match of text.matchAll(/(?:from|import)\s*["']([^"']+)["']/g)) {
      const specifier = match[1] as string;
      if (specifier.startsWith('./') || specifier.startsWith('../'))
        bytes += loadedBytes([join(dirname(file), specifier)], layerDir, seen);
      else if (specifier === '#ioredis') bytes += loadedBytes([join(layerDir, IOREDIS_VENDOR.module)], layerDir, seen);
      else if (specifier === LAYER_PACKAGE || specifier.startsWith(`${LAYER_PACKAGE}/`)) {
        const entry = specifier === LAYER_PACKAGE ? 'index' : specifier.slice(LAYER_PACKAGE.length + 1);
        bytes += loadedBytes([join(layerDir, `${entry}.mjs`)], layerDir, seen);
      }
    }
  }
  return bytes;
}

/**
 * The layer's own part of a cold start, measured rather than subtracted: the
 * HTTP functions' entries built with ioredis left out, imported in a process
 * that has loaded ioredis already (so its module evaluation and the built-ins
 * it brings are not counted), under Lambda's V8 flags. Built under
 * node_modules/.cache so the bare `ioredis` resolves to the repository's.
 */
async function layerOwnPart(runs: number): Promise<BundleFigures> {
  const cache = new URL('../node_modules/.cache/', import.meta.url).pathname;
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(cache, 'rl-layer-own-'));
  try {
    const layer = await bundleLayer(dir, ['ioredis']);
    const files = [layer.index, layer.middleware, layer.config];
    const ioredis = import.meta.resolve('ioredis');
    const imports = files.map((file) => `await import(${JSON.stringify(pathToFileURL(file).href)});`).join(' ');
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const { stdout } = await promisify(execFile)(process.execPath, [
        ...LAMBDA_V8_FLAGS,
        '--input-type=module',
        '-e',
        `await import(${JSON.stringify(ioredis)}); const t = performance.now(); ${imports} console.log(performance.now() - t); process.exit(0);`,
      ]);
      times.push(Number(stdout.trim()));
    }
    return {
      name: COLD_ROWS.layerOwn,
      bytes: loadedBytes(files, dirname(layer.index)),
      ...timing(times),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const OFF = { RATE_LIMIT_CODE_CACHE: 'off' };

/** What Lambda's runtime interface client has done before it imports a function: node:http required, an Agent made. */
const RUNTIME_CLIENT_SETUP =
  "const { Agent } = process.getBuiltinModule('node:http'); new Agent({ keepAlive: true, maxSockets: 1 });";

/** The rows coldStartSplit reads (the bars judge the first). */
export const COLD_ROWS = {
  /** What Lambda loads: Lambda's V8 flags, the deployed layer without its code cache. */
  layerAsDeployed:
    'layer without its code cache: limiter + middleware + config (as deployed, RATE_LIMIT_CODE_CACHE=off)',
  /** The same under Node's default V8 flags, where Node's own built-ins use their code cache (not Lambda's shape). */
  layerDefaultFlags:
    'layer without its code cache, default V8 flags (not how Lambda starts Node): limiter + middleware + config',
  /** The judged row's import after node:http, which Lambda's runtime interface client loads before the init. */
  layerAfterRuntimeHttp:
    "layer without its code cache, after node:http as Lambda's runtime client loads it before the init: limiter + middleware + config",
  layerWithCache: 'layer: limiter + middleware + config (what every HTTP function loads; with its code cache)',
  redisClient: "ioredis alone (the layer's vendor/ioredis.mjs, with its code cache)",
  layerOwn: "layer's own part: limiter + middleware + config, ioredis loaded first",
  functionPrefix: 'function: ',
} as const;

export async function bundleFigures(runs = 9): Promise<BundleFigures[]> {
  const out = mkdtempSync(join(tmpdir(), 'rl-bundles-'));
  const built = await buildAll(out);
  const lambda = layOutLikeLambda(built);
  const { layer } = built;
  const layerDir = dirname(layer.index as string);
  const figures: BundleFigures[] = [];
  const measure = async (
    name: string,
    files: string[],
    env: Record<string, string> = {},
    v8Flags = LAMBDA_V8_FLAGS,
    setup = '',
  ) =>
    figures.push({
      name,
      bytes: loadedBytes(files, layerDir),
      ...(await coldImportMs(files, runs, lambda.nodePath, env, v8Flags, setup)),
    });
  for (const [entry, file] of Object.entries(layer)) {
    const name = entry === 'index' ? LAYER_PACKAGE : `${LAYER_PACKAGE}/${entry}`;
    await measure(
      `layer: ${name}${entry === 'ssm' ? " (+ SDK; loaded at first use: the admin function's first command)" : ''}`,
      [file],
    );
  }
  const part = [layer.index as string, layer.middleware as string, layer.config as string];
  await measure(COLD_ROWS.layerWithCache, part);
  await measure(COLD_ROWS.layerAsDeployed, part, OFF);
  await measure(COLD_ROWS.layerDefaultFlags, part, OFF, []);
  // The runtime interface client (aws-lambda-nodejs-runtime-interface-client, RAPIDClient) requires node:http and
  // makes an Agent before it loads the function: net, stream and their internals are then loaded already.
  await measure(COLD_ROWS.layerAfterRuntimeHttp, part, OFF, LAMBDA_V8_FLAGS, RUNTIME_CLIENT_SETUP);
  const vendor = join(dirname(layer.index as string), IOREDIS_VENDOR.module);
  await measure(COLD_ROWS.redisClient, [vendor]);
  await measure(
    "ioredis alone without the code cache (the layer's vendor/ioredis.mjs, RATE_LIMIT_CODE_CACHE=off)",
    [vendor],
    OFF,
  );
  figures.push(await layerOwnPart(runs));
  for (const [route, file] of Object.entries(lambda.handlers))
    await measure(`${COLD_ROWS.functionPrefix}${route} (+ layer, as deployed: no code cache)`, [file], OFF);
  // What the first use then loads (not the cold start): the admin's first command, the LLM's first admitted call.
  const bedrock = join(out, 'first-use-bedrock.mjs');
  writeFileSync(bedrock, "export * from '@aws-sdk/client-bedrock-runtime';\n");
  figures.push({
    name: 'at first use: the Bedrock SDK (the llm function, its first admitted call)',
    bytes: 0,
    ...(await coldImportMs([bedrock], runs, lambda.nodePath)),
  });
  return figures;
}

/** Every figure's row: the median and the spread of its fresh processes. */
export function figuresTable(figures: readonly BundleFigures[], runs: number): string[] {
  const spread = (f: BundleFigures) =>
    f.minMs === undefined || f.maxMs === undefined ? '' : ` (${f.minMs.toFixed(1)}–${f.maxMs.toFixed(1)})`;
  return [
    `| module | bytes loaded | cold import, median of ${runs} (min–max) |`,
    '|---|---|---|',
    ...figures.map((f) => `| ${f.name} | ${f.bytes} | ${f.coldImportMs.toFixed(1)} ms${spread(f)} |`),
  ];
}

/**
 * The cold start's split, under Lambda's V8 flags: what every HTTP function's
 * layer part costs without its code cache (as deployed: the judged figure),
 * with it, and without it under default V8 flags (Node's own built-ins then
 * cached: not Lambda's shape); the Redis client's share (the layer's ioredis
 * alone, with its cache: its module evaluation and the Node built-ins it
 * loads), the layer's own part (measured with ioredis loaded first; the
 * difference of the first two is noisier), and the slowest function bundle.
 */
export function coldStartSplit(figures: readonly BundleFigures[]): ColdStartSplit {
  const cold = (name: string) => figures.find((f) => f.name === name)?.coldImportMs ?? Number.NaN;
  const functions = figures.filter((f) => f.name.startsWith(COLD_ROWS.functionPrefix));
  const slowest = functions.reduce((a, b) => (b.coldImportMs > a.coldImportMs ? b : a));
  return {
    layerWithoutCacheMs: cold(COLD_ROWS.layerAsDeployed),
    layerDefaultFlagsMs: cold(COLD_ROWS.layerDefaultFlags),
    layerAfterRuntimeHttpMs: cold(COLD_ROWS.layerAfterRuntimeHttp),
    layerMs: cold(COLD_ROWS.layerWithCache),
    redisClientMs: cold(COLD_ROWS.redisClient),
    layerOwnMs: cold(COLD_ROWS.layerOwn),
    slowest,
  };
}

/** The alternatives of bench/cold-alternatives.ts, and the layer's part with and without its code cache, and with Node's compile cache on top. */
export async function alternativeFigures(runs: number): Promise<AlternativeFigures[]> {
  const cache = new URL('../node_modules/.cache/', import.meta.url).pathname;
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(cache, 'rl-cold-alt-'));
  try {
    const layer = await bundleLayer(join(dir, 'layer'));
    const part: Variant = {
      name: 'layer: limiter + middleware + config (as built: ioredis with its code cache)',
      imports: [layer.index, layer.middleware, layer.config],
      bytes: loadedBytes([layer.index, layer.middleware, layer.config], dirname(layer.index)),
    };
    const withoutCache: Variant = {
      ...part,
      name: 'layer: limiter + middleware + config, its code cache off (RATE_LIMIT_CODE_CACHE=off)',
      env: { RATE_LIMIT_CODE_CACHE: 'off' },
    };
    const asDeployed: Variant = {
      ...withoutCache,
      name: "layer: limiter + middleware + config, its code cache off, under Lambda's V8 flags (as Lambda loads it)",
      nodeArgs: lambdaV8Flags(),
    };
    const layerRows = await measureVariants(
      [part, withoutCache, asDeployed, await withCompileCache(withoutCache, dir), await withCompileCache(part, dir)],
      runs,
    );
    return [...(await clientAlternatives(dir, runs, join(dirname(layer.index), IOREDIS_VENDOR.module))), ...layerRows];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const runs = Number(process.env.BENCH_COLD_RUNS ?? 9);
  const figures = await bundleFigures(runs);
  const {
    layerMs,
    layerWithoutCacheMs,
    layerDefaultFlagsMs,
    layerAfterRuntimeHttpMs,
    redisClientMs,
    layerOwnMs,
    slowest,
  } = coldStartSplit(figures);
  const summary = `Under Lambda's V8 flags: layer part as deployed (no code cache) ${layerWithoutCacheMs.toFixed(1)} ms (${layerAfterRuntimeHttpMs.toFixed(1)} ms after the runtime client's node:http; under default V8 flags ${layerDefaultFlagsMs.toFixed(1)} ms; with its code cache ${layerMs.toFixed(1)} ms); ioredis alone ${redisClientMs.toFixed(1)} ms with its cache; the layer's own part ${layerOwnMs.toFixed(1)} ms; slowest ${slowest.name} ${slowest.coldImportMs.toFixed(1)} ms`;
  const alternatives = await alternativeFigures(runs);
  const stamp = new Date().toISOString().replace(/:/g, '-').slice(0, 19);
  const lines = [
    `# Cold start ${stamp}`,
    '',
    `\`npm run bench:cold\`: each module imported in ${runs} fresh Node ${process.version} processes (Node's own start excluded) under Lambda's V8 flags (\`${LAMBDA_V8_FLAGS.join(' ')}\`) unless a row says default V8 flags, the functions laid out as Lambda sees them (the layer under /opt, the SDK the runtime's) and, as deployed, without the layer's code cache.`,
    '',
    ...figuresTable(figures, runs),
    '',
    summary,
    '',
    '## Alternatives, side by side',
    '',
    `Interleaved run by run (${runs} each), so a burst of load on this shared host hits every variant alike.`,
    '',
    ...alternativesTable(alternatives),
    '',
  ];
  console.log(lines.join('\n'));
  if (process.env.BENCH_OUT !== '') {
    const dir = process.env.BENCH_OUT ?? new URL('./results/', import.meta.url).pathname;
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `cold-${stamp}.md`), `${lines.join('\n')}\n`);
    console.log(`wrote ${join(dir, `cold-${stamp}.md`)}`);
  }
}
