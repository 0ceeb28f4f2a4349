/**
 * Harvesting workers as separate processes (node functions/harvester/run.ts),
 * each with the platform's local configuration plus the test's overrides.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { PacerStats } from '../../functions/harvester/pacer.ts';
import type { HarvestReport } from '../../functions/harvester/worker.ts';

const RUN = new URL('../../functions/harvester/run.ts', import.meta.url).pathname;
const LOCAL_PARAMETERS = new URL('../../config/local-parameters.json', import.meta.url);

export interface WorkerReport extends HarvestReport {
  readonly stats: PacerStats;
}

export function runWorkers(options: {
  count: number;
  source: string;
  site: string;
  seconds: number;
  redisUrl: string;
  /** Policy overrides by name (merged over the shipped policy, as an operator's override is). */
  overrides?: Record<string, unknown>;
  /** Ends every worker early with SIGTERM (each still reports what it did). */
  stop?: AbortSignal;
}): Promise<WorkerReport[]> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-harvest-'));
  const parameters = {
    ...(JSON.parse(readFileSync(LOCAL_PARAMETERS, 'utf8')) as Record<string, unknown>),
    ...Object.fromEntries(
      Object.entries(options.overrides ?? {}).map(([name, value]) => [`/ratelimit/local/overrides/${name}`, value]),
    ),
  };
  writeFileSync(join(dir, 'parameters.json'), JSON.stringify(parameters));
  const env = {
    PATH: process.env.PATH ?? '',
    REDIS_URL: options.redisUrl,
    RATE_LIMIT_PARAMETER_PATH: '/ratelimit/local',
    RATE_LIMIT_PARAMETERS_FILE: join(dir, 'parameters.json'),
    EVENT_SINK_FILE: join(dir, 'events.jsonl'),
    POWERTOOLS_LOG_LEVEL: 'ERROR',
    POWERTOOLS_METRICS_DISABLED: 'true',
  };
  const args = [RUN, '--source', options.source, '--site', options.site, '--seconds', String(options.seconds)];
  return Promise.all(
    Array.from({ length: options.count }, async () => {
      const run = promisify(execFile)(process.execPath, args, { env });
      const end = () => run.child.kill('SIGTERM');
      if (options.stop?.aborted) end();
      else options.stop?.addEventListener('abort', end, { once: true });
      try {
        const { stdout } = await run;
        return JSON.parse(stdout.trim().split('\n').at(-1) as string) as WorkerReport;
      } finally {
        options.stop?.removeEventListener('abort', end);
      }
    }),
  );
}
