/**
 * Resolves ES module bare specifiers the way Lambda's Node.js runtimes
 * (18 and later) do for a handler in /var/task: Node's own resolution first
 * (node_modules folders up from the importing file), then each folder of
 * `NODE_PATH`, which Lambda sets to its layer folders
 * (`/opt/nodejs/node24/node_modules:/opt/nodejs/node_modules:…`) and the
 * runtime's SDK (`/var/runtime/node_modules`). Node itself reads `NODE_PATH`
 * for `require` only; Lambda extends it to `import` (see docs/deploy.md,
 * "How a function finds the layer").
 *
 * Load it with `node --import ./scripts/lambda-resolve.ts`: the tests and the
 * cold-start figures run the built functions this way, from folders laid out
 * like /var/task and /opt, with no other route to the layer.
 */
import { registerHooks } from 'node:module';
import { delimiter, join } from 'node:path';
import { pathToFileURL } from 'node:url';

const folders = (process.env.NODE_PATH ?? '').split(delimiter).filter(Boolean);

function isBare(specifier: string): boolean {
  return !/^(\.{0,2}\/|[a-z][a-z0-9+.-]*:)/i.test(specifier);
}

registerHooks({
  resolve(specifier, context, nextResolve) {
    try {
      return nextResolve(specifier, context);
    } catch (error) {
      if ((error as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND' || !isBare(specifier)) throw error;
      for (const folder of folders) {
        // A parent just above `folder` makes Node look in `folder` itself.
        const parentURL = pathToFileURL(join(folder, '..', '__lambda_node_path__.mjs')).href;
        try {
          return nextResolve(specifier, { ...context, parentURL });
        } catch {}
      }
      throw error;
    }
  },
});
