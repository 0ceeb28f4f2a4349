/**
 * `npm run docs:catalogue`: the tables the docs hold about the catalogue,
 * rendered from config/policies.json (the numbers), the strategy registry
 * (how each strategy reads) and the route table and workers (who checks
 * what), each between its markers. The tables that grow with a policy or a
 * route are all in docs/catalogue.md (one table each, linked from the other
 * docs), so adding a route regenerates one file. A test compares every table in the docs
 * with this rendering cell by cell, so the docs cannot drift from the
 * catalogue again. (The script then runs Biome on the files it wrote, so
 * the tree stays formatted; cells compare trimmed.)
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { type CompiledPolicy, compilePolicies } from '@platform/rate-limit';
import { STRATEGY_UNITS, unitOf } from '@platform/rate-limit/policy';
import { API_ROLES, type RoleLimits } from '../config/api-roles.ts';
import type { PolicyName } from '../config/catalogue.ts';
import catalogue from '../config/policies.json' with { type: 'json' };
import type { KeySource, Route } from '../functions/route.ts';
import { checksOf, routes } from '../functions/routes.ts';
import { scheduled, services } from '../functions/workers.ts';

/** What the tables are rendered from: the compiled catalogue and the route table (a test renders a route added). */
export interface CatalogueInput {
  readonly policies: ReadonlyMap<string, CompiledPolicy>;
  readonly routes: readonly Route[];
}

/** The repository's own catalogue and route table. */
export const CATALOGUE: CatalogueInput = { policies: compilePolicies(catalogue), routes };

/** The consumers (route and worker ids) that check a policy, as the deployment derives them. */
function checkedBy(input: CatalogueInput, name: PolicyName): string[] {
  const ids = new Set<string>();
  for (const route of input.routes) if (checksOf(route).flat().includes(name)) ids.add(route.id);
  for (const worker of [...scheduled, ...services]) if (worker.policies.includes(name)) ids.add(worker.id);
  return [...ids];
}

const strategyOf = (p: CompiledPolicy) =>
  `${unitOf(p.strategy).title}${'adaptive' in p && p.adaptive ? ', adaptive' : ''}`;

const KEY_SOURCE: Record<KeySource['from'], (source: KeySource) => string> = {
  clientIp: () => 'client IP',
  clientIp48: () => 'client IP /48',
  apiKey: (s) => `hash of the ${(s as { header: string }).header} header`,
  pathParameter: (s) => `the path's {${(s as { name: string }).name}}`,
};

export interface GeneratedTable {
  readonly doc: URL;
  /** The marker name: `<!-- <name>:begin (npm run docs:catalogue) -->` … `<!-- <name>:end -->`. */
  readonly name: string;
  readonly header: readonly string[];
  rows(input?: CatalogueInput): string[][];
}

const CATALOGUE_DOC = new URL('../docs/catalogue.md', import.meta.url);

/** docs/catalogue.md: every policy, who checks it, how it counts, its failure mode and its group. */
const policyTable: GeneratedTable = {
  doc: CATALOGUE_DOC,
  name: 'policies',
  header: ['policy', 'checked by', 'strategy', 'quota', 'failure mode', 'group'],
  rows: (input = CATALOGUE) =>
    [...input.policies].map(([name, p]) => [
      `\`${name}\``,
      checkedBy(input, name as PolicyName).join(', ') || '–',
      strategyOf(p),
      unitOf(p.strategy).describe(p.config),
      p.failureMode,
      p.group === undefined ? '–' : `\`${p.group}\``,
    ]),
};

