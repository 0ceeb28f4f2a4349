import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { Verdict } from '../../layer/src/index.ts';
import { powertoolsObserver } from '../../layer/src/middleware/index.ts';

function verdict(outcome: Verdict['outcome'], remaining: number, policy = 'api-key'): Verdict {
  const status = {
    policy,
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
      decided: true,
      allowed: true,
      degraded: false,
      binding: status,
      limits: [status],
      retryAfterMs: 0,
    },
    limits: [status],
    policy,
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

  it('writes one line per policy when one invocation checks two, each under its own dimension', () => {
    // Prepare: capture what Powertools prints (its own Console on stdout); the
    // block is synchronous, so no output of the test runner can fall into it
    const lines: string[] = [];
    const metrics = new Metrics({ namespace: 'RateLimit', serviceName: 'test' });
    const original = process.stdout.write;
    process.stdout.write = ((chunk: string) => lines.push(...String(chunk).trim().split('\n')) > 0) as typeof original;
    try {
      // Act: the middleware's check, then the handler's own, then the invocation's flush
      const observer = powertoolsObserver({ metrics });
      observer.observe(verdict('allowed', 50, 'login-ip'));
      observer.observe(verdict('limited', 0, 'login-account'));
      observer.flush();
    } finally {
      process.stdout.write = original;
    }
    // Assess
    const emf = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.deepEqual(
      emf.map((e) => [e.policy, e.Allowed ?? 0, e.Limited ?? 0]),
      [
        ['login-ip', 1, 0],
        ['login-account', 0, 1],
      ],
    );
  });
});
