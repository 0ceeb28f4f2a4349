import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Limited } from '@platform/rate-limit';
import { compilePolicy } from '@platform/rate-limit';
import { BlockCache } from '@platform/rate-limit/core';
import type { ResolvedLimit } from '@platform/rate-limit/lua';

const policy = compilePolicy('hot', {
  strategy: 'tokenBucket',
  capacity: 10,
  refill: { tokens: 1, every: '1 s' },
  blockCache: true,
});
const limit = (cost: number, p = policy): ResolvedLimit => ({ policy: p, key: 'k', counter: 'rl:{hot:k}', cost });

function refused(retryAfterMs: number): Limited {
  const status = {
    policy: 'hot',
    strategy: 'tokenBucket' as const,
    limit: 10,
    remaining: 2,
    retryAfterMs,
    resetAfterMs: 8000,
    windowSeconds: 10,
  };
  return {
    outcome: 'limited',
    decided: true,
    allowed: false,
    degraded: false,
    binding: status,
    limits: [status],
    retryAfterMs,
  };
}

describe('Class: BlockCache', () => {
  it('refuses the refused cost and any larger one until the retry time, and nothing after', () => {
    // Prepare
    const clock = { ms: 1000 };
    const cache = new BlockCache(() => clock.ms);
    cache.remember([limit(5)], refused(3000));
    // Act + Assess
    assert.equal(cache.refusal([limit(5)])?.retryAfterMs, 3000);
    assert.equal(cache.refusal([limit(8)])?.retryAfterMs, 3000);
    clock.ms += 2999;
    assert.equal(cache.refusal([limit(5)])?.retryAfterMs, 1);
    clock.ms += 1;
    assert.equal(cache.refusal([limit(5)]), undefined);
  });

  it('lets a smaller cost through to Redis: it may fit sooner', () => {
    const cache = new BlockCache(() => 0);
    cache.remember([limit(5)], refused(3000));
    assert.equal(cache.refusal([limit(1)]), undefined);
    assert.equal(cache.refusal([limit(4)]), undefined);
  });

  it('forgets a refusal when the policy changes version', () => {
    const cache = new BlockCache(() => 0);
    cache.remember([limit(1)], refused(3000));
    const raised = compilePolicy('hot', {
      strategy: 'tokenBucket',
      capacity: 20,
      refill: { tokens: 1, every: '1 s' },
      blockCache: true,
    });
    assert.equal(cache.refusal([limit(1, raised)]), undefined);
  });

  it('remembers nothing for a policy without blockCache', () => {
    const plain = compilePolicy('hot', { strategy: 'tokenBucket', capacity: 10, refill: { tokens: 1, every: '1 s' } });
    const cache = new BlockCache(() => 0);
    cache.remember([limit(1, plain)], refused(3000));
    assert.equal(cache.refusal([limit(1, plain)]), undefined);
  });
});
