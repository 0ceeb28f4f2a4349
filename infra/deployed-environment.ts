/**
 * What a deployed function may be told: never a local stand-in. Each
 * consumer falls back to a file or a fake when a variable is unset or names
 * one (functions/shared/settings.ts, layer/src/config/settings.ts): in Lambda that is
 * a 500 on the first request or a stub that answers. The platform stack runs
 * this over every function's environment, and a finding fails the synth.
 */
import type { PlatformResource } from '../functions/route.ts';

/** Variables that name a local file or server: declared empty at most (SAM's --env-vars overrides declared ones only). */
export const LOCAL_ONLY_VARIABLES = [
  'LOGIN_USERS_FILE',
  'API_KEYS_FILE',
  'EVENT_SINK_FILE',
  'RATE_LIMIT_PARAMETERS_FILE',
  'REDIS_AUTH_SECRET_FILE',
  'RATE_LIMIT_REFUSAL_LOG',
  'REDIS_URL',
] as const;

/** What a function using each part must be told; unset, it falls back to a local stand-in (a file, the fake model). */
export const REQUIRED_BY_USE: Readonly<Record<PlatformResource, readonly string[]>> = {
  userDirectory: ['LOGIN_USER_POOL_ID', 'LOGIN_USER_POOL_CLIENT_ID'],
  llmProvider: ['LLM_PROVIDER'],
  eventQueue: ['EVENT_QUEUE_URL'],
  apiKeyRegistry: ['API_KEYS_PARAMETER_PATH'],
};

/** A function's environment as the template has it (`Variables`) or as its L1 construct resolves (`variables`). */
type Environment = { Variables?: Record<string, unknown>; variables?: Record<string, unknown> } | undefined;

/** The findings for one function's synthesized environment, by what it uses (empty: deployable). */
export function checkDeployedEnvironment(
  id: string,
  uses: readonly PlatformResource[],
  environment: Environment,
): string[] {
  const variables = environment?.Variables ?? environment?.variables ?? {};
  const findings: string[] = [];
  const set = (name: string) => variables[name] !== undefined && variables[name] !== '';
  for (const name of LOCAL_ONLY_VARIABLES) {
    if (set(name)) findings.push(`function ${id}: ${name} is set: a deployed function would use a local stand-in`);
  }
  for (const use of uses) {
    for (const name of REQUIRED_BY_USE[use]) {
      if (!set(name)) findings.push(`function ${id}: uses ${use} but ${name} is unset: it would use a local stand-in`);
    }
  }
  if (set('LLM_PROVIDER') && variables.LLM_PROVIDER !== 'bedrock') {
    findings.push(`function ${id}: LLM_PROVIDER=${String(variables.LLM_PROVIDER)}: a deployed function calls bedrock`);
  }
  return findings;
}
