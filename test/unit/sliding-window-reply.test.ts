/** A window's refusal packed in one integer (lua/check_sliding_window.lua's reply) reads as its table would. */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { compilePolicy } from '@platform/rate-limit';
import { parseCheckReply } from '@platform/rate-limit/lua';
import fc from 'fast-check';

const PACKED = 2 ** 26;

it('reads a packed refusal as the table { 0, reset µs, retry µs }, to the µs, up to the largest window packed', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: Math.floor((PACKED - 1) / 1000) }).chain((windowMs) =>
        fc.tuple(
          fc.constant(windowMs),
          fc
            .tuple(fc.integer({ min: 1, max: windowMs * 1000 }), fc.integer({ min: 1, max: windowMs * 1000 }))
            .map(([a, b]): [number, number] => (a <= b ? [a, b] : [b, a])),
        ),
      ),
      ([windowMs, [retryUs, resetUs]]) => {
        const policy = compilePolicy('w', { strategy: 'slidingWindow', limit: 3, window: `${windowMs} ms` });
        const packed = -1 - (retryUs * PACKED + resetUs);
        assert.ok(Number.isSafeInteger(packed));
        assert.deepEqual(parseCheckReply([policy], packed), parseCheckReply([policy], [0, resetUs, retryUs]));
      },
    ),
  );
  // the extremes: the largest packed window, refused for all of it
  const policy = compilePolicy('w', { strategy: 'slidingWindow', limit: 3, window: '67108 ms' });
  const decision = parseCheckReply([policy], -1 - (67_108_000 * PACKED + 67_108_000));
  assert.equal(decision.outcome, 'limited');
  assert.equal(decision.retryAfterMs, 67_108);
  assert.equal(decision.limits[0]?.resetAfterMs, 67_108);
  assert.equal(decision.limits[0]?.remaining, 0);
});
