/**
 * The policy catalogue in docs/configuration.md is config/policies.json:
 * every policy, every number, and who checks it (scripts/catalogue-table.ts
 * renders it; `npm run docs:catalogue` writes it). A policy added, removed or
 * changed without the docs fails here.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import catalogue from '../../config/policies.json' with { type: 'json' };
import { CATALOGUE_HEADER, CONFIGURATION_DOC, catalogueRows, tableInDoc } from '../../scripts/catalogue-table.ts';

describe('The catalogue table of docs/configuration.md', () => {
  it('lists every policy of config/policies.json, with its numbers and consumers, and nothing else', () => {
    const [header, , ...rows] = tableInDoc(readFileSync(CONFIGURATION_DOC, 'utf8'));
    assert.deepEqual(header, CATALOGUE_HEADER);
    assert.deepEqual(rows, catalogueRows(), 'run npm run docs:catalogue');
    assert.equal(rows.length, Object.keys(catalogue).length);
  });
});
