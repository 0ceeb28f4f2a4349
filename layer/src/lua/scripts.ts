import { createHash } from 'node:crypto';
import { STRATEGY_UNITS } from '../strategies/index.ts';
import { assembleEntry } from './assembly.ts';
import { readLua } from './sources.ts';

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

/**
 * The scripts every strategy shares, by entry file in `lua/`. A strategy's
 * own check script and the scripts of its operations are named by its unit
 * (strategies/: `ownScript.entry`, `operations`).
 */
export const ENTRY_SCRIPTS = {
  check: 'check',
  checkFirst: 'check_first',
  reserveInFlight: 'reserve_in_flight',
  settleInFlight: 'settle_in_flight',
  settleClaim: 'settle_claim',
} as const;

/** The scripts of one clock: every entry file's, and lua/check.lua narrowed to the strategies a check uses. */
export interface ScriptSet {
  /** By entry file: the shared scripts and each strategy's own script (`npm run lua:dump` writes these). */
  readonly entries: Readonly<Record<string, LuaScript>>;
  /** A script by the name a ScriptCall gives: an entry file, or a narrowed check (`checkScriptName`). */
  named(name: string): LuaScript | undefined;
}

const NARROWED_CHECK = `${ENTRY_SCRIPTS.check}:`;

/**
 * The name of lua/check.lua assembled with only these strategies' fragments
 * (`check:tb,qt`). Every fragment's functions are closures Redis creates
 * again on every call of a script: the whole registry's cost a check of two
 * limits ~3.8 µs of Redis CPU for nothing (`npm run bench:scripts`).
 */
export function checkScriptName(kinds: Iterable<string>): string {
  const used = new Set(kinds);
  return (
    NARROWED_CHECK +
    STRATEGY_UNITS.filter((u) => used.has(u.kind))
      .map((u) => u.kind)
      .join(',')
  );
}

/** Every entry file: the shared scripts, then each strategy's own check script and its operations' scripts. */
export function entryFiles(): string[] {
  const own = STRATEGY_UNITS.flatMap((unit) => [
    ...('ownScript' in unit && unit.ownScript ? [unit.ownScript.entry] : []),
    ...Object.values(unit.operations ?? {}).map((operation) => operation.entry),
  ]);
  return [...new Set([...Object.values(ENTRY_SCRIPTS), ...own])];
}

type Unit = (typeof STRATEGY_UNITS)[number];

/** lua/check.lua's dispatch: each strategy's kind bound to its fragment's three functions. */
function dispatchTable(units: readonly Unit[]): string {
  const rows = units.map(
    ({ kind, valueCounter }) =>
      `  ${kind} = { check = ${kind}_check, apply = ${kind}_apply, unwritten = ${kind}_unwritten, value = ${valueCounter === true} },`,
  );
  return ['local STRATEGIES = {', ...rows, '}'].join('\n');
}

/**
 * The fragments (and generated parts) an entry script names on its
 * `-- fragments:` line, in order; `<strategies>` stands for the given units'
 * (every registered one unless narrowed).
 */
export function fragmentsOf(entrySource: string, entry: string, units: readonly Unit[] = STRATEGY_UNITS): string[] {
  const line = /^-- fragments: (.+)$/m.exec(entrySource);
  if (!line) throw new Error(`lua/${entry}.lua has no "-- fragments:" line`);
  return (line[1] as string)
    .trim()
    .split(/\s+/)
    .filter((name) => name !== 'none') // an entry that needs no fragment: `-- fragments: none`
    .flatMap((name) =>
      name === '<strategies>'
        ? [...units.map((unit) => readLua(unit.luaFragment)), dispatchTable(units)]
        : [readLua(name)],
    );
}

function luaScript(name: string, source: string): LuaScript {
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

/**
 * All scripts with the given clock fragment in front. Production code only
 * ever uses `productionScripts()`, whose clock is Redis `TIME`. Each entry,
 * and a narrowed check, is assembled the first time it is named, then kept.
 */
export function assembleScripts(clockSource: string): ScriptSet {
  const assemble = (entry: string, units?: readonly Unit[]) => {
    const body = readLua(entry);
    return assembleEntry(clockSource, fragmentsOf(body, entry, units), body); // only what the entry calls
  };
  // each entry assembled (and hashed) when first asked for: a function uses one or two of them, and
  // assembling all at a cold start cost its init ~7-10 ms (built layer, Lambda's V8 flags)
  const entries: Record<string, LuaScript> = {};
  for (const entry of entryFiles()) {
    let script: LuaScript | undefined;
    Object.defineProperty(entries, entry, {
      enumerable: true,
      get: () => {
        script ??= luaScript(entry, assemble(entry));
        return script;
      },
    });
  }
  const narrowed = new Map<string, LuaScript>();
  return {
    entries,
    named(name) {
      const entry = entries[name];
      if (entry || !name.startsWith(NARROWED_CHECK)) return entry;
      let script = narrowed.get(name);
      if (!script) {
        const kinds = name.slice(NARROWED_CHECK.length).split(',');
        const units = STRATEGY_UNITS.filter((u) => kinds.includes(u.kind));
        if (units.length !== kinds.length || checkScriptName(kinds) !== name) return undefined;
        script = luaScript(name, assemble(ENTRY_SCRIPTS.check, units));
        narrowed.set(name, script);
      }
      return script;
    },
  };
}

let production: ScriptSet | undefined;

export function productionScripts(): ScriptSet {
  production ??= assembleScripts(readLua('lib/clock'));
  return production;
}
