/**
 * Policy configuration (subpath `@platform/rate-limit/config`): kept out of the
 * root import so a consumer that does not read SSM does not load the SDK.
 */
import defaults from '../../../config/policies.json' with { type: 'json' };
import { readSettings } from '../settings.ts';
import { FileParameterSource } from './file-source.ts';
import type { ParameterSource } from './parameter-source.ts';
import { type ConfigLogger, PolicyStore } from './policy-store.ts';
import { SsmParameterSource } from './ssm-source.ts';

export { FileParameterSource } from './file-source.ts';
export type { ParameterSource, ParameterWriter } from './parameter-source.ts';
export {
  type ConfigLogger,
  mergeOverride,
  type PolicyExplanation,
  type PolicySource,
  PolicyStore,
  type PolicyStoreOptions,
} from './policy-store.ts';
export { SsmParameterSource } from './ssm-source.ts';

/** The platform defaults shipped with the code: config/policies.json, one policy per row of SPEC §4. */
export const PLATFORM_DEFAULTS: Readonly<Record<string, unknown>> = defaults;

export interface PolicyStoreSettings {
  /** Parameter path. @default RATE_LIMIT_PARAMETER_PATH (settings.ts) */
  readonly prefix?: string;
  /** @default a file when RATE_LIMIT_PARAMETERS_FILE is set, else SSM */
  readonly source?: ParameterSource;
  /** @default RATE_LIMIT_CONFIG_TTL_SECONDS × 1000 (settings.ts) */
  readonly ttlMs?: number;
  readonly logger?: ConfigLogger;
}

/**
 * The policy store of this container, each setting from option, then the
 * environment (validated in settings.ts: a bad value throws InvalidSettingError).
 */
export function createPolicyStore(
  settings: PolicyStoreSettings = {},
  env: Readonly<Record<string, string | undefined>> = process.env,
): PolicyStore {
  const fromEnv = readSettings(env);
  const file = fromEnv.parametersFile;
  return new PolicyStore({
    prefix: settings.prefix ?? fromEnv.parameterPath,
    source: settings.source ?? (file ? new FileParameterSource(file) : new SsmParameterSource()),
    defaults: PLATFORM_DEFAULTS,
    ttlMs: settings.ttlMs ?? fromEnv.configTtlMs,
    ...(settings.logger ? { logger: settings.logger } : {}),
  });
}
