/**
 * The bytes the limiter writes per check, measured by running its observer
 * as the deployed functions build it (functions/shared/platform.ts: Powertools
 * Metrics, namespace RateLimit, service platform; the Powertools Logger for
 * refusal lines) and capturing what it prints: the EMF lines a container
 * writes for a stream of checks arriving at a given rate per container, one
 * check per invocation, each invocation ending as the HTTP consumers' do
 * (`flushIfDue`), on a simulated clock (no sleeping).
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { Verdict } from '@platform/rate-limit';
import { type ObserverBatching, powertoolsObserver } from '@platform/rate-limit/middleware';
import type { WrittenBytes } from './cost-model.ts';

/** A check as the middleware reports it: an allowed token-bucket check of an API key with room left. */
function verdictOf(outcome: Verdict['outcome'], latencyMs: number): Verdict {
  const status = {
    policy: 'api-key',
    strategy: 'tokenBucket' as const,
    limit: 100,
    remaining: outcome === 'allowed' ? 60 : 0,
    retryAfterMs: outcome === 'allowed' ? 0 : 1200,
    resetAfterMs: 1200,
    windowSeconds: 60,
  };
  return {
    outcome,
    proceed: outcome !== 'limited',
    retryAfterMs: status.retryAfterMs,
    decision:
      outcome === 'allowed'
        ? {
            outcome: 'allowed',
            decided: true,
            allowed: true,
            degraded: false,
            binding: status,
            limits: [status],
            retryAfterMs: 0,
          }
        : {
            outcome: 'limited',
            decided: true,
            allowed: false,
            degraded: false,
            binding: status,
            limits: [status],
            retryAfterMs: status.retryAfterMs,
          },
    limits: [status],
    policy: 'api-key',
    // the stored key of an API key: its SHA-256, base64url (43 characters)
    key: 'q4N8yJm0bJ8aVvS2Qm6y1o2b9k4Kc3m2d1ZrXnQpL0w',
    latencyMs,
  };
}

/** Everything written to stdout while `act` runs (Powertools prints there; synchronous, so nothing else can). */
function captured(act: () => void): string {
  const chunks: string[] = [];
  const write = process.stdout.write;
  process.stdout.write = ((chunk: string | Uint8Array) => chunks.push(String(chunk)) > 0) as typeof write;
  try {
    act();
  } finally {
    process.stdout.write = write;
  }
  return chunks.join('');
}

export interface MeasureOptions {
  /** Checks one container sees per second (its invocations, one check each). */
  readonly checksPerContainerPerSecond: number;
  /** How many checks to run through (enough for many batches). */
  readonly checks?: number;
  /** The observer's batching; `{ maxChecks: 1, … }` is the line per check the observer wrote before batching. */
  readonly batching?: ObserverBatching;
}

export function measureWrittenBytes(options: MeasureOptions): WrittenBytes {
  const checks = options.checks ?? 10_000;
  const clock = { ms: Date.UTC(2026, 11, 1) };
  const gapMs = 1000 / options.checksPerContainerPerSecond;
  const metrics = new Metrics({ namespace: 'RateLimit', serviceName: 'platform' });
  const observer = powertoolsObserver({
    metrics,
    now: () => clock.ms,
    ...(options.batching ? { batching: options.batching } : {}),
  });
  const emf = captured(() => {
    for (let i = 0; i < checks; i++) {
      // latencies as a check sees them: 1.0–3.9 ms
      observer.observe(verdictOf('allowed', 1 + (i % 30) / 10));
      observer.flushIfDue();
      clock.ms += gapMs;
    }
    observer.flush();
  });
  const logger = new Logger({ serviceName: 'rate-limited-platform' });
  const refusal = captured(() => {
    powertoolsObserver({ metrics: new Metrics({ namespace: 'RateLimit', serviceName: 'platform' }), logger }).observe(
      verdictOf('limited', 1.5),
    );
  });
  const emfLines = emf.split('\n').filter((line) => line.includes('"_aws"'));
  return {
    emfPerCheck: emfLines.reduce((sum, line) => sum + Buffer.byteLength(line) + 1, 0) / checks,
    emfEventsPerCheck: emfLines.length / checks,
    refusalLine: Buffer.byteLength(refusal.split('\n').find((line) => line.includes('"rate limited"')) ?? '') + 1,
  };
}
