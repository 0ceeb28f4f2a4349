/**
 * The platform's limiter in a multi-region stage (docs/multi-region.md): when
 * the layer's settings name other regions or a home store, home-mode checks
 * go to the home region's store (REDIS_HOME_*) and shares/approximate checks
 * to this region's (REDIS_URL / REDIS_CLUSTER_NODES), with the home store's
 * client: the webhooks' claims live beside their home-mode checks. Otherwise
 * undefined: the plain limiter on the regional store.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { createRedisClient, type Limiter, type LimiterOptions, type RedisClient } from '@platform/rate-limit';
import { readSettings, spansRegions } from '@platform/rate-limit/config';
import { authenticateFromSecret, secretReader } from '@platform/rate-limit/redis';
import { createRegionalLimiter } from '@platform/rate-limit/regions';

export function regionalLimiter(
  regionalRedis: RedisClient,
  options: LimiterOptions,
  logger: Logger,
): { readonly limiter: Limiter; readonly home: RedisClient } | undefined {
  const settings = readSettings();
  if (!spansRegions(settings)) return undefined;
  let home = regionalRedis;
  if (settings.home !== undefined) {
    const { redis, authSecretId, authSecretFile } = settings.home;
    home = createRedisClient(redis);
    if (authSecretId !== undefined) {
      authenticateFromSecret(home, authSecretId, secretReader({ redisAuthSecretFile: authSecretFile })).catch(
        (error: unknown) =>
          logger.error('home Redis credentials could not be read; home-mode checks will degrade', {
            error: error instanceof Error ? error.message : String(error),
          }),
      );
    }
  }
  return {
    limiter: createRegionalLimiter({ ...options, redis: home, regionalRedis, regions: settings.regions }),
    home,
  };
}
