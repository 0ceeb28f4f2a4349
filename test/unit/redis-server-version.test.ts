/** The redis-server the setup starts must be one the scripts run on (scripts/redis-process.ts). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { checkServerVersion } from '../../scripts/redis-process.ts';

describe('checkServerVersion', () => {
  it('takes 6.2 and later, Valkey included', () => {
    for (const [printed, version] of [
      ['Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=1', '7.0.15'],
      ['Redis server v=6.2.0 sha=00000000:0 malloc=jemalloc-5.1.0 bits=64 build=1', '6.2.0'],
      ['Redis server v=10.0.0 sha=00000000:0', '10.0.0'],
      ['Valkey server v=8.1.1 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=1', '8.1.1'],
    ] as const) {
      assert.equal(checkServerVersion(printed), version);
    }
  });

  it("refuses an older one (Ubuntu 22.04's apt has 6.0) with what to do", () => {
    for (const printed of ['Redis server v=6.0.16 sha=00000000:0', 'Redis server v=5.0.7 sha=00000000:0', 'v=6.1.9']) {
      const checked = checkServerVersion(printed, 'redis-server');
      assert.ok(checked instanceof Error, printed);
      assert.match(checked.message, /needs 6\.2\.0 or later/);
      assert.match(checked.message, /REDIS_SERVER_BIN/);
    }
  });

  it('answers any output with a version or an Error, never a throw', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (printed) => {
        const checked = checkServerVersion(printed);
        assert.ok(typeof checked === 'string' || checked instanceof Error);
      }),
    );
    assert.ok(checkServerVersion('') instanceof Error);
    assert.ok(checkServerVersion('redis-server: command not found') instanceof Error);
  });
});
