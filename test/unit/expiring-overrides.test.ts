/**
 * Overrides that expire: an override carrying `until` is in force up to the
 * millisecond before it and gone at it, without a refresh or anyone acting;
 * the value falls back by the normal precedence (a per-key override to the
 * policy override, that to the default). With a pinned clock, a memory source
 * and the file source the CLI and local runs use.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { ParameterSource } from '@platform/rate-limit/config';
import { FileParameterSource, PolicyStore } from '@platform/rate-limit/config';

const PREFIX = '/ratelimit/test';
const defaults = {
  'api-key': { strategy: 'tokenBucket', capacity: 120, refill: { tokens: 60, every: '1 m' }, failureMode: 'open' },
};
const END = Date.parse('2026-12-02T06:00:00Z');

class MemorySource implements ParameterSource {
  values: Record<string, string> = {};
  fetches = 0;
  async fetchAll(path: string) {
    this.fetches++;
    return Object.fromEntries(Object.entries(this.values).filter(([name]) => name.startsWith(`${path}/`)));
  }
}

function harness(source: ParameterSource) {
  const clock = { now: END - 3_600_000 };
  const warnings: string[] = [];
  const store = new PolicyStore({
    prefix: PREFIX,
    source,
    defaults,
    ttlMs: 24 * 3_600_000, // no refresh in the test: the fall-back must not wait for one
    now: () => clock.now,
    logger: { warn: (message, attributes) => warnings.push(`${message} ${JSON.stringify(attributes)}`) },
  });
  return { clock, store, warnings };
}

describe('An override with `until`', () => {
  it('is in force until the millisecond before its end, and gone at it (pinned clock)', async () => {
    const source = new MemorySource();
    source.values = {
      [`${PREFIX}/overrides/api-key`]: JSON.stringify({ capacity: 200, until: '2026-12-02T08:00:00Z' }),
      [`${PREFIX}/overrides/api-key/partner`]: JSON.stringify({ capacity: 5000, until: '2026-12-02T06:00Z' }),
    };
    const { clock, store } = harness(source);
    await store.refresh();
    assert.equal(store.resolve('api-key', 'partner')?.limit, 5000);
    assert.deepEqual(store.explain('api-key', 'partner')?.expires, {
      'policy override': '2026-12-02T08:00:00.000Z',
      'per-key override': '2026-12-02T06:00:00.000Z',
    });
    clock.now = END - 1;
    assert.equal(store.resolve('api-key', 'partner')?.limit, 5000, 'still in force 1 ms before');
    clock.now = END;
    assert.equal(store.resolve('api-key', 'partner')?.limit, 200, 'at its end: back to the policy override');
    assert.equal(store.explain('api-key', 'partner')?.sources.capacity, 'policy override');
    clock.now = Date.parse('2026-12-02T08:00:00Z');
    assert.equal(store.resolve('api-key', 'partner')?.limit, 120, 'then to the default');
    assert.equal(store.explain('api-key')?.expires, undefined);
    assert.equal(source.fetches, 1, 'no refresh was needed');
  });

  it('that has already ended is not applied, and a malformed one is refused with the reason', async () => {
    const source = new MemorySource();
    source.values = {
      [`${PREFIX}/overrides/api-key`]: JSON.stringify({ capacity: 200, until: '2026-12-01T00:00:00Z' }),
      [`${PREFIX}/overrides/api-key/odd`]: JSON.stringify({ capacity: 300, until: 'tonight' }),
    };
    const { store, warnings } = harness(source);
    await store.refresh();
    assert.equal(store.resolve('api-key', 'someone')?.limit, 120);
    assert.equal(store.resolve('api-key', 'odd')?.limit, 120);
    assert.ok(
      warnings.some((w) => w.includes('until must be an ISO 8601 time')),
      warnings.join('\n'),
    );
  });

  it('works the same from the file source', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-until-'));
    const file = join(dir, 'parameters.json');
    writeFileSync(
      file,
      JSON.stringify({ [`${PREFIX}/overrides/api-key/partner`]: { capacity: 900, until: '2026-12-02T06:00:00Z' } }),
    );
    const { clock, store } = harness(new FileParameterSource(file));
    await store.refresh();
    assert.equal(store.resolve('api-key', 'partner')?.limit, 900);
    clock.now = END;
    assert.equal(store.resolve('api-key', 'partner')?.limit, 120);
  });

  it('naming an impossible date is malformed, not rolled over (2030-02-30 is not March 2): refused from the file', async () => {
    // test/fixtures/overrides/impossible-until.json: Date.parse would read each of the first three as a real instant
    const fixture = new URL('../fixtures/overrides/impossible-until.json', import.meta.url).pathname;
    const { store, warnings } = harness(new FileParameterSource(fixture));
    await store.refresh();
    for (const key of ['partner', 'leap', 'midnight']) {
      assert.equal(store.resolve('api-key', key)?.limit, 120, `${key}: the default stays in force`);
      assert.ok(
        warnings.some((w) => w.includes(`api-key/${key}`) && w.includes('until must be an ISO 8601 time')),
        warnings.join('\n'),
      );
    }
    assert.equal(store.resolve('api-key', 'real')?.limit, 600, 'a real date is still accepted');
    assert.equal(store.explain('api-key', 'real')?.expires?.['per-key override'], '2030-03-02T00:00:00.000Z');
  });
});
