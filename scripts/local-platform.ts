/**
 * The consumers behind the local gateway, in this process, as Lambda gives
 * them their settings (the environment): the tests, the load benchmark and
 * the demo start the platform this way. Parameters are the local file's
 * (config/local-parameters.json) with the caller's overrides merged in.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readOuterLine } from '../config/outer-line.ts';
import { type Gateway, type GatewayOptions, startGateway } from './gateway.ts';
import { localStageEnvironment, plainRedisEnvironment } from './local-stage.ts';

const LOCAL_PARAMETERS = new URL('../config/local-parameters.json', import.meta.url);

/** Parameters by name, `over` laid on `base`: an object over an object field by field, anything else replaces. */
export function mergeParameters(
  base: Readonly<Record<string, unknown>>,
  over: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...base };
  for (const [name, value] of Object.entries(over)) {
    const under = merged[name];
    merged[name] = typeof under === 'object' && typeof value === 'object' ? { ...under, ...value } : value;
  }
  return merged;
}

export interface LocalPlatform {
  readonly gateway: Gateway;
  /** Where accepted events go (JSON lines). */
  readonly sinkFile: string;
  /** Where each refusal is written (JSON lines). */
  readonly refusalLog: string;
}

export async function startLocalPlatform(
  options: {
    /** A plain Redis to use; otherwise the environment's (the tests' cluster). */
    redisUrl?: string;
    /** Parameters by name, merged over the local file's (an object over an object, field by field). */
    parameters?: Record<string, unknown>;
    gateway?: GatewayOptions;
    /** Let the consumers print their EMF metrics. @default false */
    metrics?: boolean;
    /** Keep each route's own throttle (config/outer-line.json). @default false: a flood of one route draws from the stage's bucket */
    routeThrottles?: boolean;
    /** Runs once the environment is set, before the handlers are loaded (a benchmark's own platform parts: usePlatform). */
    beforeHandlers?: () => Promise<void>;
  } = {},
): Promise<LocalPlatform> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-platform-'));
  const parametersFile = join(dir, 'parameters.json');
  const parameters = mergeParameters(
    JSON.parse(readFileSync(LOCAL_PARAMETERS, 'utf8')) as Record<string, unknown>,
    options.parameters ?? {},
  );
  writeFileSync(parametersFile, JSON.stringify(parameters));
  const sinkFile = join(dir, 'events.jsonl');
  const refusalLog = process.env.RATE_LIMIT_REFUSAL_LOG || join(dir, 'refusals.jsonl');
  Object.assign(process.env, {
    ...(options.redisUrl ? plainRedisEnvironment(options.redisUrl, { withoutAuth: true }) : {}),
    ...localStageEnvironment({ parametersFile, sinkFile, refusalLog }),
    POWERTOOLS_METRICS_DISABLED: options.metrics ? 'false' : 'true',
  });
  const outerLine = options.routeThrottles
    ? readOuterLine()
    : { ...readOuterLine(), routeThrottles: {}, defaultRouteThrottle: undefined };
  await options.beforeHandlers?.();
  const gateway = await startGateway({ outerLine, ...options.gateway });
  return { gateway, sinkFile, refusalLog };
}
