import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { Verdict } from '../../layer/src/index.ts';
import { powertoolsObserver } from '../../layer/src/middleware/index.ts';

function verdict(outcome: Verdict['outcome'], remaining: number): Verdict {
  const status = {
    policy: 'api-key',
    strategy: 'tokenBucket' as const,
    limit: 100,
    remaining,
    retryAfterMs: 0,
    resetAfterMs: 1000,
    windowSeconds: 120,
  };
  return {
    outcome,
    proceed: outcome !== 'limited',
    retryAfterMs: 0,
    decision: {
      outcome: 'allowed',
      allowed: true,
      degraded: false,
      binding: status,
      limits: [status],
      retryAfterMs: 0,
    },
    limits: [status],
    policy: 'api-key',
    latencyMs: 1.5,
  };
}

describe('Function: powertoolsObserver', () => {
  it('emits the outcome, the latency and near-limit as EMF metrics with the policy as dimension', () => {
    const metrics = new Metrics({ namespace: 'RateLimit', serviceName: 'test' });
    powertoolsObserver({ metrics }).observe(verdict('shadow-limited', 10));
    const emf = metrics.serializeMetrics() as unknown as Record<string, unknown> & {
      _aws: { CloudWatchMetrics: { Dimensions: string[][]; Metrics: { Name: string }[] }[] };
    };
    const names = emf._aws.CloudWatchMetrics[0]?.Metrics.map((m) => m.Name).sort();
    assert.deepEqual(names, ['CheckLatency', 'NearLimit', 'ShadowLimited']);
    assert.ok(emf._aws.CloudWatchMetrics[0]?.Dimensions[0]?.includes('policy'));
    assert.equal(emf.policy, 'api-key');
    assert.equal(emf.CheckLatency, 1.5);
  });

  it('does not count near-limit with room left', () => {
    const metrics = new Metrics({ namespace: 'RateLimit', serviceName: 'test' });
    powertoolsObserver({ metrics }).observe(verdict('allowed', 50));
    const emf = metrics.serializeMetrics() as unknown as {
      _aws: { CloudWatchMetrics: { Metrics: { Name: string }[] }[] };
    };
    assert.deepEqual(emf._aws.CloudWatchMetrics[0]?.Metrics.map((m) => m.Name).sort(), ['Allowed', 'CheckLatency']);
  });
});
