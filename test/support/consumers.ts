/**
 * The consumers behind the local gateway, in this test process: settings
 * through the environment, as Lambda gives them, then the gateway on a free
 * port. Call once per test file (each file runs in its own process). By
 * default they run on the suite's Redis Cluster, production's shape; a
 * `redisUrl` puts them on that single node instead.
 */

import { readFileSync } from 'node:fs';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import type { GatewayOptions } from '../../scripts/gateway.ts';
import { mergeParameters, startLocalPlatform } from '../../scripts/local-platform.ts';

export interface TestPlatform {
  readonly base: string;
  readonly sinkFile: string;
  /** Accepted events the sink holds. */
  events(): { source: string; id: string; scope: string }[];
  close(): Promise<void>;
}

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
  const parameters = mergeParameters(generousBudgets(), options.parameters ?? {});
  // the routes' own throttles (config/outer-line.json) are the outer line's business (gateway.test.ts):
  // these tests flood one route on purpose, and draw from the stage's bucket as before
  const { gateway, sinkFile } = await startLocalPlatform({ ...options, parameters });
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
