/**
 * A region's rebalancer in Lambda (one per region, on an EventBridge schedule
 * of one minute): moves this region's unused share of each `shares` limit to
 * the regions that report demand for it (layer: regions/rebalance.ts). With
 * REBALANCE_PERIOD_SECONDS below 60, one run makes a pass every period until
 * shortly before the next run starts. It writes only this region's store.
 */
import { readSettings } from '@platform/rate-limit/config';
import {
  productionRegionScripts,
  RebalanceFailed,
  type RebalanceReport,
  rebalance,
} from '@platform/rate-limit/regions';
import type { Context } from 'aws-lambda';
import { platform } from '../shared/platform.ts';
import { readRebalancerSettings } from './settings.ts';

/** How often the schedule starts a run (functions/workers.ts). */
export const SCHEDULE_MS = 60_000;
/** How long before the function's timeout a pass starts no more gives. */
const STOP_BEFORE_TIMEOUT_MS = 3_000;

function nextPass(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export async function handler(_event: unknown, context?: Pick<Context, 'getRemainingTimeInMillis'>) {
  const { periodMs } = readRebalancerSettings();
  const { redis, policies, logger, ready } = platform();
  await ready;
  const regions = readSettings().regions;
  const remaining = context?.getRemainingTimeInMillis() ?? SCHEDULE_MS;
  const end = Date.now() + Math.min(SCHEDULE_MS, remaining) - periodMs;
  // no give started past it: the one in flight answers within its budget (1 s), and the run still logs its line
  const until = Date.now() + remaining - STOP_BEFORE_TIMEOUT_MS;
  const reports: RebalanceReport[] = [];
  let failedPasses = 0;
  let failure: RebalanceFailed | undefined;
  for (;;) {
    const started = Date.now();
    try {
      reports.push(await rebalance({ redis, regions, policies, scripts: productionRegionScripts(), until }));
    } catch (error) {
      // the run goes on (the next pass reads the failed one's page again) and still logs its line; it fails at
      // its end, so the function's error alarm sees it (RebalanceFailed carries the message alone: no key)
      failedPasses++;
      const failed = error instanceof RebalanceFailed ? error : new RebalanceFailed(error);
      failure ??= failed;
      logger.warn('rebalance pass failed', { region: regions.region, detail: failed.message });
    }
    if (started + periodMs > end) break;
    await nextPass(started + periodMs - Date.now()); // the period is the design's, not a race being papered over
  }
  // share moved in the run: a limit read again gives only what has come unused since
  const given = reports.reduce((sum, r) => sum + r.given, 0);
  // reads, not members: a set that fits one page is read whole by every pass, so 12 passes count a member 12 times
  const skippedReads = reports.reduce((sum, r) => sum + r.skipped, 0);
  // the last pass's: the members it skipped, and the backlog as the run ends (each pass counts what is still ahead)
  const last = reports.at(-1);
  const [skipped, deferred] = [last?.skipped ?? 0, last?.deferred ?? 0];
  // gives Redis refused for a limit's own state or left unanswered within their budget, summed over the passes
  // like skippedReads (read again next sweep)
  const failedReads = reports.reduce((sum, r) => sum + r.failed, 0);
  // a pass stopped short of the function's timeout: its page and the rest wait for the next run
  const outOfTime = reports.some((r) => r.outOfTime);
  const refusal = reports.find((r) => r.failure !== undefined)?.failure;
  const run = {
    passes: reports.length + failedPasses,
    given,
    skippedReads,
    skipped,
    deferred,
    ...(outOfTime ? { outOfTime } : {}),
    failedReads,
    ...(refusal === undefined ? {} : { failure: refusal }),
    failedPasses,
  };
  logger.info('rebalance run', { region: regions.region, ...run });
  if (failure) throw failure;
  return run;
}
