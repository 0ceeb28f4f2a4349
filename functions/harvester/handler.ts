/**
 * The harvester in Lambda: invoked by an EventBridge schedule, possibly
 * several times at once. Each invocation crawls every site of
 * HARVESTER_SITES until shortly before its own timeout, resuming from the
 * shared cursor the last run left in Redis; all of them share each site's pace.
 */
import type { Context } from 'aws-lambda';
import { platform } from '../shared/platform.ts';
import { runHarvest } from './job.ts';
import { readHarvesterSettings } from './settings.ts';

/** Stop taking pages this long before the function's timeout: a page in flight must land and be handed on. */
export const STOP_BEFORE_TIMEOUT_MS = 15_000;

export async function handler(_event: unknown, context: Pick<Context, 'getRemainingTimeInMillis'>) {
  const { source, sites } = readHarvesterSettings();
  const until = Date.now() + Math.max(0, context.getRemainingTimeInMillis() - STOP_BEFORE_TIMEOUT_MS);
  // Each site's run settles on its own: one that fails takes neither the other sites' reports nor the metrics with it.
  const reports = await Promise.all(
    sites.map((site) =>
      runHarvest({ source, site, until }).then(
        (report) => [site, report] as const,
        (error: unknown) => {
          platform().logger.error('harvest run of a site failed', { site, error: String(error) });
          return [site, { error: String(error) }] as const;
        },
      ),
    ),
  );
  const bySite = Object.fromEntries(reports);
  platform().observer.flush(); // the run's metrics, before the container may be frozen
  platform().logger.info('harvest run', { sites: bySite });
  // A run in which no site could be harvested fails the invocation: Lambda's Errors is what its alarm watches
  // (it pages). One site failing among others does not: the others' run is not lost with it.
  if (reports.every(([, report]) => 'error' in report)) throw new HarvestRunFailed(sites.length);
  return bySite;
}

/** Every site's run of an invocation failed (each logged with its reason). */
export class HarvestRunFailed extends Error {
  override name = 'HarvestRunFailed';
  constructor(sites: number) {
    super(`the harvest run of every site (${sites}) failed; each is logged`);
  }
}
