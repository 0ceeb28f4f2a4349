/**
 * `npx ratelimit <command>`: what an operator needs at 3 a.m. without a deploy.
 *
 *   policies [<key>]                         every policy in force, and where each value came from
 *   inspect <policy> <key>                   the live state of a key, debiting nothing
 *   reset <policy> <key>                     forget a key's counter (unlock an account, clear a window)
 *   rate <policy> <key> --set N | --increase | --decrease [--pause 30s]
 *   override <policy> [<key>] '<json>'       write an override, validated as the store validates it
 *     [--until <ISO time> | --for 8h]         ... that ends by itself then (a real, future time)
 *   api-key new                              a new API key and the keyed hash it is registered by
 *
 * A key may be given raw and is then hashed as the consumers hash it, never
 * printed back: --email <address> (peppered), --api-key <key>. --scope <id>
 * for grouped policies; --json for scripts.
 * Where: Redis from REDIS_CLUSTER_NODES / REDIS_URL / REDIS_TLS (as the layer);
 * parameters from RATE_LIMIT_PARAMETERS_FILE (default config/local-parameters.json),
 * or SSM under RATE_LIMIT_PARAMETER_PATH with --ssm (your AWS profile).
 * Exit codes: 0 done, 1 Redis or the parameter store unavailable, 2 bad
 * arguments, 3 refused (an invalid override or key: nothing written).
 * Every write is logged to stderr as one JSON line: who, what, before, after.
 */
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { parseArgs } from 'node:util';
import {
  assertKeyPart,
  authenticateFromSecret,
  budgetKeys,
  compilePolicy,
  counterKey,
  createLimiter,
  createRedisClient,
  type Decision,
  InvalidCheckError,
  InvalidPolicyError,
  ioredisConnection,
  type Limiter,
  MisconfiguredCheckError,
  overrideParameter,
  parseDuration,
  type RateChange,
  RateLimitError,
  type RedisClient,
  rateKey,
  readSettings,
  secretReader,
  unitOf,
} from '@platform/rate-limit';
import {
  createPolicyStore,
  FileParameterSource,
  mergeOverride,
  overridePatch,
  type ParameterSource,
  type ParameterWriter,
  type PolicyStore,
  parseIsoTime,
} from '@platform/rate-limit/config';
import { hashEmail, REFUSAL_LOG, type RefusalRecord } from '@platform/rate-limit/middleware';
import { API_KEY_PEPPER, hashApiKey, isApiKey, newApiKey } from '../config/api-key.ts';
import { PLATFORM_POLICIES } from '../config/catalogue.ts';
import { LOCAL_REFUSAL_LOG, readRefusalLog } from '../config/refusal-log.ts';

const EXIT = { ok: 0, unavailable: 1, usage: 2, refused: 3 } as const;

class CliError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

const USAGE = `usage: ratelimit <command> [options]

  policies [<key>]                        every policy in force, and where each value came from
  inspect <policy> <key>                  a key's live state, debiting nothing
  reset <policy> <key>                    forget a key's counter (unlock an account, clear a window)
  rate <policy> <key> --set N | --increase | --decrease [--pause 30s]
                                          change an adaptive bucket's rate for every worker
  override <policy> [<key>] '<json>' [--until 2026-12-02T06:00Z | --for 8h]
                                          write a policy (or per-key) override, validated first;
                                          with --until/--for it ends by itself then
  top <policy> [--since 1h]               the keys a policy refused most (local refusal log)
  api-key new                             a new API key and its registry entry (its keyed hash)

options:
  --email <address>   the key is this email, hashed with the pepper as login does
  --api-key <key>     the key is this API key (rk_…), hashed with the pepper as the API does
  --scope <id>        the hash tag of a grouped policy (a workspace, a bot)
  --ssm               parameters from SSM (RATE_LIMIT_PARAMETER_PATH), not the local file
  --json              machine-readable output
  -h, --help          this help

exit codes: 0 done, 1 Redis or parameters unavailable, 2 bad arguments, 3 refused (nothing written)`;

