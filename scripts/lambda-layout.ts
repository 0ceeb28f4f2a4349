/**
 * The built artefacts laid out as a Lambda execution environment sees them,
 * in a fresh temporary folder: each function's bundle alone in
 * `var/task/<route id>/`, the layer under `opt/nodejs/node_modules/`, and the
 * AWS SDK (which the runtime ships) under `var/runtime/node_modules/`. A
 * process started with `lambdaNodeArgs` and `lambdaEnv` finds the layer only
 * through NODE_PATH, as a function does in Lambda (scripts/lambda-resolve.ts).
 */
import { cpSync, mkdirSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, delimiter, dirname, join } from 'node:path';

const ROOT = new URL('..', import.meta.url).pathname;

export interface LambdaLayout {
  readonly root: string;
  /** Each route's handler module, by route id. */
  readonly handlers: Readonly<Record<string, string>>;
  /** The NODE_PATH Lambda would set: the layer's folder, then the runtime's. */
  readonly nodePath: string;
}

/** Node flags that make ESM resolve bare specifiers as Lambda does. */
export const lambdaNodeArgs: readonly string[] = ['--import', join(ROOT, 'scripts', 'lambda-resolve.ts')];

export function layOutLikeLambda(built: {
  layer: Readonly<Record<string, string>>;
  functions: Readonly<Record<string, string>>;
}): LambdaLayout {
  const root = mkdtempSync(join(tmpdir(), 'rl-lambda-'));
  const optModules = join(root, 'opt', 'nodejs', 'node_modules');
  // The layer's package folder (…/node_modules/@platform/rate-limit), copied whole.
  const layerPackage = dirname(built.layer.index as string);
  const scope = basename(dirname(layerPackage));
  cpSync(layerPackage, join(optModules, scope, basename(layerPackage)), { recursive: true });
  const runtimeModules = join(root, 'var', 'runtime', 'node_modules');
  mkdirSync(runtimeModules, { recursive: true });
  symlinkSync(join(ROOT, 'node_modules', '@aws-sdk'), join(runtimeModules, '@aws-sdk'), 'dir');
  const handlers: Record<string, string> = {};
  for (const [route, bundle] of Object.entries(built.functions)) {
    const task = join(root, 'var', 'task', route);
    mkdirSync(task, { recursive: true });
    cpSync(bundle, join(task, basename(bundle)));
    handlers[route] = join(task, basename(bundle));
  }
  return { root, handlers, nodePath: [optModules, runtimeModules].join(delimiter) };
}
