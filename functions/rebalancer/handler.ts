/**
 * PLACEHOLDER (stream regioninfra): stands in for the rebalancer regioncore
 * builds (issue 32), so that the two-region stage synthesizes before the two
 * branches meet. The lead takes regioncore's file at merge. It does nothing
 * but refuse: a template built with it carries the mark below, the synth
 * warns, and `npm run deploy` refuses it (infra/rebalancer.ts).
 */

/** Kept in the bundle (a string the minifier keeps): infra/rebalancer.ts finds it there. */
export const PLACEHOLDER = 'REBALANCER_PLACEHOLDER';

export async function handler(): Promise<never> {
  throw new Error(`${PLACEHOLDER}: the rebalancer is not built into this bundle`);
}
