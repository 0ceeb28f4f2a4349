/**
 * Runs a test against the built layer instead of its TypeScript source:
 * `node --import ./test/support/built-layer.ts --test <file>` resolves
 * `@platform/rate-limit` and its subpaths to dist/layer (npm run build), so the
 * client under test is the one the layer ships (its ioredis bundle run with
 * its V8 code cache). The test's own `ioredis` stays the repository's.
 * RATE_LIMIT_BUILT_LAYER: another build's dist folder (test/e2e/lambda-layout.test.ts).
 */
import { registerHooks } from 'node:module';
import { pathToFileURL } from 'node:url';

const DIST = process.env.RATE_LIMIT_BUILT_LAYER
  ? pathToFileURL(`${process.env.RATE_LIMIT_BUILT_LAYER.replace(/\/?$/, '/')}`)
  : new URL('../../dist/', import.meta.url);
const LAYER = new URL('layer/nodejs/node_modules/@platform/rate-limit/', DIST);

registerHooks({
  resolve(specifier, context, nextResolve) {
    const match = /^@platform\/rate-limit(?:\/(\w+))?$/.exec(specifier);
    if (!match) return nextResolve(specifier, context);
    return { url: pathToFileURL(new URL(`${match[1] ?? 'index'}.mjs`, LAYER).pathname).href, shortCircuit: true };
  },
});