/** Where a run writes: the terminal for `npx ratelimit`, the answer for the admin function. */
export interface CliOutput {
  stdout(text: string): void;
  stderr(text: string): void;
  /** Who runs it, for the audit lines. @default the OS user */
  readonly who?: string;
  /** Told of each write's audit record as it is logged (the admin function notifies the operators). */
  readonly onAudit?: (record: AuditRecord) => void;
}

/** One write's audit line: who, what, when, and the command's own detail (policy, key, before, after). */
export interface AuditRecord {
  readonly audit: 'ratelimit';
  readonly who: string;
  readonly what: string;
  readonly at: string;
  readonly [detail: string]: unknown;
}

interface Context {
  readonly io: CliOutput;
  readonly json: boolean;
  readonly store: PolicyStore;
  readonly source: ParameterSource & ParameterWriter;
  readonly prefix: string;
  redis?: RedisClient;
  limiter?: Limiter;
}

function out(context: Context, human: string, data: unknown): void {
  context.io.stdout(`${context.json ? JSON.stringify(data) : human}\n`);
}

/** One JSON line per write: who, what, before, after (never a raw key). */
function audit(context: Context, what: string, detail: Record<string, unknown>): void {
  const who = context.io.who ?? userInfo().username;
  const record: AuditRecord = { audit: 'ratelimit', who, what, at: new Date().toISOString(), ...detail };
  context.io.stderr(`${JSON.stringify(record)}\n`);
  context.io.onAudit?.(record);
}

function limiterOf(context: Context): Limiter {
  if (!context.limiter) {
    context.redis ??= createRedisClient(readSettings().redis);
    context.limiter = createLimiter({ redis: context.redis, policies: context.store, onDegraded: () => {} });
  }
  return context.limiter;
}

/** The key to use: a raw email or API key hashed as the consumers hash it, else the one given. */
function keyOf(context: Context, given: string | undefined, values: { email?: string; 'api-key'?: string }): string {
  if (values.email !== undefined) {
    const pepper = context.store.secret('email-pepper');
    if (!pepper) throw new CliError(EXIT.unavailable, 'no email pepper in the parameters (secrets/login/email-pepper)');
    return hashEmail(values.email, pepper);
  }
  if (values['api-key'] !== undefined) return apiKeyHashOf(context, values['api-key']);
  if (given === undefined) throw new CliError(EXIT.usage, 'a key is needed (or --email / --api-key)');
  return given;
}

/** An API key's keyed hash, as the API knows it; a key of the wrong shape is a usage error, never hashed. */
function apiKeyHashOf(context: Context, apiKey: string): string {
  if (!isApiKey(apiKey.trim()))
    throw new CliError(EXIT.usage, '--api-key takes an API key: rk_ followed by 32 base64url characters');
  const pepper = context.store.secret(API_KEY_PEPPER);
  if (!pepper) throw new CliError(EXIT.unavailable, 'no API key pepper in the parameters (secrets/api/api-key-pepper)');
  return hashApiKey(apiKey.trim(), pepper);
}

function describe(decision: Decision): Record<string, unknown> {
  if (decision.outcome === 'degraded')
    throw new CliError(EXIT.unavailable, `Redis could not answer (${decision.reason})`);
  const { remaining, retryAfterMs, resetAfterMs, limit } = decision.binding;
  return { outcome: decision.outcome, limit, remaining, retryAfterMs, resetAfterMs };
}

async function inspect(context: Context, policyName: string, key: string, scope: string | undefined) {
  const limiter = limiterOf(context);
  const policy = limiter.policyFor(policyName, key);
  const options = scope === undefined ? {} : { scope };
  const state: Record<string, unknown> = {
    policy: policyName,
    key,
    strategy: policy.strategy,
    ...describe(await limiter.peek([{ policy: policyName, key }], options)),
  };
  const counter = counterKey(policy, key, scope);
  const redis = context.redis as RedisClient;
  state.ttlMs = await redis.pttl(counter);
  if (policy.strategy === 'tokenBucket' && policy.adaptive) {
    const rate = await limiter.currentRate(policyName, key, options);
    state.ratePerSecond = rate.decided ? rate.ratePerSecond : undefined;
  }
  // what else its strategy keeps (a runtime rate's expiry, a backoff's failures)
  return { ...state, ...(await unitOf(policy.strategy).inspect?.(policy, counter, redis)) };
}

