/**
 * A once-only claim's record follows a check's ARGV, so it may follow only a
 * call in the full form: a strategy's short form (a lone window's limit and
 * window) is told apart by its argument count, and a record appended to it
 * would be read as a group of windows.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compilePolicies, MisconfiguredCheckError } from '@platform/rate-limit';
import { claimToken, settleCall, withClaim } from '@platform/rate-limit/core';
import { type ClaimableCall, checkCall, claimableCheckCall, type ResolvedLimit } from '@platform/rate-limit/lua';

const catalogue = compilePolicies({ w: { strategy: 'slidingWindow', limit: 5, window: '1 m' } });
const lone: ResolvedLimit = {
  policy: catalogue.get('w') as ResolvedLimit['policy'],
  key: 'k',
  counter: 'rl:{w:k}',
  cost: 1,
};
const claim = { key: 'rl:{w:k}:once:e1', ttlMs: 60_000, token: 'attempt1' } as const;

describe('Function: withClaim', () => {
  it('refuses a call in a short form, which the claim record would turn into another call', () => {
    const short = checkCall([lone], true);
    assert.deepEqual(short.args, ['5', '60000000'], 'a lone window is sent in its short form');
    assert.throws(() => withClaim(short as ClaimableCall, claim), MisconfiguredCheckError);
  });

  it('appends the record to a claimable call, which is in the full form', () => {
    const call = withClaim(claimableCheckCall([lone], true), claim);
    assert.deepEqual(call.keys, ['rl:{w:k}', 'rl:{w:k}:once:e1']);
    assert.deepEqual(call.args, ['1', '1', '5', '60000000', 'claim', '2', '60000', '0', 'attempt1', '0']);
  });
});

describe("A claim's attempt token", () => {
  it('is what the claim is set to and what its settlement must find: a fresh one per attempt, packed by one function', () => {
    for (const settlement of ['given-back', 'delivered'] as const) {
      const call = settleCall(claim, settlement);
      assert.deepEqual(call, { script: 'settle_claim', keys: ['rl:{w:k}:once:e1'], args: ['attempt1', settlement] });
    }
    assert.throws(() => settleCall(claim, 'lost' as 'delivered'), MisconfiguredCheckError, 'an unknown settlement');
    const tokens = new Set(Array.from({ length: 100 }, claimToken));
    assert.equal(tokens.size, 100, 'no two attempts share a token');
    for (const token of tokens) assert.match(token, /^[A-Za-z0-9_-]{11}$/);
  });

  it('is required, and of the alphabet a Redis argument and a log line take plainly', () => {
    for (const token of [undefined, '', '1', 'short', 'a b c d e', 'x'.repeat(65), 7]) {
      const bad = { ...claim, token } as unknown as typeof claim;
      assert.throws(() => withClaim(claimableCheckCall([lone], true), bad), MisconfiguredCheckError, String(token));
      assert.throws(() => settleCall(bad, 'given-back'), MisconfiguredCheckError, String(token));
    }
  });
});

describe("A claim's pending time", () => {
  it('follows the token, a whole number of ms from 0 (the default) and shorter than the claim lasts', () => {
    const call = withClaim(claimableCheckCall([lone], true), { ...claim, pendingMs: 2500 });
    assert.deepEqual(call.args.slice(-6), ['claim', '2', '60000', '0', 'attempt1', '2500']);
    for (const pendingMs of [-1, 0.5, 60_000, Number.NaN, '5']) {
      const bad = { ...claim, pendingMs } as unknown as typeof claim;
      assert.throws(() => withClaim(claimableCheckCall([lone], true), bad), MisconfiguredCheckError, String(pendingMs));
    }
  });
});
