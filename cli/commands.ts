/**
 * `npx ratelimit <command>`: what an operator needs at 3 a.m. without a deploy.
 * Each command is one module of cli/commands/ exporting its spec (name,
 * synopsis, options, run); the usage (`npx ratelimit --help`) is built from
 * the specs listed here, so it names every command.
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
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { InvalidCheckError, InvalidPolicyError, MisconfiguredCheckError, RateLimitError } from '@platform/rate-limit';
import { CliError, type CommandSpec, EXIT, RedisUnavailableError, SHARED_OPTIONS, unknownName } from './command.ts';
import { apiKey } from './commands/api-key.ts';
import { inspect } from './commands/inspect.ts';
import { override } from './commands/override.ts';
import { policies } from './commands/policies.ts';
import { rate } from './commands/rate.ts';
import { reset } from './commands/reset.ts';
import { top } from './commands/top.ts';
import { type CliOutput, openContext, redisWhere } from './context.ts';

export type { AuditRecord, CliOutput } from './context.ts';

/** Every command, in the usage's order. */
export const COMMANDS: readonly CommandSpec[] = [policies, inspect, reset, rate, override, top, apiKey];

/** The options parseArgs knows: the shared ones and every command's own. */
const OPTIONS: ParseArgsOptionsConfig = Object.assign(
  Object.fromEntries(
    Object.entries(SHARED_OPTIONS).map(([name, { help: _, ...option }]) => [
      name,
      option as ParseArgsOptionsConfig[string],
    ]),
  ),
  ...COMMANDS.map((command) => command.options),
);

/** The usage: each command's synopsis with its summary beside it (under it, when the synopsis is long). */
export function usage(): string {
  const COLUMN = 40;
  const commandLines = COMMANDS.flatMap(({ usage: synopsis, summary: [first = '', ...more] }) => {
    const head =
      synopsis.length < COLUMN - 1
        ? [`  ${synopsis.padEnd(COLUMN)}${first}`]
        : [`  ${synopsis}`, `${' '.repeat(COLUMN + 2)}${first}`];
    return [...head, ...more.map((line) => `${' '.repeat(COLUMN + 2)}${line}`)];
  });
  return [
    'usage: ratelimit <command> [options]',
    '',
    ...commandLines,
    '',
    'options:',
    ...Object.values(SHARED_OPTIONS).map((option) => `  ${option.help}`),
    '',
    'exit codes: 0 done, 1 Redis or parameters unavailable, 2 bad arguments, 3 refused (nothing written)',
  ].join('\n');
}

/**
 * The command line parsed; an option no command knows is a usage error that
 * names the options, not the word (parseArgs' own message repeats it, and a
 * word out of place may be a secret: cli/command.ts, unknownName).
 */
function parsed(argv: string[]) {
  try {
    return parseArgs({ args: argv, allowPositionals: true, strict: true, options: OPTIONS });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      const names = Object.entries(OPTIONS).map(([name, { short }]) => `--${name}${short ? ` (-${short})` : ''}`);
      throw new CliError(EXIT.usage, unknownName('option', names));
    }
    throw error;
  }
}

async function run(argv: string[], io: CliOutput): Promise<number> {
  const { values, positionals } = parsed(argv);
  const [name, ...rest] = positionals;
  if (values.help || name === undefined || name === 'help') {
    io.stdout(`${usage()}\n`);
    return name === undefined && !values.help ? EXIT.usage : EXIT.ok;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command)
    throw new CliError(
      EXIT.usage,
      `${unknownName(
        'command',
        COMMANDS.map((c) => c.name),
      )}\n\n${usage()}`,
    );
  const context = await openContext(
    { ssm: values.ssm === true, json: values.json === true, redis: command.redis === true },
    io,
  );
  try {
    return await command.run(context, rest, values as Parameters<CommandSpec['run']>[2]);
  } catch (error) {
    // say which Redis did not answer: the CLI may not be pointed where its user thinks
    if (error instanceof RedisUnavailableError) {
      throw new CliError(EXIT.unavailable, `${error.message}, Redis at ${redisWhere(process.env, error.store)}`);
    }
    throw error;
  } finally {
    context.redis?.disconnect();
    context.homeRedis?.disconnect();
  }
}

/**
 * Whether a command line names a command that writes (reset, rate,
 * override); false for a read, and for a line that names no command (it
 * runs nothing but its usage error).
 */
export function writesOf(argv: string[]): boolean {
  try {
    const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, strict: true, options: OPTIONS });
    // --help prints the usage and runs nothing
    return values.help !== true && COMMANDS.find((c) => c.name === positionals[0])?.writes === true;
  } catch {
    return false;
  }
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