function table(state: Record<string, unknown>): string {
  return Object.entries(state)
    .map(([name, value]) => `${name.padEnd(14)} ${typeof value === 'object' ? JSON.stringify(value) : String(value)}`)
    .join('\n');
}

const CLI_OPTIONS = {
  email: { type: 'string' },
  'api-key': { type: 'string' },
  scope: { type: 'string' },
  set: { type: 'string' },
  increase: { type: 'boolean' },
  decrease: { type: 'boolean' },
  pause: { type: 'string' },
  until: { type: 'string' },
  for: { type: 'string' },
  since: { type: 'string' },
  ssm: { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type CliValues = ReturnType<
  typeof parseArgs<{ options: typeof CLI_OPTIONS; allowPositionals: true; strict: true }>
>['values'];

/** Every policy in force, each field with where its value comes from (optionally for one key). */
async function policiesCommand(context: Context, rest: readonly string[], values: CliValues): Promise<number> {
  const key =
    rest[0] === undefined && !values.email && !values['api-key'] ? undefined : keyOf(context, rest[0], values);
  const names = context.store.policyNames();
  const all = Object.fromEntries(names.map((name) => [name, context.store.explain(name, key)]));
  const human = names
    .map((name) => {
      const sources = all[name]?.sources ?? {};
      const lines = Object.entries(sources).map(
        ([field, from]) =>
          `  ${field.padEnd(22)} ${JSON.stringify(valueAt(all[name]?.config, field)).padEnd(24)} ${from}`,
      );
      const expires = Object.entries(all[name]?.expires ?? {}).map(([layer, at]) => `  ${layer} ends ${at}`);
      return [`${name}${key ? ` (key ${key})` : ''}`, ...lines, ...expires].join('\n');
    })
    .join('\n\n');
  out(context, human, all);
  return EXIT.ok;
}

/** Where one key of a policy stands, without debiting it. */
async function inspectCommand(context: Context, rest: readonly string[], values: CliValues): Promise<number> {
  const [policy, given] = rest;
  if (!policy) throw new CliError(EXIT.usage, 'inspect <policy> <key>');
  const state = await inspect(context, policy, keyOf(context, given, values), values.scope);
  out(context, table(state), state);
  return EXIT.ok;
}

/** Forgets one key of a policy (its counter, budget holds and runtime rate), audited. */
async function resetCommand(context: Context, rest: readonly string[], values: CliValues): Promise<number> {
  const [policy, given] = rest;
  if (!policy) throw new CliError(EXIT.usage, 'reset <policy> <key>');
  const key = keyOf(context, given, values);
  const before = await inspect(context, policy, key, values.scope);
  const counter = counterKey(limiterOf(context).policyFor(policy, key), key, values.scope);
  // every key the policy may hold for it: counter (or budget and its holds) and runtime rate
  await (context.redis as RedisClient).del(...budgetKeys(counter), rateKey(counter));
  const after = await inspect(context, policy, key, values.scope);
  audit(context, 'reset', { policy, key, before, after });
  out(context, `reset ${policy} ${key}\n${table(after)}`, { before, after });
  return EXIT.ok;
}

/** Sets or steps an adaptive bucket's runtime rate for one key, audited. */
async function rateCommand(context: Context, rest: readonly string[], values: CliValues): Promise<number> {
  const [policy, given] = rest;
  if (!policy) throw new CliError(EXIT.usage, 'rate <policy> <key> --set N | --increase | --decrease [--pause 30s]');
  const key = keyOf(context, given, values);
  const chosen = [values.set !== undefined, values.increase === true, values.decrease === true].filter(Boolean).length;
  if (chosen !== 1) throw new CliError(EXIT.usage, 'exactly one of --set N, --increase, --decrease');
  const pauseMs =
    values.pause === undefined
      ? undefined
      : parseDuration(values.pause.replace(/^(\d+(?:\.\d+)?)(ms|s|m|h)$/, '$1 $2'));
  if (values.pause !== undefined && pauseMs === undefined)
    throw new CliError(EXIT.usage, '--pause takes a duration such as 30s or 2m');
  const change: RateChange =
    values.set !== undefined
      ? { set: Number(values.set) }
      : values.increase
        ? { increase: true }
        : { decrease: true, ...(pauseMs === undefined ? {} : { pauseMs }) };
  const options = values.scope === undefined ? {} : { scope: values.scope };
  const limiter = limiterOf(context);
  const current = await limiter.currentRate(policy, key, options);
  const before = current.decided ? current.ratePerSecond : undefined;
  const outcome = await limiter.changeRate(policy, key, change, options);
  if (!outcome.decided) throw new CliError(EXIT.unavailable, `Redis could not answer (${outcome.reason})`);
  audit(context, 'rate', { policy, key, change, before, after: outcome.ratePerSecond });
  out(context, `${policy} ${key}: ${before}/s -> ${outcome.ratePerSecond}/s`, {
    before,
    after: outcome.ratePerSecond,
  });
  return EXIT.ok;
}

/**
 * The instant an override's `until` names, checked however it was given (the
 * `--until` flag, or an `until` in the JSON): malformed is `malformedCode`
 * (the flag: a usage error, 2; the JSON: refused, 3), past is refused (3):
 * such an override could never apply.
 */
function untilOf(text: unknown, given: string, malformedCode: number, now: number): number {
  const at = typeof text === 'string' ? parseIsoTime(text) : undefined;
  if (at === undefined)
    throw new CliError(
      malformedCode,
      `${given} takes a real ISO 8601 time such as 2026-12-02T06:00Z, not ${JSON.stringify(text)}`,
    );
  if (at <= now)
    throw new CliError(EXIT.refused, `${given} ${String(text)} has passed: the override would never apply`);
  return at;
}

/** When an override written now ends: `--until <ISO time>` or `--for <duration>`; undefined for one that stays. */
function overrideEnd(values: CliValues, now = Date.now()): string | undefined {
  if (values.until !== undefined && values.for !== undefined) throw new CliError(EXIT.usage, 'one of --until, --for');
  if (values.for !== undefined) {
    const ms = parseDuration(values.for.replace(/^(\d+(?:\.\d+)?)(ms|s|m|h)$/, '$1 $2'));
    if (ms === undefined || ms <= 0) throw new CliError(EXIT.usage, '--for takes a duration such as 8h or 30m');
    return new Date(now + ms).toISOString();
  }
  if (values.until === undefined) return undefined;
  return new Date(untilOf(values.until, '--until', EXIT.usage, now)).toISOString();
}

/** Writes a policy override (or a per-key one) where the store reads it, after checking it compiles, audited. */

async function overrideCommand(context: Context, rest: readonly string[], values: CliValues): Promise<number> {
  const [policy, ...tail] = rest;
  const [key, text] = tail.length >= 2 ? [tail[0], tail[1]] : [undefined, tail[0]];
  if (!policy || text === undefined) throw new CliError(EXIT.usage, "override <policy> [<key>] '<json>'");
  const now = Date.now();
  const until = overrideEnd(values, now);
  let patch: unknown;
  try {
    patch = JSON.parse(text);
  } catch (error) {
    throw new CliError(EXIT.refused, `not JSON: ${(error as Error).message}`);
  }
  const isObject = typeof patch === 'object' && patch !== null && !Array.isArray(patch);
  if (until !== undefined) {
    if (!isObject) throw new CliError(EXIT.refused, 'an override that ends is a JSON object');
    if (Object.hasOwn(patch as object, 'until'))
      throw new CliError(EXIT.usage, 'the end is given twice: --until/--for and an "until" in the JSON');
    patch = { ...(patch as object), until };
  } else if (isObject && Object.hasOwn(patch as object, 'until')) {
    // the JSON's own end, held to the flag's rules, written as the instant it names
    const at = untilOf((patch as { until: unknown }).until, 'until', EXIT.refused, now);
    patch = { ...(patch as object), until: new Date(at).toISOString() };
  }
  const base = context.store.explain(policy)?.config;
  if (base === undefined) throw new CliError(EXIT.refused, `no policy "${policy}" to override`);
  let applied: unknown;
  try {
    applied = overridePatch(patch).patch; // an `until` of the JSON's own is checked too
  } catch (error) {
    throw new CliError(EXIT.refused, (error as Error).message);
  }
  compilePolicy(policy, mergeOverride(base, applied)); // throws InvalidPolicyError with the reason
  if (key !== undefined) assertKeyPart(key); // an InvalidCheckError: refused, exit 3
  const name = overrideParameter(context.prefix, policy, key);
  const before = (await context.source.fetchAll(context.prefix))[name];
  await context.source.put(name, JSON.stringify(patch));
  audit(context, 'override', { parameter: name, policy, key, before: before ?? null, after: patch });
  out(context, `wrote ${name}: ${JSON.stringify(patch)} (was ${before ?? 'unset'})`, {
    parameter: name,
    before: before ?? null,
    after: patch,
  });
  return EXIT.ok;
}

/**
 * The keys a policy refused most since `--since` (default 1 h), from the
 * local refusal log (RATE_LIMIT_REFUSAL_LOG; `npm start` writes
 * .local/refusals.jsonl): keys as they are stored, never a raw secret. In AWS
 * the same lines feed the Contributor Insights rule of the dashboard.
 */
async function topCommand(context: Context, rest: readonly string[], values: CliValues): Promise<number> {
  const [policy] = rest;
  if (!policy) throw new CliError(EXIT.usage, 'top <policy> [--since 1h]');
  const sinceMs = parseDuration((values.since ?? '1h').replace(/^(\d+(?:\.\d+)?)(ms|s|m|h)$/, '$1 $2'));
  if (sinceMs === undefined || sinceMs <= 0)
    throw new CliError(EXIT.usage, '--since takes a duration such as 1h or 15m');
  const file = readRefusalLog() ?? LOCAL_REFUSAL_LOG;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new CliError(
      EXIT.unavailable,
      `no refusal log at ${file} (npm start writes one; RATE_LIMIT_REFUSAL_LOG names another)`,
    );
  }
  const from = Date.now() - sinceMs;
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    let record: Partial<RefusalRecord>;
    try {
      record = JSON.parse(line) as Partial<RefusalRecord>;
    } catch {
      continue; // a line cut short by a crash, or not a refusal
    }
    if (record.message !== REFUSAL_LOG.message || record.policy !== policy || typeof record.key !== 'string') continue;
    if (!(Date.parse(String(record.time)) >= from)) continue;
    counts.set(record.key, (counts.get(record.key) ?? 0) + 1);
  }
  const top = [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, 10);
  const human =
    top.length === 0
      ? `no refusals of ${policy} since ${values.since ?? '1h'} ago`
      : top.map(([key, n]) => `${String(n).padStart(8)}  ${key}`).join('\n');
  out(context, human, {
    policy,
    since: new Date(from).toISOString(),
    top: top.map(([key, refused]) => ({ key, refused })),
  });
  return EXIT.ok;
}

