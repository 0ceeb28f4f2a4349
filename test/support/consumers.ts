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
import { type GatewayOptions, startGateway } from '../../scripts/gateway.ts';

export interface TestPlatform {
  readonly base: string;
  readonly sinkFile: string;
  /** Accepted events the sink holds. */
  events(): { source: string; id: string; scope: string }[];
  close(): Promise<void>;
}

const LOCAL_PARAMETERS = new URL('../../config/local-parameters.json', import.meta.url);

export async function consumers(
  options: { redisUrl?: string; parameters?: Record<string, unknown>; gateway?: GatewayOptions } = {},
): Promise<TestPlatform> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-consumers-'));
  const parametersFile = join(dir, 'parameters.json');
  const local = JSON.parse(readFileSync(LOCAL_PARAMETERS, 'utf8')) as Record<string, unknown>;
  writeFileSync(parametersFile, JSON.stringify({ ...local, ...options.parameters }));
  const sinkFile = join(dir, 'events.jsonl');
  Object.assign(process.env, {
    ...(options.redisUrl ? { REDIS_URL: options.redisUrl, REDIS_CLUSTER_NODES: '' } : {}),
    RATE_LIMIT_PARAMETER_PATH: '/ratelimit/local',
    RATE_LIMIT_PARAMETERS_FILE: parametersFile,
    EVENT_SINK_FILE: sinkFile,
    POWERTOOLS_METRICS_DISABLED: 'true',
  });
  const gateway = await startGateway(options.gateway);
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
    async close() {
      await gateway.close();
      const { platform } = await import('../../functions/shared/platform.ts');
      platform().redis.disconnect();
    },
  };
}
