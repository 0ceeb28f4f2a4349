import type { EventEmitter } from 'node:events';
import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { createLimiter, type Limiter, type RedisClient, sharedRedis } from '@platform/rate-limit';
import { createPolicyStore, type PolicyStore, readSettings } from '@platform/rate-limit/config';
import { powertoolsObserver, type RefusalRecord } from '@platform/rate-limit/middleware';
import { authenticateFromSecret, ioredisConnection, secretReader } from '@platform/rate-limit/redis';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { secretFolder } from '../../config/secrets.ts';
import { PLATFORM_METRICS } from './metrics.ts';
import { AcceptedOnce } from './once.ts';
import { regionalLimiter } from './regional.ts';
import { readConsumerSettings } from './settings.ts';
import { type EventSink, eventSinkOf } from './sink.ts';

/**
 * What one container shares between invocations: created on first use, once
 * (in Lambda, during the cold start; locally, once per gateway process).
 * Nothing here connects yet: Redis connects at the first check.
 */
export interface Platform {
  readonly logger: Logger;
  readonly redis: RedisClient;
  /** The home region's store, in a stage with one apart from this region's (home-mode checks and the claims). */
  readonly homeRedis?: RedisClient;
  readonly policies: PolicyStore;
  readonly limiter: Limiter;
  readonly observer: ReturnType<typeof powertoolsObserver>;
  readonly sink: EventSink;
  readonly acceptedOnce: AcceptedOnce;
  /**
   * Settles once Redis credentials, if Redis needs them, are set on the client
   * (read from Secrets Manager once per container) and its first connection
   * is made or has failed (bounded by the connect timeout). Started when the
   * platform is made, i.e. during a Lambda's init, which runs with full CPU:
   * the first check then pays no connection set-up (TLS, cluster slots)
   * against its time budget. It never rejects, and settles within
   * READY_WAIT_MS even when Redis takes the connection but never answers (a
   * stalled server): a failure is logged, and checks then degrade by each
   * policy's failure mode.
   */
  readonly ready: Promise<void>;
}

let current: Platform | undefined;

/**
 * The process event a platform is announced with once made: a host that
 * loads several bundles, each with its own copy of this module (the local
 * gateway), collects them to close them all. Nothing listens in Lambda (one
 * platform per container, never closed).
 */
export const PLATFORM_MADE = 'rate-limit:platform-made';

export function platform(): Platform {
  if (!current) {
    current = createPlatform();
    (process as EventEmitter).emit(PLATFORM_MADE, current);
  }
  return current;
}

/** Closes this module's platform (a worker process's shutdown). */
export function closePlatform(): void {
  current?.redis.disconnect();
  current?.homeRedis?.disconnect();
  current = undefined;
}

/** Tests and the local gateway may build the platform from their own parts. */
export function usePlatform(parts: Platform | undefined): void {
  current = parts;
}

function redisCredentials(redis: RedisClient, logger: Logger): Promise<void> {
  const settings = readSettings();
  const secretId = settings.redisAuthSecretId;
  if (secretId === undefined) return Promise.resolve();
  const onRefresh = ({ refreshed, error }: { refreshed: boolean; error?: unknown }) =>
    refreshed
      ? logger.info('Redis refused the credentials: read them again (a rotation)')
      : logger.error('Redis credentials could not be read again', { error: String(error) });
  return authenticateFromSecret(redis, secretId, secretReader(settings), onRefresh).catch((error: unknown) => {
    logger.error('Redis credentials could not be read; checks will degrade', {
      error: error instanceof Error ? error.message : String(error),
    });
  });
}

/** Appends each refusal as one JSON line (a local run's refusal log, read by `npx ratelimit top`). */
function appendTo(file: string): (record: RefusalRecord) => void {
  mkdirSync(dirname(file), { recursive: true });
  return (record) => appendFileSync(file, `${JSON.stringify(record)}\n`);
}

/** The longest the platform waits for Redis before its first check: past it, checks decide under their own budget. */
export const READY_WAIT_MS = 2000;

/** `work`, or nothing once `ms` have passed (the timer never holds the process open). */
function withinMs(ms: number, work: Promise<void>): Promise<void> {
  return Promise.race([work, new Promise<void>((resolve) => setTimeout(resolve, ms).unref())]);
}

export function createPlatform(overrides: Partial<Platform> = {}): Platform {
  const settings = readConsumerSettings();
  const logger = overrides.logger ?? new Logger({ serviceName: 'rate-limited-platform' });
  const redis = overrides.redis ?? sharedRedis(readSettings().redis);
  // each secret from its own consumer's folder only (config/secrets.ts)
  const policies = overrides.policies ?? createPolicyStore({ defaults: PLATFORM_POLICIES, logger, secretFolder });
  const limiterOptions = {
    redis,
    policies,
    onDegraded: (event: object) => logger.warn('rate limiter degraded', { ...event }),
  };
  const regional = overrides.limiter ? undefined : regionalLimiter(redis, limiterOptions, logger);
  const limiter = overrides.limiter ?? regional?.limiter ?? createLimiter(limiterOptions);
  return {
    logger,
    redis,
    ...(regional && regional.home !== redis ? { homeRedis: regional.home } : {}),
    policies,
    limiter,
    observer:
      overrides.observer ??
      powertoolsObserver({
        metrics: new Metrics({ namespace: PLATFORM_METRICS.namespace, serviceName: PLATFORM_METRICS.service }),
        logger,
        ...(settings.refusalLog ? { refusals: appendTo(settings.refusalLog) } : {}),
      }),
    sink: overrides.sink ?? eventSinkOf(settings.sink),
    // on the store of the checks its claims are folded into (home-mode), so a give-back reaches the claim
    acceptedOnce: overrides.acceptedOnce ?? new AcceptedOnce(regional?.home ?? redis),
    ready:
      overrides.ready ??
      redisCredentials(redis, logger)
        .then(() => withinMs(READY_WAIT_MS, ioredisConnection(redis).whenReady()))
        .catch(() => {}),
  };
}
