/**
 * Policy configuration (subpath `@platform/rate-limit/config`): kept out of the
 * root import so a consumer that does not read SSM does not load the SDK.
 */
import defaults from '../../../config/policies.json' with { type: 'json' };
import { FileParameterSource } from './file-source.ts';
import type { ParameterSource } from './parameter-source.ts';
import { type ConfigLogger, PolicyStore } from './policy-store.ts';
import { SsmParameterSource } from './ssm-source.ts';

export { FileParameterSource } from './file-source.ts';
export type { ParameterSource } from './parameter-source.ts';
export { type ConfigLogger, PolicyStore, type PolicyStoreOptions } from './policy-store.ts';
export { SsmParameterSource } from './ssm-source.ts';

/** The platform defaults shipped with the code: config/policies.json, one policy per row of SPEC §4. */
export const PLATFORM_DEFAULTS: Readonly<Record<string, unknown>> = defaults;

export interface PolicyStoreSettings {
  /** Parameter path. @default env RATE_LIMIT_PARAMETER_PATH, else '/ratelimit/local' */
  readonly prefix?: string;
  /** @default a file when RATE_LIMIT_PARAMETERS_FILE is set, else SSM */
  readonly source?: ParameterSource;
  /** @default env RATE_LIMIT_CONFIG_TTL_SECONDS × 1000, else 60000 */
  readonly ttlMs?: number;
  readonly logger?: ConfigLogger;
}

/** The policy store of this container, each setting from option, then environment, then default. */
export function createPolicyStore(settings: PolicyStoreSettings = {}, env = process.env): PolicyStore {
  const file = env.RATE_LIMIT_PARAMETERS_FILE;
  const ttlSeconds = Number(env.RATE_LIMIT_CONFIG_TTL_SECONDS);
  return new PolicyStore({
    prefix: settings.prefix ?? env.RATE_LIMIT_PARAMETER_PATH ?? '/ratelimit/local',
    source: settings.source ?? (file ? new FileParameterSource(file) : new SsmParameterSource()),
    defaults: PLATFORM_DEFAULTS,
    ttlMs: settings.ttlMs ?? (ttlSeconds > 0 ? ttlSeconds * 1000 : 60_000),
    ...(settings.logger ? { logger: settings.logger } : {}),
  });
}
