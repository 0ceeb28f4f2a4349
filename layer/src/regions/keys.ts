/**
 * The keys of the multi-region modes. Each region writes only keys that end
 * in `@<its name>`, and replication (MemoryDB Multi-Region; locally the
 * replicator, scripts/region-replicator.ts) copies them to the other regions
 * whole: one writer per key, so last-writer-wins never loses a write. Every
 * key of one limit keeps the counter's hash tag (one slot for its script).
 */
import { stateKey } from '../policy/keys.ts';
import { COUNTER_PREFIX } from '../redis/keyspace.ts';

/** A region's ring of admission times for one limit (lua/lib/sliding_window.lua's layout). */
export function ringKey(counter: string, region: string): string {
  return `${counter}@${region}`;
}

/** A region's grants hash for one `shares` limit (lua/lib/regions.lua's fields). */
export function grantsKey(counter: string, region: string): string {
  return `${stateKey(counter, 'grants')}@${region}`;
}

/** The limits a region refused lately, for the other regions' rebalancers (a sorted set: member → ms). */
export function demandKey(region: string): string {
  return `${COUNTER_PREFIX}{regions}:demand@${region}`;
}

/**
 * Where `region`'s rebalancer stopped reading `other`'s demand set (`<score> <members at it read>`):
 * written by `region` only, so it ends in its suffix like every key it writes.
 */
export function demandCursorKey(other: string, region: string): string {
  return `${COUNTER_PREFIX}{regions}:demand-read:${other}@${region}`;
}

/** The suffix every key a region writes ends with (what its replicator copies). */
export function ownKeySuffix(region: string): string {
  return `@${region}`;
}
