/**
 * The import rules of docs/architecture.md, checked on every TypeScript file:
 * the layer is self-contained (it knows no consumer, config, tool or test),
 * the consumers and the deployment reach the layer through its package name
 * only, the CLI imports no function (the admin function imports the CLI), the deployment reads the consumers' route data but no handler, and
 * the tools never import the benchmarks.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

const ROOT = resolve(new URL('../..', import.meta.url).pathname);
const IMPORT = /(?:from|import)\s*\(?\s*'([^']+)'/g;

function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.includes('node_modules'))
    .map((f) => join(dir, f));
}

/** Each import of a file, as a path from the repository root (relative ones) or as written (packages). */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return [...text.matchAll(IMPORT)].map(([, spec]) =>
    (spec as string).startsWith('.') ? relative(ROOT, resolve(ROOT, dirname(file), spec as string)) : (spec as string),
  );
}

function offending(dirs: string[], allowed: (target: string, file: string) => boolean): string[] {
  return dirs.flatMap((dir) =>
    files(dir).flatMap((file) => importsOf(file).flatMap((t) => (allowed(t, file) ? [] : [`${file} → ${t}`]))),
  );
}

const isPackage = (t: string) =>
  !t.includes('/') || !/^(layer|functions|config|infra|cli|scripts|bench|test|lua)\//.test(t);
const inside = (t: string, ...dirs: string[]) => dirs.some((d) => t.startsWith(`${d}/`));
/** The route data a deployment may read (no handler, no layer runtime beyond the package). */
const ROUTE_DATA = /^functions\/((routes|route|workers|secret-headers)\.ts|[a-z-]+\/(route|metrics|settings)\.ts)$/;

describe('Import rules (docs/architecture.md)', () => {
  it('the layer imports only itself, its Lua package and libraries', () => {
    assert.deepEqual(
      offending(['layer'], (t) => inside(t, 'layer') || (isPackage(t) && !t.startsWith('@platform/rate-limit/'))),
      [],
    );
  });

  it('consumers, configuration and the CLI reach the layer by its package name, and no tool, benchmark or deployment', () => {
    assert.deepEqual(
      offending(['functions', 'config', 'cli'], (t, file) =>
        isPackage(t)
          ? true
          : inside(t, 'functions', 'config') || (inside(file, 'cli', 'functions/admin') && inside(t, 'cli')),
      ),
      [],
    );
  });

  it('the CLI never imports the functions (the admin function imports the CLI: no part-level cycle)', () => {
    assert.deepEqual(
      offending(['cli'], (t) => !inside(t, 'functions')),
      [],
    );
  });

  it('the deployment reads route data and the layer package, never a handler', () => {
    assert.deepEqual(
      offending(['infra'], (t) => isPackage(t) || inside(t, 'infra', 'config') || ROUTE_DATA.test(t)),
      [],
    );
  });

  it('the tools never import the benchmarks or the tests', () => {
    assert.deepEqual(
      offending(['scripts', 'cli'], (t) => !inside(t, 'bench', 'test')),
      [],
    );
  });
});

/** The layer's folder of a path under layer/src (`core`, `redis`, …; `index` for the root barrel). */
const concern = (t: string) => /^layer\/src\/([^/.]+)/.exec(t)?.[1];
/** Where a layer file may reach, by its folder: each concern's allowed others (its own folder always). */
const LAYER_CONCERNS: Readonly<Record<string, readonly string[]>> = {
  // the Redis client: the errors and decision types it answers in, nothing of policies or scripts
  redis: ['layer/src/core/errors.ts', 'layer/src/core/decision.ts'],
  // strategies pack and read; they never touch the client, the limiter or configuration
  strategies: [
    'layer/src/policy/',
    'layer/src/core/errors.ts',
    'layer/src/core/decision.ts',
    'layer/src/redis/keyspace.ts',
    'layer/src/regions/modes.ts',
  ],
  policy: [
    'layer/src/strategies/',
    'layer/src/core/errors.ts',
    'layer/src/redis/keyspace.ts',
    'layer/src/regions/modes.ts',
  ],
  // the check's contract: what the strategies pack, never the client that sends it
  lua: ['layer/src/strategies/', 'layer/src/policy/', 'layer/src/core/decision.ts'],
  core: ['layer/src/lua/', 'layer/src/policy/', 'layer/src/strategies/', 'layer/src/redis/'],
  config: [
    'layer/src/core/',
    'layer/src/policy/',
    'layer/src/redis/aws-clients.ts',
    'layer/src/redis/connection.ts',
    'layer/src/regions/settings.ts',
  ],
  // the multi-region modes: a limiter of a region above the core (its modes and settings are leaves the policies and settings read)
  regions: ['layer/src/core/', 'layer/src/lua/', 'layer/src/policy/', 'layer/src/strategies/', 'layer/src/redis/'],
  // the middleware decides through the limiter, never Redis itself
  middleware: ['layer/src/core/', 'layer/src/strategies/index.ts'],
};

