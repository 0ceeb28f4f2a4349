/**
 * Every SSM parameter name of the platform, built here and nowhere else: the
 * layer's policy store reads them, the CLI writes overrides, the CDK app
 * creates the defaults and grants each function its folders, and
 * `npm run secrets:put` writes the secrets.
 *
 *   /ratelimit/<stage>                            the parameter path (RATE_LIMIT_PARAMETER_PATH)
 *     defaults/<policy>                           a policy as shipped (config/policies.json)
 *     overrides/<policy>                          an operator's partial JSON over it
 *     overrides/<policy>/<key>                    ... for one key
 *     secrets/<consumer>/<name>                   a SecureString, in the folder of its reader
 */

/** The parameter path of a stage. */
export function parameterPath(stage: string): string {
  return `/ratelimit/${stage}`;
}

/** The path local runs use. */
export const LOCAL_PARAMETER_PATH = parameterPath('local');

/** The folders under a parameter path, relative to it. */
export const PARAMETER_FOLDERS = { defaults: 'defaults', overrides: 'overrides', secrets: 'secrets' } as const;
export type ParameterFolder = keyof typeof PARAMETER_FOLDERS;

/** A folder's name prefix under `path` (with its trailing slash). */
export function folderPrefix(path: string, folder: ParameterFolder): string {
  return `${path}/${PARAMETER_FOLDERS[folder]}/`;
}

export function defaultParameter(path: string, policy: string): string {
  return `${folderPrefix(path, 'defaults')}${policy}`;
}

/** A policy override, or a per-key one. */
export function overrideParameter(path: string, policy: string, key?: string): string {
  return `${folderPrefix(path, 'overrides')}${policy}${key === undefined ? '' : `/${key}`}`;
}

/** A consumer's folder of secrets, relative to the parameter path (what a function may read). */
export function secretsFolder(consumer: string): string {
  return `${PARAMETER_FOLDERS.secrets}/${consumer}`;
}

export function secretParameter(path: string, consumer: string, name: string): string {
  return `${path}/${secretsFolder(consumer)}/${name}`;
}