/**
 * `api-key new`: a fresh key and the registry entry it is known by (its keyed
 * hash), for a new caller or for re-keying one (docs/configuration.md, "API
 * keys"). The key is printed once, here only; nothing is written.
 */
async function apiKeyCommand(context: Context, rest: readonly string[]): Promise<number> {
  if (rest[0] !== 'new') throw new CliError(EXIT.usage, 'api-key new');
  const apiKey = newApiKey();
  const keyHash = apiKeyHashOf(context, apiKey);
  out(
    context,
    `api key (give it to its owner; it is shown once): ${apiKey}\nits registry entry: ${keyHash}  (SSM <API_KEYS_PARAMETER_PATH>/${keyHash}, or a key of config/local-api-keys.json)`,
    { apiKey, keyHash },
  );
  return EXIT.ok;
}

const COMMANDS: Readonly<
  Record<string, (context: Context, rest: readonly string[], values: CliValues) => Promise<number>>
> = {
  policies: policiesCommand,
  inspect: inspectCommand,
  reset: resetCommand,
  rate: rateCommand,
  override: overrideCommand,
  top: topCommand,
  'api-key': apiKeyCommand,
};

/** The commands that talk to Redis, and so wait for its connection first. */
const REDIS_COMMANDS = new Set(['inspect', 'reset', 'rate']);

