/**
 * Policy configuration (subpath `@platform/rate-limit/config`): the policy
 * store, its parameters' names and the layer's settings from the
 * environment. Kept out of the root import in the source (the built layer
 * puts every entry but `ssm` in one module), and the SSM client out of this
 * one until a store first reads SSM, so a cold start pays for the SDK only
 * where SSM is used.
 */

import { FileParameterSource } from './file-source.ts';
import type { ParameterSource, ParameterWriter } from './parameter-source.ts';
import { type ConfigLogger, PolicyStore } from './policy-store.ts';
import { readSettings } from './settings.ts';

export { FileParameterSource } from './file-source.ts';
export { parseIsoTime } from './iso-time.ts';
export type { ParameterSource, ParameterWriter } from './parameter-source.ts';
export {
  defaultParameter,
  folderPrefix,
  LOCAL_PARAMETER_PATH,
  overrideParameter,
  PARAMETER_FOLDERS,
  parameterPath,
  secretParameter,
  secretsFolder,
} from './parameters.ts';
export {
  classifyParameters,
  compileOverride,
  inForce,
  mergeOverride,
  overridePatch,
  validateParameter,
} from './policy-layers.ts';
export {
  type ConfigLogger,
  type PolicyExplanation,
  type PolicySource,
  PolicyStore,
  type PolicyStoreOptions,
  type RefreshOutcome,
  type ValidatedOverride,
} from './policy-store.ts';
export {
  DEFAULT_PARAMETER_PATH,
  DEFAULT_REDIS_URL,
  decimalWhole,
  type LayerSettings,
  readSettings,
  spansRegions,
} from './settings.ts';

export interface PolicyStoreSettings {
  /** The defaults shipped with the caller's code (the platform's catalogue): the last resort. */
  readonly defaults: Readonly<Record<string, unknown>>;
  /** Parameter path. @default RATE_LIMIT_PARAMETER_PATH (settings.ts) */
  readonly prefix?: string;
  /** @default a file when RATE_LIMIT_PARAMETERS_FILE is set, else SSM (loaded on first read) */
  readonly source?: ParameterSource;
  /** @default RATE_LIMIT_CONFIG_TTL_SECONDS × 1000 (settings.ts) */
  readonly ttlMs?: number;
  readonly logger?: ConfigLogger;
  /** The folder each secret lives in (PolicyStoreOptions.secretFolder). @default any folder */
  readonly secretFolder?: (name: string) => string | undefined;
}

/**
 * SSM Parameter Store, its module (Powertools Parameters and the SDK client)
 * imported at the first read or write rather than at cold start.
 */
export function deferredSsmSource(): ParameterSource & ParameterWriter {
  let loaded: Promise<ParameterSource & ParameterWriter> | undefined;
  const source = () => {
    loaded ??= import('./ssm-source.ts').then(({ SsmParameterSource }) => new SsmParameterSource());
    return loaded;
  };
  return {
    fetchAll: async (path) => (await source()).fetchAll(path),
    put: async (name, value) => (await source()).put(name, value),
  };
}

/**
 * The policy store of this container, each setting from option, then the
 * environment (validated in settings.ts: a bad value throws InvalidSettingError).
 */
export function createPolicyStore(
  settings: PolicyStoreSettings,
  env: Readonly<Record<string, string | undefined>> = process.env,
): PolicyStore {
  const fromEnv = readSettings(env);
  const file = fromEnv.parametersFile;
  return new PolicyStore({
    prefix: settings.prefix ?? fromEnv.parameterPath,
    source: settings.source ?? (file ? new FileParameterSource(file) : deferredSsmSource()),
    defaults: settings.defaults,
    ttlMs: settings.ttlMs ?? fromEnv.configTtlMs,
    ...(settings.logger ? { logger: settings.logger } : {}),
    ...(settings.secretFolder ? { secretFolder: settings.secretFolder } : {}),
    ...(fromEnv.readPaths ? { readPaths: fromEnv.readPaths } : {}),
  });
}
