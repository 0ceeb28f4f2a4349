/**
 * What one harvesting run needs, from the platform of this container: the
 * pacer and the parts a worker uses. Shared by the Lambda handler (EventBridge
 * schedule) and the local worker process (`node functions/harvester/run.ts`).
 */
import { platform } from '../shared/platform.ts';
import { AdaptivePacer } from './pacer.ts';
import { type HarvestReport, harvestInRounds } from './worker.ts';

/** Each worker's pace while Redis cannot decide: one request per second per worker, counted. */
export const LOCAL_RATE_PER_SECOND = 1;

export function pageUrl(source: string, site: string): (page: number) => string {
  const base = source.replace(/\/+$/, '');
  return (page) => `${base}/sites/${encodeURIComponent(site)}/pages/${page}`;
}

export async function runHarvest(options: {
  source: string;
  site: string;
  until: number;
  stop?: AbortSignal;
}): Promise<HarvestReport & { stats: AdaptivePacer['stats'] }> {
  const { limiter, acceptedOnce, redis, sink, ready, observer } = platform();
  await ready;
  const pacer = new AdaptivePacer({
    limiter,
    once: acceptedOnce,
    localRatePerSecond: LOCAL_RATE_PER_SECOND,
    observer,
  });
  const report = await harvestInRounds(
    {
      scope: options.site,
      pageUrl: pageUrl(options.source, options.site),
      until: options.until,
      ...(options.stop ? { stop: options.stop } : {}),
    },
    { pacer, redis, sink },
  );
  return { ...report, stats: pacer.stats };
}
