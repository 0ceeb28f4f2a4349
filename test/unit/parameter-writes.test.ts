/**
 * Writing overrides where the store reads them (the admin CLI's `override`),
 * and the store telling where each value in force came from.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { FileParameterSource, PolicyStore } from '@platform/rate-limit/config';
import { SsmParameterSource } from '@platform/rate-limit/ssm';
import { mockClient } from 'aws-sdk-client-mock';

const defaults = {
  'api-key': { strategy: 'tokenBucket', capacity: 120, refill: { tokens: 60, every: '1 m' }, failureMode: 'open' },
};

describe('Class: SsmParameterSource (writes)', () => {
  it('puts an override as a String parameter, overwriting', async () => {
    const ssm = mockClient(SSMClient);
    ssm.on(PutParameterCommand).resolves({ Version: 2 });
    await new SsmParameterSource(new SSMClient({})).put('/ratelimit/prod/overrides/api-key', '{"capacity":200}');
    assert.deepEqual(ssm.commandCalls(PutParameterCommand)[0]?.args[0].input, {
      Name: '/ratelimit/prod/overrides/api-key',
      Value: '{"capacity":200}',
      Type: 'String',
      Overwrite: true,
    });
    ssm.restore();
  });
});

describe('Class: FileParameterSource (writes)', () => {
  it('replaces one parameter, keeping JSON values as JSON and the rest of the file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-params-'));
    const file = join(dir, 'p.json');
    writeFileSync(file, JSON.stringify({ '/p/secrets/x': 'keep' }));
    try {
      const source = new FileParameterSource(file);
      await source.put('/p/overrides/api-key', '{"capacity":200}');
      assert.deepEqual(JSON.parse(readFileSync(file, 'utf8')), {
        '/p/secrets/x': 'keep',
        '/p/overrides/api-key': { capacity: 200 },
      });
      assert.deepEqual(await source.fetchAll('/p'), {
        '/p/secrets/x': 'keep',
        '/p/overrides/api-key': '{"capacity":200}',
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('Class: PolicyStore (explain)', () => {
  it('names the source of every value: SSM default, policy override, per-key override', async () => {
    const store = new PolicyStore({
      prefix: '/p',
      defaults,
      source: {
        fetchAll: async () => ({
          '/p/defaults/api-key': JSON.stringify({ ...defaults['api-key'], capacity: 150 }),
          '/p/overrides/api-key': JSON.stringify({ refill: { tokens: 90 } }),
          '/p/overrides/api-key/vip': JSON.stringify({ capacity: 1000 }),
        }),
      },
    });
    assert.equal(store.explain('api-key')?.sources.capacity, 'shipped default', 'before the first fetch');
    await store.refresh();
    const general = store.explain('api-key');
    assert.deepEqual(general?.sources, {
      strategy: 'SSM default',
      capacity: 'SSM default',
      'refill.tokens': 'policy override',
      'refill.every': 'SSM default',
      failureMode: 'SSM default',
    });
    const vip = store.explain('api-key', 'vip');
    assert.equal(vip?.sources.capacity, 'per-key override');
    assert.equal((vip?.config as { capacity?: number } | undefined)?.capacity, 1000);
    assert.equal(store.explain('no-such-policy'), undefined);
    assert.deepEqual(store.policyNames(), ['api-key']);
  });
});
