/**
 * Runs a test against the built layer instead of its TypeScript source:
 * `node --import ./test/support/built-layer.ts --test <file>` resolves
 * `@platform/rate-limit` and its subpaths to dist/layer (npm run build), so the
 * client under test is the one the layer ships (its ioredis bundle run with
 * its V8 code cache). The test's own `ioredis` stays the repository's.
 */
import { registerHooks } from 'node:module';
import { pathToFileURL } from 'node:url';

const LAYER = new URL('../../dist/layer/nodejs/node_modules/@platform/rate-limit/', import.meta.url);

registerHooks({
  resolve(specifier, context, nextResolve) {
    const match = /^@platform\/rate-limit(?:\/(\w+))?$/.exec(specifier);
    if (!match) return nextResolve(specifier, context);
    return { url: pathToFileURL(new URL(`${match[1] ?? 'index'}.mjs`, LAYER).pathname).href, shortCircuit: true };
  },
});
