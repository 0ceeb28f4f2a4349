/**
 * `npm run build`: the Lambda artefacts under dist/ (esbuild, ESM, node24).
 *
 *   dist/layer/nodejs/node_modules/@platform/rate-limit/   the layer, in Lambda's layout
 *   dist/functions/<id>/handler.mjs                        one bundle per route and scheduled worker, layer external
 *   dist/services/<id>/main.mjs                            one self-contained bundle per long-running service
 *   dist/functions/node_modules -> ../layer/nodejs/node_modules
 *       the local stand-in for the layer mount (`npm start -- --bundles`): Node
 *       resolves a bare `@platform/rate-limit` from the bundle's folder upward
 */
import { mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { bundleFunctions, bundleLayer, bundleServices } from './bundle.ts';

export const DIST = new URL('../dist/', import.meta.url).pathname;

export async function buildAll(
  dist = DIST,
): Promise<{ layer: Record<string, string>; functions: Record<string, string> }> {
  rmSync(join(dist, 'layer'), { recursive: true, force: true });
  rmSync(join(dist, 'functions'), { recursive: true, force: true });
  rmSync(join(dist, 'services'), { recursive: true, force: true });
  const layer = await bundleLayer(join(dist, 'layer'));
  const functions = await bundleFunctions(dist);
  await bundleServices(dist);
  mkdirSync(join(dist, 'functions'), { recursive: true });
  symlinkSync(join('..', 'layer', 'nodejs', 'node_modules'), join(dist, 'functions', 'node_modules'), 'dir');
  return { layer, functions };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { functions } = await buildAll();
  console.log(`built the layer and ${Object.keys(functions).length} functions into ${DIST}`);
}
