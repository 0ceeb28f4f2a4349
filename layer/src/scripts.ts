import { createHash } from 'node:crypto';
import { readLua } from './lua-sources.ts';

/**
 * The Lua scripts, assembled from the files in `lua/`: a clock fragment, the
 * library fragments an entry script lists on its `-- fragments:` line, then
 * the entry script itself. The SHA is of the assembled text (a test asserts it
 * equals what `SCRIPT LOAD` returns); `npm run lua:dump` writes them out.
 */
export interface LuaScript {
  readonly name: ScriptName;
  readonly source: string;
  readonly sha: string;
}

/** Each script by its TypeScript name, and its entry file in `lua/`. */
export const ENTRY_SCRIPTS = {
  check: 'check',
  checkTokenBucket: 'check_token_bucket',
  checkSlidingWindow: 'check_sliding_window',
  recordFailure: 'record_failure',
  setRate: 'set_rate',
  reserve: 'reserve',
  settle: 'settle',
} as const;

export type ScriptName = keyof typeof ENTRY_SCRIPTS;
export type ScriptSet = Readonly<Record<ScriptName, LuaScript>>;

/** The fragments an entry script names on its `-- fragments:` line. */
export function fragmentsOf(entrySource: string, entry: string): string[] {
  const line = /^-- fragments: (.+)$/m.exec(entrySource);
  if (!line) throw new Error(`lua/${entry}.lua has no "-- fragments:" line`);
  return (line[1] as string).trim().split(/\s+/);
}

function luaScript(name: ScriptName, source: string): LuaScript {
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

/**
 * All scripts with the given clock fragment in front. Production code only
 * ever uses `productionScripts()`, whose clock is Redis `TIME`.
 */
export function assembleScripts(clockSource: string): ScriptSet {
  const entries = Object.entries(ENTRY_SCRIPTS).map(([name, entry]) => {
    const body = readLua(entry);
    const parts = [clockSource, ...fragmentsOf(body, entry).map(readLua), body];
    return [name, luaScript(name as ScriptName, parts.join('\n'))];
  });
  return Object.fromEntries(entries) as ScriptSet;
}

let production: ScriptSet | undefined;

export function productionScripts(): ScriptSet {
  production ??= assembleScripts(readLua('lib/clock'));
  return production;
}