/** A file's code without its comments. */
function codeOf(file: string): string {
  return readFileSync(join(ROOT, file), 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/^\s*\/\/.*$/gm, '');
}

/** Every layer module's imports, resolved (relative ones only: packages are checked above). */
function layerImports(): Map<string, string[]> {
  return new Map(files('layer/src').map((file) => [file, importsOf(file).filter((t) => t.startsWith('layer/'))]));
}

describe("Import rules inside the layer (docs/architecture.md, the layer's map)", () => {
  it('each concern reaches only the concerns below it', () => {
    const wrong = [...layerImports()].flatMap(([file, targets]) => {
      const own = concern(file);
      const allowed = own === undefined ? undefined : LAYER_CONCERNS[own];
      if (!allowed) return [];
      return targets
        .filter((t) => concern(t) !== own && !allowed.some((a) => t === a || (a.endsWith('/') && t.startsWith(a))))
        .map((t) => `${file} → ${t}`);
    });
    assert.deepEqual(wrong, []);
    assert.ok(
      Object.keys(LAYER_CONCERNS).every((c) => files('layer/src').some((f) => concern(f) === c)),
      'every concern has files',
    );
  });

  it('no module of the layer imports itself back, type imports included', () => {
    const graph = layerImports();
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (file: string, path: string[]) => {
      state.set(file, 'open');
      for (const next of graph.get(file) ?? []) {
        if (state.get(next) === 'open') cycles.push([...path.slice(path.indexOf(next)), next].join(' → '));
        else if (!state.has(next)) visit(next, [...path, next]);
      }
      state.set(file, 'done');
    };
    for (const file of graph.keys()) if (!state.has(file)) visit(file, [file]);
    assert.deepEqual(cycles, []);
  });

  it('the connection module reads no environment (settings come from config/settings.ts)', () => {
    assert.doesNotMatch(codeOf('layer/src/redis/connection.ts'), /process\.env|readSettings|config\//);
  });

  it('the layer holds no consumer key family and no ACL builder (config/redis-roles.ts does)', () => {
    const found = files('layer/src').flatMap((file) => {
      const code = codeOf(file);
      return [/'(wh|hv|ak):/, /\bKEY_FAMILIES\b/, /\bREDIS_ROLES\b/, /AclRules\b/, /\bmanagedAccessString\b/]
        .filter((pattern) => pattern.test(code))
        .map((pattern) => `${file}: ${pattern}`);
    });
    assert.deepEqual(found, []);
  });

  it('tests, benchmarks, tools and the deployment reach the layer by its package name, never a file of it', () => {
    assert.deepEqual(
      offending(['test', 'bench', 'scripts', 'infra', 'cli', 'functions', 'config'], (t) => !inside(t, 'layer')),
      [],
    );
  });

  it('every subpath the package exports is a bundle entry of the built layer', async () => {
    const { LAYER_ENTRIES } = await import('../../scripts/bundle.ts');
    const { exports } = JSON.parse(readFileSync(join(ROOT, 'layer/package.json'), 'utf8')) as {
      exports: Record<string, string>;
    };
    const bundled = Object.entries(LAYER_ENTRIES).map(([name, file]) => [name === 'index' ? '.' : `./${name}`, file]);
    assert.deepEqual(
      Object.fromEntries(bundled.sort()),
      Object.fromEntries(
        Object.entries(exports)
          .map(([sub, file]) => [sub, `layer/${file.replace(/^\.\//, '')}`])
          .sort(),
      ),
    );
  });
});
