import { createHash } from 'node:crypto';
import { readLua } from './lua-sources.ts';

/**
 * The Lua scripts, assembled from the fragments in `lua/`. Each entry script
 * lists the library fragments it needs before its own body; the SHA is of the
 * assembled text (a test asserts it equals what `SCRIPT LOAD` returns).
 */
export interface LuaScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

export type ScriptName = 'check' | 'checkTokenBucket' | 'checkSlidingWindow' | 'recordFailure' | 'setRate';

const PARTS: Readonly<Record<ScriptName, readonly string[]>> = {
  check: ['lib/token_bucket', 'lib/sliding_window', 'lib/failure_backoff', 'check'],
  // one limit of one strategy: no generic loop, fewer closures per call
  checkTokenBucket: ['lib/token_bucket', 'check_token_bucket'],
  checkSlidingWindow: ['lib/sliding_window', 'check_sliding_window'],
  recordFailure: ['lib/failure_backoff', 'record_failure'],
  setRate: ['lib/token_bucket', 'set_rate'],
};

export function luaScript(name: string, source: string): LuaScript {
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

export type ScriptSet = Readonly<Record<ScriptName, LuaScript>>;

/**
 * All scripts with the given clock fragment in front. Production code only
 * ever uses `productionScripts()`, whose clock is Redis `TIME`.
 */
export function assembleScripts(clockSource: string): ScriptSet {
  const entries = Object.entries(PARTS).map(([name, parts]) => [
    name,
    luaScript(name, [clockSource, ...parts.map(readLua)].join('\n')),
  ]);
  return Object.fromEntries(entries) as ScriptSet;
}

let production: ScriptSet | undefined;

export function productionScripts(): ScriptSet {
  production ??= assembleScripts(readLua('lib/clock'));
  return production;
}