/** docs/catalogue.md: each consumer, where it is reached, what it checks and on what key. */
const consumerTable: GeneratedTable = {
  doc: CATALOGUE_DOC,
  name: 'consumers',
  header: ['consumer', 'reached at', 'limits (policy: key, quota)', 'failure mode'],
  rows: (input = CATALOGUE) => {
    const policy = (name: string) => input.policies.get(name) as CompiledPolicy;
    const limitCell = (name: string, key: string) =>
      `\`${name}\`: ${key}, ${unitOf(policy(name).strategy).describe(policy(name).config)}`;
    const modes = (names: readonly string[]) => [...new Set(names.map((n) => policy(n).failureMode))].join(', ');
    const routeRows = input.routes.map((route) => {
      const middleware = route.limits.map((limit) =>
        typeof limit.policy === 'string'
          ? limitCell(limit.policy, KEY_SOURCE[limit.key.from](limit.key))
          : Object.entries(API_ROLES as Record<string, RoleLimits>)
              .flatMap(([role, limits]) => {
                const name = limits[(limit.policy as { byRole: keyof RoleLimits }).byRole];
                return name === undefined
                  ? []
                  : [`${limitCell(name, KEY_SOURCE[limit.key.from](limit.key))} (role ${role})`];
              })
              .join('; '),
      );
      const inHandler = route.inHandler.map((check) =>
        check.map((name) => limitCell(name, 'in the handler')).join(' + '),
      );
      const names = checksOf(route).flat();
      return [
        route.id,
        `\`${route.methods.join('\\|')} ${route.path}\``,
        [...middleware, ...inHandler].join('; '),
        modes(names),
      ];
    });
    const workerRows = [
      ...scheduled.map((w) => ({ w, at: 'a schedule' })),
      ...services.map((w) => ({ w, at: 'a service' })),
    ].map(({ w, at }) => [
      w.id,
      at,
      w.policies.map((name) => limitCell(name, 'its scope')).join('; '),
      modes(w.policies),
    ]);
    return [...routeRows, ...workerRows];
  },
};

/** docs/architecture.md: the registered strategies, and where each lives. */
const strategyTable: GeneratedTable = {
  doc: new URL('../docs/architecture.md', import.meta.url),
  name: 'strategies',
  header: ['strategy', 'Lua fragment', 'dispatch kind', 'own script (limits)', 'a quota in the headers'],
  rows: () =>
    STRATEGY_UNITS.map((unit) => [
      `\`${unit.name}\` (${unit.title})`,
      `\`lua/${unit.luaFragment}.lua\``,
      `\`${unit.kind}\``,
      'ownScript' in unit && unit.ownScript
        ? `\`lua/${unit.ownScript.entry}.lua\` (${unit.ownScript.grouped ? 'one or a group' : 'one'})`
        : '–',
      unit.quota ? 'yes' : 'no',
    ]),
};

export const GENERATED_TABLES: readonly GeneratedTable[] = [policyTable, consumerTable, strategyTable];

const markers = (table: GeneratedTable) =>
  [`<!-- ${table.name}:begin (npm run docs:catalogue) -->`, `<!-- ${table.name}:end -->`] as const;

function render(table: GeneratedTable): string {
  const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
  return [line(table.header), line(table.header.map(() => '---')), ...table.rows().map(line)].join('\n');
}

/** The cells of a table between its markers in its document. */
export function tableInDoc(table: GeneratedTable, text = readFileSync(table.doc, 'utf8')): string[][] {
  const [begin, end] = markers(table);
  const start = text.indexOf(begin);
  const stop = text.indexOf(end);
  if (start < 0 || stop < start) throw new Error(`${table.doc.pathname} has no ${table.name} markers`);
  return text
    .slice(start + begin.length, stop)
    .split('\n')
    .filter((l) => l.trim().startsWith('|'))
    .map((l) =>
      l
        .trim()
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((c) => c.trim()),
    );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const table of GENERATED_TABLES) {
    const text = readFileSync(table.doc, 'utf8');
    const [begin, end] = markers(table);
    const start = text.indexOf(begin);
    const stop = text.indexOf(end);
    if (start < 0 || stop < start) throw new Error(`${table.doc.pathname} has no ${table.name} markers`);
    writeFileSync(table.doc, `${text.slice(0, start + begin.length)}\n\n${render(table)}\n\n${text.slice(stop)}`);
    console.log(`wrote the ${table.name} table of ${table.doc.pathname}`);
  }
  // Biome aligns the tables, so the tree is left formatted (npm run lint passes after this script)
  const written = [...new Set(GENERATED_TABLES.map((table) => table.doc.pathname))];
  execFileSync('npx', ['--no-install', 'biome', 'format', '--write', ...written], { stdio: 'inherit' });
}
