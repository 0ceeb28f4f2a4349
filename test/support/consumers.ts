/**
 * The consumers behind the local gateway, in this test process: settings
 * through the environment, as Lambda gives them, then the gateway on a free
 * port. Call once per test file (each file runs in its own process). By
 * default they run on the suite's Redis Cluster, production's shape; a
 * `redisUrl` puts them on that single node instead.
 */

import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { readOuterLine } from '../../config/outer-line.ts';
import { type GatewayOptions, startGateway } from '../../scripts/gateway.ts';

export interface TestPlatform {
  readonly base: string;
  readonly sinkFile: string;
  /** Accepted events the sink holds. */
  events(): { source: string; id: string; scope: string }[];
  close(): Promise<void>;
}

const LOCAL_PARAMETERS = new URL('../../config/local-parameters.json', import.meta.url);

/**
 * A 2 s time budget for every policy, set as an operator would (a policy
 * override): these tests assert what the consumers decide, and on a loaded
 * 2-core CI machine with a 3-node cluster a check can take longer than
 * production's 100 ms. The budget itself is tested in failure-modes.test.ts.
 */
function generousBudgets(): Record<string, unknown> {
  return Object.fromEntries(
    Object.keys(PLATFORM_POLICIES).map((name) => [`/ratelimit/local/overrides/${name}`, { timeBudget: '2 s' }]),
  );
}

export async function consumers(
  options: {
    redisUrl?: string;
    parameters?: Record<string, unknown>;
    gateway?: GatewayOptions;
    /** Let the consumers print their EMF metrics (off by default: they would fill the test output). */
    metrics?: boolean;
  } = {},
): Promise<TestPlatform> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-consumers-'));
  const parametersFile = join(dir, 'parameters.json');
  const local = JSON.parse(readFileSync(LOCAL_PARAMETERS, 'utf8')) as Record<string, unknown>;
  const parameters: Record<string, unknown> = { ...generousBudgets(), ...local };
  for (const [name, value] of Object.entries(options.parameters ?? {})) {
    const base = parameters[name];
    parameters[name] = typeof base === 'object' && typeof value === 'object' ? { ...base, ...value } : value;
  }
  writeFileSync(parametersFile, JSON.stringify(parameters));
  const sinkFile = join(dir, 'events.jsonl');
  Object.assign(process.env, {
    ...(options.redisUrl ? { REDIS_URL: options.redisUrl, REDIS_CLUSTER_NODES: '', REDIS_AUTH_SECRET_FILE: '' } : {}),
    RATE_LIMIT_PARAMETER_PATH: '/ratelimit/local',
    RATE_LIMIT_PARAMETERS_FILE: parametersFile,
    EVENT_SINK_FILE: sinkFile,
    LOGIN_USERS_FILE: new URL('../../config/local-users.json', import.meta.url).pathname,
    API_KEYS_FILE: new URL('../../config/local-api-keys.json', import.meta.url).pathname,
    POWERTOOLS_METRICS_DISABLED: options.metrics ? 'false' : 'true',
  });
  // the routes' own throttles (config/outer-line.json) are the outer line's business (gateway.test.ts):
  // these tests flood one route on purpose, and draw from the stage's bucket as before
  const gateway = await startGateway({ outerLine: { ...readOuterLine(), routeThrottles: {} }, ...options.gateway });
  return {
    base: gateway.url,
    sinkFile,
    events() {
      let text = '';
      try {
        text = readFileSync(sinkFile, 'utf8');
      } catch {
        return [];
      }
      return text
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { source: string; id: string; scope: string });
    },
    close: () => gateway.close(),
  };
}
