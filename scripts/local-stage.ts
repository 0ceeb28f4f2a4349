/**
 * The local stage's environment, in one place: what the consumers read
 * (functions/shared/settings.ts, layer/src/config/settings.ts) when they run here
 * rather than in Lambda. `npm start` (scripts/dev.ts), the tests' and
 * benchmarks' local platform (scripts/local-platform.ts) and the demo
 * (scripts/demo.ts) each say only where their files are.
 */
import { join } from 'node:path';

const ROOT = new URL('..', import.meta.url).pathname;

/** The SSM path the local parameters file stands in for. */
export const LOCAL_PARAMETER_PATH = '/ratelimit/local';

export interface LocalStageFiles {
  /** The parameters (SSM's stand-in), e.g. config/local-parameters.json or a copy. */
  readonly parametersFile: string;
  /** Where accepted events go (JSON lines). */
  readonly sinkFile: string;
  /** Where each refusal is also written (JSON lines); unset: only logged. */
  readonly refusalLog?: string | undefined;
}

/** The consumers' settings for a local stage with these files; the demo users and API keys are the repository's. */
export function localStageEnvironment(files: LocalStageFiles): Record<string, string> {
  return {
    RATE_LIMIT_PARAMETER_PATH: LOCAL_PARAMETER_PATH,
    RATE_LIMIT_PARAMETERS_FILE: files.parametersFile,
    EVENT_SINK_FILE: files.sinkFile,
    ...(files.refusalLog === undefined ? {} : { RATE_LIMIT_REFUSAL_LOG: files.refusalLog }),
    LOGIN_USERS_FILE: join(ROOT, 'config/local-users.json'),
    API_KEYS_FILE: join(ROOT, 'config/local-api-keys.json'),
  };
}

/**
 * One plain Redis at `url`, not a cluster named in the caller's environment.
 * `withoutAuth`: a Redis of its own with no users, so a secret file the caller's
 * environment names is dropped too.
 */
export function plainRedisEnvironment(url: string, { withoutAuth }: { withoutAuth: boolean }): Record<string, string> {
  return { REDIS_URL: url, REDIS_CLUSTER_NODES: '', ...(withoutAuth ? { REDIS_AUTH_SECRET_FILE: '' } : {}) };
}