/** The store, the parameter source and (for a deployed Redis, or a command that needs it) the Redis client. */
async function openContext(command: string, values: CliValues, io: CliOutput): Promise<Context> {
  const settings = readSettings();
  const source = values.ssm
    ? // loaded when asked for: the SSM SDK is most of the admin function's cold start (~100-180 ms)
      new (await import('@platform/rate-limit/ssm')).SsmParameterSource()
    : new FileParameterSource(
        settings.parametersFile ?? new URL('../config/local-parameters.json', import.meta.url).pathname,
      );
  const store = createPolicyStore({ defaults: PLATFORM_POLICIES, source, prefix: settings.parameterPath });
  await store.refresh();
  const context: Context = { io, json: values.json === true, store, source, prefix: settings.parameterPath };
  if (settings.redisAuthSecretId) {
    // A deployed Redis requires credentials: read them (Secrets Manager) before the first connection.
    context.redis = createRedisClient(settings.redis);
    await authenticateFromSecret(context.redis, settings.redisAuthSecretId, secretReader(settings));
  }
  if (REDIS_COMMANDS.has(command)) {
    // An operator waits for the connection (TLS, a cluster's every master) rather than have the
    // first command degrade within a policy's 100 ms budget; bounded, then commands answer as they can.
    context.redis ??= createRedisClient(settings.redis);
    const connected = ioredisConnection(context.redis)
      .whenReady()
      .catch(() => {});
    await Promise.race([connected, new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
  }
  return context;
}

async function run(argv: string[], io: CliOutput): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, strict: true, options: CLI_OPTIONS });
  const [command, ...rest] = positionals;
  if (values.help || command === undefined || command === 'help') {
    io.stdout(`${USAGE}\n`);
    return command === undefined && !values.help ? EXIT.usage : EXIT.ok;
  }
  const handler = COMMANDS[command];
  if (!handler) throw new CliError(EXIT.usage, `unknown command "${command}"\n\n${USAGE}`);
  const context = await openContext(command, values, io);
  try {
    return await handler(context, rest, values);
  } finally {
    context.redis?.disconnect();
  }
}

function valueAt(config: unknown, path: string): unknown {
  return path
    .split('.')
    .reduce<unknown>((value, part) => (value as Record<string, unknown> | undefined)?.[part], config);
}

/** Runs one command line; never throws: a failure is its exit code and a line on stderr. */
export async function runCli(argv: string[], io: CliOutput): Promise<number> {
  try {
    return await run(argv, io);
  } catch (error) {
    io.stderr(`ratelimit: ${error instanceof Error ? error.message : String(error)}\n`);
    return exitCodeOf(error);
  }
}

function exitCodeOf(error: unknown): number {
  if (error instanceof CliError) return error.code;
  if (error instanceof MisconfiguredCheckError) return EXIT.usage;
  // before RateLimitError, which they extend
  if (error instanceof InvalidPolicyError || error instanceof InvalidCheckError) return EXIT.refused;
  if (error instanceof TypeError && (error as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS')) {
    return EXIT.usage;
  }
  if (error instanceof RateLimitError) return EXIT.usage;
  return EXIT.unavailable;
}
