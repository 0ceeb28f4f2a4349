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
  // Once every report is out: a failed site's run is a failed invocation, so the function's error alarm
  // sees it (the schedule's target does not retry it: retryAttempts 0)
  const failed = reports.filter(([, report]) => 'error' in report).map(([site]) => site);
  if (failed.length > 0) throw new HarvestRunError(failed, bySite);
  return bySite;
}

/** Some site's run failed; every site's report, the failed ones' errors among them. */
export class HarvestRunError extends Error {
  override readonly name = 'HarvestRunError';
  readonly sites: Readonly<Record<string, unknown>>;

  constructor(failed: readonly string[], sites: Readonly<Record<string, unknown>>) {
    super(`the harvest run of ${failed.join(', ')} failed (the other sites' runs are reported)`);
    this.sites = sites;
  }
}
