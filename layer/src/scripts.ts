import { createHash } from 'node:crypto';
import { readLua } from './lua-sources.ts';
import { STRATEGY_UNITS } from './strategies/index.ts';

/**
 * The Lua scripts, assembled from the files in `lua/`: a clock fragment, the
 * library fragments an entry script lists on its `-- fragments:` line, then
 * the entry script itself. `<strategies>` on that line stands for every
 * registered strategy's fragment followed by the STRATEGIES dispatch table
 * (lua/check.lua's header). The SHA is of the assembled text (a test asserts
 * it equals what `SCRIPT LOAD` returns); `npm run lua:dump` writes them out.
 */
export interface LuaScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

/** The scripts every strategy shares or that serve one operation, by entry file in `lua/`. */
export const ENTRY_SCRIPTS = {
  check: 'check',
  recordFailure: 'record_failure',
  setRate: 'set_rate',
  reserve: 'reserve',
  settle: 'settle',
  release: 'release',
} as const;

/** A script by its entry file: the shared ones and each strategy's single-limit script. */
export type ScriptSet = Readonly<Record<string, LuaScript>>;

/** Every entry file: the shared scripts, then the strategies' own single-limit scripts. */
export function entryFiles(): string[] {
  const singles = STRATEGY_UNITS.flatMap((unit) => ('single' in unit && unit.single ? [unit.single.entry] : []));
  return [...Object.values(ENTRY_SCRIPTS), ...singles];
}

/** lua/check.lua's dispatch: each registered strategy's kind bound to its fragment's three functions. */
function dispatchTable(): string {
  const rows = STRATEGY_UNITS.map(
    ({ kind }) => `  ${kind} = { check = ${kind}_check, apply = ${kind}_apply, unwritten = ${kind}_unwritten },`,
  );
  return ['local STRATEGIES = {', ...rows, '}'].join('\n');
}

/** The fragments (and generated parts) an entry script names on its `-- fragments:` line, in order. */
export function fragmentsOf(entrySource: string, entry: string): string[] {
  const line = /^-- fragments: (.+)$/m.exec(entrySource);
  if (!line) throw new Error(`lua/${entry}.lua has no "-- fragments:" line`);
  return (line[1] as string)
    .trim()
    .split(/\s+/)
    .flatMap((name) =>
      name === '<strategies>'
        ? [...STRATEGY_UNITS.map((unit) => readLua(unit.luaFragment)), dispatchTable()]
        : [readLua(name)],
    );
}

function luaScript(name: string, source: string): LuaScript {
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

/**
 * All scripts with the given clock fragment in front. Production code only
 * ever uses `productionScripts()`, whose clock is Redis `TIME`.
 */
export function assembleScripts(clockSource: string): ScriptSet {
  const entries = entryFiles().map((entry) => {
    const body = readLua(entry);
    return [entry, luaScript(entry, [clockSource, ...fragmentsOf(body, entry), body].join('\n'))];
  });
  return Object.fromEntries(entries) as ScriptSet;
}

let production: ScriptSet | undefined;

export function productionScripts(): ScriptSet {
  production ??= assembleScripts(readLua('lib/clock'));
  return production;
}
