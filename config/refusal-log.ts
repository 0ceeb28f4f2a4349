/**
 * Where refusals are also written locally (`RATE_LIMIT_REFUSAL_LOG`): read by
 * the consumers (functions/shared/settings.ts) and by the CLI's `top`, which
 * may not import the functions (docs/architecture.md, import rules).
 */

/** The refusal log `npm start` writes and `npx ratelimit top` reads by default. */
export const LOCAL_REFUSAL_LOG = `${new URL('../', import.meta.url).pathname}.local/refusals.jsonl`;

/** `RATE_LIMIT_REFUSAL_LOG`, or undefined when unset or empty (in AWS refusals are log lines only). */
export function readRefusalLog(env: Readonly<Record<string, string | undefined>> = process.env): string | undefined {
  return env.RATE_LIMIT_REFUSAL_LOG || undefined;
}
