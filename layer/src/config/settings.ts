import { InvalidSettingError } from '../core/errors.ts';
import type { RedisSettings } from '../redis/connection.ts';
import { type RegionSettings, readRegionSettings } from '../regions/settings.ts';
import { LOCAL_PARAMETER_PATH } from './parameters.ts';

/**
 * Every setting the layer reads from the environment, in one place: each
 * variable, its default and its validation. A bad value is an
 * `InvalidSettingError` at startup naming the variable, never a silent default.
 *
 * | variable                        | meaning                                                | default                    |
 * | ------------------------------- | ------------------------------------------------------ | -------------------------- |
 * | `REDIS_CLUSTER_NODES`           | `host:port,host:port`: Redis Cluster (production)      | none: a single node        |
 * | `REDIS_URL`                     | `redis://host:port` or `rediss://…`: a single node     | `redis://127.0.0.1:6379`   |
 * | `REDIS_TLS`                     | `true` for TLS to cluster nodes (ElastiCache); a single node's is its URL's (`rediss://`) | `false` |
 * | `REDIS_TLS_CA_FILE`             | PEM of a private CA the server's certificate chains to | none: the system's CAs     |
 * | `REDIS_AUTH_SECRET_ARN`         | Secrets Manager secret `{"password","username"?}`      | none: no AUTH              |
 * | `REDIS_AUTH_SECRET_FILE`        | a file holding that secret instead (local runs)         | none: Secrets Manager      |
 * | `RATE_LIMIT_PARAMETER_PATH`     | SSM path of the policies (`/ratelimit/prod`)           | `/ratelimit/local`         |
 * | `RATE_LIMIT_PARAMETERS_FILE`    | a JSON file of parameters instead of SSM (local runs)  | none: SSM                  |
 * | `RATE_LIMIT_CONFIG_TTL_SECONDS` | how long fetched parameters serve before a refresh (decimal digits) | `60` (1..3600) |
 * | `RATE_LIMIT_READ_PATHS`         | the paths under it this function reads (`defaults,overrides,secrets/login`) | everything |
 * | `RATE_LIMIT_REGION`, `RATE_LIMIT_HOME_REGION`, `RATE_LIMIT_REGIONS` | regions (regions/settings.ts) | `local` |
 * | `REDIS_HOME_URL` / `REDIS_HOME_CLUSTER_NODES` | the home region's store, forms as above | the regional store |
 * | `REDIS_HOME_AUTH_SECRET_ARN` / `_FILE` | the home store's credentials              | the regional store's |
 */
export interface LayerSettings {
  readonly redis: RedisSettings;
  /** The secret holding the Redis credentials (redis/auth.ts), when Redis requires them. */
  readonly redisAuthSecretId: string | undefined;
  /**
   * A file that stands in for Secrets Manager (local runs): the secret's
   * text, read the same way and again whenever Redis refuses the credentials.
   */
  readonly redisAuthSecretFile: string | undefined;
  readonly parameterPath: string;
  readonly parametersFile: string | undefined;
  readonly configTtlMs: number;
  /** The paths under the parameter path this function reads (its IAM grants those alone); undefined: all of it. */
  readonly readPaths: readonly string[] | undefined;
  readonly regions: RegionSettings;
  /** The home region's store and its secret (home-mode policies); undefined: the regional store is the home store. */
  readonly home:
    | {
        readonly redis: RedisSettings;
        readonly authSecretId: string | undefined;
        readonly authSecretFile: string | undefined;
      }
    | undefined;
}

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
export const DEFAULT_PARAMETER_PATH = LOCAL_PARAMETER_PATH;
const DEFAULT_CONFIG_TTL_SECONDS = 60;

/** Secrets Manager's SecretId: a name or an ARN, these characters only. */
const SECRET_ID = /^[A-Za-z0-9/_+=.@:-]{1,2048}$/;

type Env = Readonly<Record<string, string | undefined>>;

const HOST_PORT = /^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):(\d{1,5})$/;
const PARAMETER_PATH = /^(\/[A-Za-z0-9_.-]+)+$/;

function clusterNodes(text: string, variable = 'REDIS_CLUSTER_NODES'): string[] {
  const nodes = text
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  if (nodes.length === 0) throw new InvalidSettingError(variable, 'names no node (host:port,…)');
  for (const node of nodes) {
    const port = Number(HOST_PORT.exec(node)?.[2]);
    if (!(port >= 1 && port <= 65535)) {
      throw new InvalidSettingError(variable, `"${node}" is not host:port with a port from 1 to 65535`);
    }
  }
  return nodes;
}

function redisUrl(text: string, variable = 'REDIS_URL'): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new InvalidSettingError(variable, 'is not a URL (redis://host:port)');
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw new InvalidSettingError(variable, `must use redis:// or rediss://, not ${url.protocol}//`);
  }
  return text;
}

function flag(name: string, text: string | undefined): boolean {
  if (text === undefined || text === '' || text === 'false') return false;
  if (text === 'true') return true;
  throw new InvalidSettingError(name, 'must be "true" or "false"');
}

