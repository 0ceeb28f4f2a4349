import { createHash } from 'node:crypto';
import { fragmentsOf, type LuaScript } from '../lua/scripts.ts';
import { readLua } from '../lua/sources.ts';

/** The multi-region scripts (lua/regions_*.lua), by entry file. */
export const REGION_SCRIPTS = ['regions_shares', 'regions_give', 'regions_approximate'] as const;
export type RegionScriptName = (typeof REGION_SCRIPTS)[number];
export type RegionScripts = Readonly<Record<RegionScriptName, LuaScript>>;

/** Assembled as layer/src/scripts.ts assembles the others: the clock, the fragments, the entry. */
export function assembleRegionScripts(clockSource: string): RegionScripts {
  const entries = REGION_SCRIPTS.map((entry) => {
    const body = readLua(entry);
    const source = [clockSource, ...fragmentsOf(body, entry), body].join('\n');
    return [entry, { name: entry, source, sha: createHash('sha1').update(source).digest('hex') }] as const;
  });
  return Object.fromEntries(entries) as unknown as RegionScripts;
}

let production: RegionScripts | undefined;

/** With Redis `TIME` as the clock (every deployed check). */
export function productionRegionScripts(): RegionScripts {
  production ??= assembleRegionScripts(readLua('lib/clock'));
  return production;
}
