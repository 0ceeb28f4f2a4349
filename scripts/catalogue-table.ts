/**
 * `npm run docs:catalogue`: the policy catalogue table of docs/configuration.md,
 * rendered from config/policies.json (the numbers) and the route table and
 * workers (which consumer checks each policy), between its markers. A test
 * compares the table in the docs with this rendering cell by cell, so the docs
 * cannot drift from the catalogue again.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { compilePolicies, unitOf } from '@platform/rate-limit';
import type { PolicyName } from '../config/catalogue.ts';
import catalogue from '../config/policies.json' with { type: 'json' };
import { checksOf, routes } from '../functions/routes.ts';
import { scheduled, services } from '../functions/workers.ts';

export const CONFIGURATION_DOC = new URL('../docs/configuration.md', import.meta.url);
const BEGIN = '<!-- catalogue:begin (npm run docs:catalogue) -->';
const END = '<!-- catalogue:end -->';

/** The consumers (route and worker ids) that check a policy, as the deployment derives them. */
function checkedBy(policy: PolicyName): string[] {
  const ids = new Set<string>();
  for (const route of routes)
    if (
      checksOf(route)
        .flat()
        .includes(policy as PolicyName)
    )
      ids.add(route.id);
  for (const worker of [...scheduled, ...services]) if (worker.policies.includes(policy)) ids.add(worker.id);
  return [...ids];
}

/** One row per policy: its cells. */
export function catalogueRows(): string[][] {
  return [...compilePolicies(catalogue)].map(([name, p]) => [
    `\`${name}\``,
    checkedBy(name as PolicyName).join(', ') || '–',
    `${unitOf(p.strategy).title}${'adaptive' in p && p.adaptive ? ', adaptive' : ''}`,
    unitOf(p.strategy).describe(p.config),
    p.failureMode,
    p.group === undefined ? '–' : `\`${p.group}\``,
  ]);
}

export const CATALOGUE_HEADER = ['policy', 'checked by', 'strategy', 'quota', 'failure mode', 'group'];

function renderTable(): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(CATALOGUE_HEADER), line(CATALOGUE_HEADER.map(() => '---')), ...catalogueRows().map(line)].join('\n');
}

/** The cells of the table between the markers of a document. */
export function tableInDoc(text: string): string[][] {
  const start = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  if (start < 0 || end < start) throw new Error('docs/configuration.md has no catalogue markers');
  return text
    .slice(start + BEGIN.length, end)
    .split('\n')
    .filter((l) => l.trim().startsWith('|'))
    .map((l) =>
      l
        .trim()
        .slice(1, -1)
        .split('|')
        .map((c) => c.trim()),
    );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const text = readFileSync(CONFIGURATION_DOC, 'utf8');
  const start = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  if (start < 0 || end < start) throw new Error('docs/configuration.md has no catalogue markers');
  writeFileSync(CONFIGURATION_DOC, `${text.slice(0, start + BEGIN.length)}\n\n${renderTable()}\n\n${text.slice(end)}`);
  console.log(`wrote the catalogue table of ${CONFIGURATION_DOC.pathname}`);
}