// segments start with a letter or digit: no `..`, no empty or absolute path
const READ_PATH = /^[A-Za-z0-9][A-Za-z0-9_.-]*(\/[A-Za-z0-9][A-Za-z0-9_.-]*)*$/;

function readPaths(text: string | undefined): readonly string[] | undefined {
  if (text === undefined || text === '') return undefined;
  const paths = text.split(',').map((p) => p.trim());
  if (!paths.every((p) => READ_PATH.test(p))) {
    throw new InvalidSettingError(
      'RATE_LIMIT_READ_PATHS',
      'must be paths under the parameter path: defaults,overrides,secrets/<consumer>',
    );
  }
  return paths;
}

/**
 * A whole number written as plain decimal digits, or NaN: Number() alone
 * reads `0x10` as 16, `1e3` as 1000 and ` 60` as 60. Every whole-number
 * setting of the layer and the platform's functions is read through it.
 */
export function decimalWhole(text: string): number {
  return /^[0-9]{1,15}$/.test(text) ? Number(text) : Number.NaN;
}

function ttlSeconds(text: string | undefined): number {
  if (text === undefined || text === '') return DEFAULT_CONFIG_TTL_SECONDS;
  const seconds = decimalWhole(text);
  if (!(Number.isInteger(seconds) && seconds >= 1 && seconds <= 3600)) {
    throw new InvalidSettingError('RATE_LIMIT_CONFIG_TTL_SECONDS', 'must be a whole number of seconds from 1 to 3600');
  }
  return seconds;
}

/** The home store: the REDIS_HOME_* forms of REDIS_CLUSTER_NODES / REDIS_URL, TLS as the regional store's. */
function homeStore(env: Env, tls: boolean, tlsCa: { tlsCaFile?: string }, secret?: string, secretFile?: string) {
  const nodes = env.REDIS_HOME_CLUSTER_NODES;
  const url = env.REDIS_HOME_URL;
  if (!nodes && !url) return undefined;
  const redis: RedisSettings = nodes
    ? { clusterNodes: clusterNodes(nodes, 'REDIS_HOME_CLUSTER_NODES'), tls, ...tlsCa }
    : { url: redisUrl(url as string, 'REDIS_HOME_URL'), ...tlsCa };
  const homeSecret = env.REDIS_HOME_AUTH_SECRET_ARN || secret;
  if (homeSecret !== undefined && !SECRET_ID.test(homeSecret)) {
    throw new InvalidSettingError('REDIS_HOME_AUTH_SECRET_ARN', 'must be a Secrets Manager secret ARN or name');
  }
  const homeFile = env.REDIS_HOME_AUTH_SECRET_FILE || secretFile;
  return {
    redis,
    authSecretId: homeSecret ?? (homeFile === undefined ? undefined : 'local'),
    authSecretFile: homeFile,
  };
}

/**
 * Whether a stage decides across regions: more than one region, or a home
 * store of its own. Then its limiter is the regional one (home-mode policies
 * on the home store); the consumers and the CLI ask this one question.
 */
export function spansRegions(settings: Pick<LayerSettings, 'home' | 'regions'>): boolean {
  return settings.home !== undefined || settings.regions.regions.length > 1;
}

/** The layer's settings from the environment; throws InvalidSettingError for the first bad one. */
export function readSettings(env: Env = process.env): LayerSettings {
  const nodes = env.REDIS_CLUSTER_NODES;
  const tls = flag('REDIS_TLS', env.REDIS_TLS);
  const tlsCa = env.REDIS_TLS_CA_FILE ? { tlsCaFile: env.REDIS_TLS_CA_FILE } : {};
  const redis: RedisSettings =
    nodes !== undefined && nodes !== ''
      ? { clusterNodes: clusterNodes(nodes), tls, ...tlsCa }
      : { url: redisUrl(env.REDIS_URL || DEFAULT_REDIS_URL), ...tlsCa };
  const parameterPath = env.RATE_LIMIT_PARAMETER_PATH || DEFAULT_PARAMETER_PATH;
  if (!PARAMETER_PATH.test(parameterPath)) {
    throw new InvalidSettingError('RATE_LIMIT_PARAMETER_PATH', 'must be an SSM path such as /ratelimit/prod');
  }
  const secret = env.REDIS_AUTH_SECRET_ARN || undefined;
  if (secret !== undefined && !SECRET_ID.test(secret)) {
    throw new InvalidSettingError('REDIS_AUTH_SECRET_ARN', 'must be a Secrets Manager secret ARN or name');
  }
  const secretFile = env.REDIS_AUTH_SECRET_FILE || undefined;
  return {
    redis,
    // a file alone names the local secret
    redisAuthSecretId: secret ?? (secretFile === undefined ? undefined : 'local'),
    redisAuthSecretFile: secretFile,
    parameterPath,
    parametersFile: env.RATE_LIMIT_PARAMETERS_FILE || undefined,
    configTtlMs: ttlSeconds(env.RATE_LIMIT_CONFIG_TTL_SECONDS) * 1000,
    readPaths: readPaths(env.RATE_LIMIT_READ_PATHS),
    regions: readRegionSettings(env),
    home: homeStore(env, tls, tlsCa, secret, secretFile),
  };
}
