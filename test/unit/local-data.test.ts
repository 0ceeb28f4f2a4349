import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { InvalidSettingError } from '@platform/rate-limit';
import fc from 'fast-check';
import { localPortSetting, localRedisPortFile, rememberedRedisPort } from '../../config/local-data.ts';

describe('config/local-data.ts', () => {
  it("reads npm start's remembered Redis port only when the file holds one in plain digits", () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-local-data-'));
    try {
      assert.equal(rememberedRedisPort(dir), undefined, 'no file');
      mkdirSync(join(dir, 'redis'));
      for (const [text, port] of [
        ['6390\n', 6390],
        ['0x18f6', undefined],
        ['6.39e3', undefined],
        ['70000', undefined],
        ['', undefined],
        ['-1', undefined],
      ] as const) {
        writeFileSync(localRedisPortFile(dir), text);
        assert.equal(rememberedRedisPort(dir), port, JSON.stringify(text));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads a port variable as plain digits from 0 to 65535, else an InvalidSettingError naming it', () => {
    assert.equal(localPortSetting('PORT', {}), undefined);
    assert.equal(localPortSetting('PORT', { PORT: '0' }), 0);
    assert.equal(localPortSetting('PORT', { PORT: '3000' }), 3000);
    fc.assert(
      fc.property(fc.string(), (text) => {
        try {
          const port = localPortSetting('MATTERMOST_PORT', { MATTERMOST_PORT: text });
          if (text !== '') assert.match(text, /^[0-9]+$/);
          if (port !== undefined) assert.ok(port >= 0 && port <= 65535);
        } catch (error) {
          assert.ok(error instanceof InvalidSettingError && error.setting === 'MATTERMOST_PORT', String(error));
        }
      }),
    );
  });
});
