import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { Verdict } from '@platform/rate-limit';
import { powertoolsObserver } from '@platform/rate-limit/middleware';

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

type EmfLine = Record<string, unknown> & {
  _aws: { CloudWatchMetrics: { Dimensions: string[][]; Metrics: { Name: string }[] }[] };
};

/**
 * What Powertools prints (its own Console on stdout) while `act` runs; the
 * block is synchronous, so no output of the test runner can fall into it.
 */
function printed(act: () => void): { lines: EmfLine[]; bytes: number } {
  const raw: string[] = [];
  const original = process.stdout.write;
  process.stdout.write = ((chunk: string) => raw.push(String(chunk)) > 0) as typeof original;
  try {
    act();
  } finally {
    process.stdout.write = original;
  }
  const text = raw.join('');
  const lines = text
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as EmfLine);
  return { lines, bytes: Buffer.byteLength(text) };
}

const namesOf = (line: EmfLine | undefined) => line?._aws.CloudWatchMetrics[0]?.Metrics.map((m) => m.Name).sort();

describe('Function: powertoolsObserver', () => {
  it('emits the outcome, the latency and near-limit as EMF metrics with the policy as dimension', () => {
    const metrics = new Metrics({ namespace: 'RateLimit', serviceName: 'test' });
    const { lines } = printed(() => {
      const observer = powertoolsObserver({ metrics });
      observer.observe(verdict('shadow-limited', 10));
      observer.flush();
    });
    assert.equal(lines.length, 1);
    assert.deepEqual(namesOf(lines[0]), ['CheckLatency', 'NearLimit', 'ShadowLimited']);
    assert.ok(lines[0]?._aws.CloudWatchMetrics[0]?.Dimensions[0]?.includes('policy'));
    assert.equal(lines[0]?.policy, 'api-key');
    assert.equal(lines[0]?.CheckLatency, 1.5);
  });

  it('does not count near-limit with room left', () => {
    const metrics = new Metrics({ namespace: 'RateLimit', serviceName: 'test' });
    const { lines } = printed(() => {
      const observer = powertoolsObserver({ metrics });
      observer.observe(verdict('allowed', 50));
      observer.flush();
    });
    assert.deepEqual(namesOf(lines[0]), ['Allowed', 'CheckLatency']);
  });

  it('writes one line per policy when one invocation checks two, each under its own dimension', () => {
    const metrics = new Metrics({ namespace: 'RateLimit', serviceName: 'test' });
    const { lines } = printed(() => {
      // the middleware's check, then the handler's own, then the end of the run
      const observer = powertoolsObserver({ metrics });
      observer.observe(verdict('allowed', 50, 'login-ip'));
      observer.observe(verdict('limited', 0, 'login-account'));
      observer.flush();
    });
    assert.deepEqual(
      lines.map((e) => [e.policy, e.Allowed ?? 0, e.Limited ?? 0]),
      [
        ['login-ip', 1, 0],
        ['login-account', 0, 1],
      ],
    );
  });

  it('holds checks across invocations and publishes a full batch as one line: counts summed, every latency kept', () => {
    const metrics = new Metrics({ namespace: 'RateLimit', serviceName: 'test' });
    const clock = { ms: 0 };
    const observer = powertoolsObserver({ metrics, now: () => clock.ms });
    const { lines } = printed(() => {
      for (let i = 0; i < 250; i++) {
        observer.observe({ ...verdict(i % 10 === 0 ? 'limited' : 'allowed', 50), latencyMs: 1 + i / 1000 });
        observer.flushIfDue(); // each invocation's end, 1 ms apart: never 10 s old
        clock.ms += 1;
      }
    });
    // Assess: the two full batches, then the rest when the run ends
    assert.deepEqual(
      lines.map((e) => [e.Allowed, e.Limited, (e.CheckLatency as number[]).length]),
      [
        [90, 10, 100],
        [90, 10, 100],
      ],
    );
    assert.equal((lines[1]?.CheckLatency as number[] | undefined)?.[0], 1.1); // check 100's 1.1 ms, to 0.1 ms
    const rest = printed(() => observer.flush()).lines;
    assert.deepEqual(
      rest.map((e) => [e.Allowed, e.Limited, (e.CheckLatency as number[]).length]),
      [[45, 5, 50]],
    );
  });

  it('publishes at an invocation end once the held batch is 10 s old, or at once after a degraded check', () => {
    const metrics = new Metrics({ namespace: 'RateLimit', serviceName: 'test' });
    const clock = { ms: 1_000_000 };
    const observer = powertoolsObserver({ metrics, now: () => clock.ms });
    const step = (ms: number, outcome?: Verdict['outcome']) =>
      printed(() => {
        clock.ms += ms;
        if (outcome) observer.observe(verdict(outcome, 50));
        observer.flushIfDue();
      }).lines;
    assert.equal(step(0, 'allowed').length, 0);
    assert.equal(step(9_999, 'allowed').length, 0);
    assert.deepEqual(
      step(1).map((e) => e.Allowed),
      [2],
    );
    assert.equal(step(5_000).length, 0); // nothing held: nothing to publish, no empty line
    assert.deepEqual(
      step(1, 'degraded-closed').map((e) => e.DegradedClosed),
      [1],
    );
  });

  it('writes under 15 bytes per check when a busy container fills its batches (one check per line wrote ~312)', () => {
    const metrics = new Metrics({ namespace: 'RateLimit', serviceName: 'platform' });
    const observer = powertoolsObserver({ metrics });
    const { lines, bytes } = printed(() => {
      for (let i = 0; i < 1000; i++) observer.observe({ ...verdict('allowed', 50), latencyMs: 2.345 + (i % 7) });
    });
    assert.equal(lines.length, 10);
    assert.ok(bytes / 1000 < 15, `${bytes / 1000} bytes per check`);
  });
});
