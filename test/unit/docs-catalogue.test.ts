/**
 * The tables the docs hold about the catalogue are the catalogue: the
 * policies of docs/catalogue.md (every policy, every number, who checks it,
 * its failure mode and group; the limits table design.md and
 * configuration.md link to), its consumers (what each checks, on what key)
 * and the strategies of docs/architecture.md (scripts/catalogue-table.ts renders
 * them; `npm run docs:catalogue` writes them). A policy, route or strategy
 * added, removed or changed without the docs fails here.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import catalogue from '../../config/policies.json' with { type: 'json' };
import { GENERATED_TABLES, tableInDoc } from '../../scripts/catalogue-table.ts';

describe('The generated tables of the docs', () => {
  for (const table of GENERATED_TABLES) {
    it(`${table.name} (${table.doc.pathname.split('/').slice(-2).join('/')}) equals its rendering from the catalogue`, () => {
      const [header, , ...rows] = tableInDoc(table);
      assert.deepEqual(header, table.header);
      assert.deepEqual(
        rows,
        table.rows(),
        `${table.doc.pathname.split('/').slice(-2).join('/')} is stale: run npm run docs:catalogue`,
      );
    });
  }

  it('the policy table lists every policy of config/policies.json', () => {
    const policies = GENERATED_TABLES.find((t) => t.name === 'policies');
    assert.equal(policies && tableInDoc(policies).length - 2, Object.keys(catalogue).length);
  });
});
