/**
 * Where `npm start` keeps the local platform's data, and the file in which it
 * remembers its durable Redis's port: read by `npm start` to reuse that port,
 * and by the CLI to find that Redis when the environment names none (apt's
 * redis-server may listen on 6379 beside it: the CLI must not act on that one
 * unasked). Local runs only; a deployed function names its Redis.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidSettingError } from '@platform/rate-limit';
import { decimalWhole } from '@platform/rate-limit/config';

/** LOCAL_DATA_DIR, or `.local` in the working directory. */
export function localDataDir(env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): string {
  return env.LOCAL_DATA_DIR || join(cwd, '.local');
}

/** The file holding the local platform's Redis port (one line: the port). */
export function localRedisPortFile(dataDir: string): string {
  return join(dataDir, 'redis', 'port');
}

/** The port `npm start` remembered, or undefined when there is none (never ran here) or the file is not a port. */
export function rememberedRedisPort(dataDir: string): number | undefined {
  let text: string;
  try {
    text = readFileSync(localRedisPortFile(dataDir), 'utf8');
  } catch {
    return undefined;
  }
  const port = decimalWhole(text.trim());
  return Number.isInteger(port) && port > 0 && port < 65536 ? port : undefined;
}

/**
 * A port a local run is told through the environment (PORT, MATTERMOST_PORT,
 * …): plain decimal digits from 0 (any free port) to 65535; undefined when
 * unset. Anything else is an InvalidSettingError naming the variable.
 */
export function localPortSetting(variable: string, env: NodeJS.ProcessEnv = process.env): number | undefined {
  const text = env[variable];
  if (text === undefined || text === '') return undefined;
  const port = decimalWhole(text);
  if (!(port >= 0 && port <= 65535)) throw new InvalidSettingError(variable, 'must be a port number from 0 to 65535');
  return port;
}
