/**
 * `npm run lua:dump [dir]` (default dist/lua): writes every production script
 * as Redis runs it, assembled from lua/ with the Redis `TIME` clock, one file
 * per entry script, byte for byte what the layer sends: `SCRIPT LOAD` of a file
 * answers the SHA the layer uses. An index (README.md) lists each SHA and how
 * to run it by hand with `redis-cli --eval` (KEYS, a comma, then ARGV, in the
 * order the script binds them at the top of its own header).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ENTRY_SCRIPTS, entryFiles, type LuaScript, productionScripts } from '@platform/rate-limit/lua';
import { STRATEGY_UNITS } from '@platform/rate-limit/policy';

const SHARED_EXAMPLES: Record<keyof typeof ENTRY_SCRIPTS, string> = {
  check: "'rl:{demo-g:t}:a:k' 'rl:{demo-g:t}:b:k' , 2 1 tb 1 4 10 100000 0 0 sw 1 2 5 60000000",
  checkFirst:
    "'rl:{demo-u:a}:d:x' 'rl:{demo-u:a}:a:a' , 2 1 bo 1 5 1000000 5000000 9 900000000 1 bo 1 5 1000000 300000000 3 900000000 1",
  reserveInFlight:
    "'rl:{llm:t}:f:t' 'rl:{llm:t}:b:t' 'rl:{llm:t}:b:t:holds' 'rl:{llm:t}:b:t:amounts' 'rl:{llm:t}:b:t:settled' , 5d5c9a0e-lease 4 95000000 r1 300 1000 3600 120000000 300000000",
  settleInFlight:
    "'rl:{llm:t}:f:t' 'rl:{llm:t}:b:t' 'rl:{llm:t}:b:t:holds' 'rl:{llm:t}:b:t:amounts' 'rl:{llm:t}:b:t:settled' , 5d5c9a0e-lease r1 120 1000 3600 300000000",
  settleClaim: "'wh:{slack:T1}:seen:Ev1' , q3Xk9_Tz0aA delivered",
};

/** Each entry file's `redis-cli --eval` example: the shared scripts', then each strategy's own scripts'. */
const EXAMPLES: Record<string, string> = Object.fromEntries([
  ...Object.entries(ENTRY_SCRIPTS).map(([name, entry]) => [entry, SHARED_EXAMPLES[name as keyof typeof ENTRY_SCRIPTS]]),
  ...STRATEGY_UNITS.flatMap((unit) => [
    ...('ownScript' in unit && unit.ownScript ? [[unit.ownScript.entry, unit.ownScript.example]] : []),
    ...Object.values(unit.operations ?? {}).map((operation) => [operation.entry, operation.example]),
  ]),
]);

const dir = resolve(process.argv[2] ?? 'dist/lua');
mkdirSync(dir, { recursive: true });
const index = [
  '# Assembled Lua scripts',
  '',
  'Written by `npm run lua:dump`; each file is exactly what the layer sends to Redis.',
  'The lines below run against a Redis on 6379; against `npm start`\'s, add `-p "$(cat .local/redis/port)"`.',
  '',
  '| script | file | SHA1 | try it |',
  '|---|---|---|---|',
];
for (const entry of entryFiles()) {
  const script = productionScripts().entries[entry] as LuaScript;
  const file = `${entry}.lua`;
  writeFileSync(join(dir, file), script.source);
  index.push(`| ${entry} | ${file} | \`${script.sha}\` | \`redis-cli --eval ${file} ${EXAMPLES[entry]}\` |`);
}
writeFileSync(join(dir, 'README.md'), `${index.join('\n')}\n`);
console.log(`wrote ${entryFiles().length} scripts and README.md to ${dir}`);
