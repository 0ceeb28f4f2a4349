import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import {
  authenticateFromSecret,
  createLimiter,
  ioredisConnection,
  type Limiter,
  type RedisClient,
  readSettings,
  secretReader,
  sharedRedis,
} from '@platform/rate-limit';
import { createPolicyStore, type PolicyStore } from '@platform/rate-limit/config';
import { powertoolsObserver } from '@platform/rate-limit/middleware';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { AcceptedOnce } from './once.ts';
import { readConsumerSettings } from './settings.ts';
import { type EventSink, FileEventSink, SqsEventSink } from './sink.ts';

/**
 * What one container shares between invocations: created on first use, once
 * (in Lambda, during the cold start; locally, once per gateway process).
 * Nothing here connects yet: Redis connects at the first check.
 */
export interface Platform {
  readonly logger: Logger;
  readonly redis: RedisClient;
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
   * against its time budget. It never rejects: a failure is logged, and
   * checks then degrade by each policy's failure mode.
   */
  readonly ready: Promise<void>;
}

let current: Platform | undefined;

/**
 * Every platform of this process, whichever copy of this module made it: the
 * local gateway may load several bundles, each with its own copy, and closes
 * them all when it stops (in Lambda there is one per container, never closed).
 */
const REGISTRY = Symbol.for('rate-limit.platforms');
const processGlobals = globalThis as unknown as Record<symbol, Set<Platform> | undefined>;
processGlobals[REGISTRY] ??= new Set<Platform>();
const everyPlatform = processGlobals[REGISTRY];

export function platform(): Platform {
  if (!current) {
    current = createPlatform();
    everyPlatform.add(current);
  }
  return current;
}

/** Closes the Redis connection of every platform in this process (the local gateway's shutdown). */
export function closeAllPlatforms(): void {
  for (const p of everyPlatform) p.redis.disconnect();
  everyPlatform.clear();
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

export function createPlatform(overrides: Partial<Platform> = {}): Platform {
  const settings = readConsumerSettings();
  const logger = overrides.logger ?? new Logger({ serviceName: 'rate-limited-platform' });
  const redis = overrides.redis ?? sharedRedis();
  const policies = overrides.policies ?? createPolicyStore({ defaults: PLATFORM_POLICIES, logger });
  const limiter =
    overrides.limiter ??
    createLimiter({ redis, policies, onDegraded: (event) => logger.warn('rate limiter degraded', { ...event }) });
  return {
    logger,
    redis,
    policies,
    limiter,
    observer:
      overrides.observer ??
      powertoolsObserver({ metrics: new Metrics({ namespace: 'RateLimit', serviceName: 'platform' }), logger }),
    sink:
      overrides.sink ??
      (settings.sink.kind === 'sqs' ? new SqsEventSink(settings.sink.queueUrl) : new FileEventSink(settings.sink.file)),
    acceptedOnce: overrides.acceptedOnce ?? new AcceptedOnce(redis),
    ready:
      overrides.ready ??
      redisCredentials(redis, logger)
        .then(() => ioredisConnection(redis).whenReady())
        .catch(() => {}),
  };
}
