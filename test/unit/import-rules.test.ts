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
const ROUTE_DATA = /^functions\/((routes|route|workers|secret-headers)\.ts|[a-z-]+\/(route|metrics)\.ts)$/;

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
