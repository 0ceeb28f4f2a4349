/**
 * What a command of `npx ratelimit` is (its spec: name, usage, its own
 * options, whether it talks to Redis, and its run), the options every
 * command takes, the exit codes and the one error a command throws to end
 * with one. Each command is one module of cli/commands/ exporting its spec;
 * cli/commands.ts lists them and builds the usage from them.
 */
import type { ParseArgsOptionsConfig } from 'node:util';
import { parseDuration } from '@platform/rate-limit/policy';
import type { Context } from './context.ts';

export const EXIT = { ok: 0, unavailable: 1, usage: 2, refused: 3 } as const;

/** A command's failure: its exit code and the line written to stderr. */
export class CliError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

/** Redis did not decide (down, slow, refusing): exit 1, and the message says which Redis (commands.ts). */
export class RedisUnavailableError extends CliError {
  /** Which of a multi-region stage's stores did not answer (a one-store stage: 'regional'). */
  readonly store: 'home' | 'regional';
  /** Why (the layer's DegradedReason: timeout, unavailable, out-of-memory, …). */
  readonly reason: string;
  constructor(reason: string, store: 'home' | 'regional' = 'regional') {
    super(EXIT.unavailable, `Redis could not answer (${reason})`);
    this.store = store;
    this.reason = reason;
  }
}

/** The options every command takes, each with its line of the usage. */
export const SHARED_OPTIONS = {
  email: { type: 'string', help: '--email <address>   the key is this email, hashed with the pepper as login does' },
  'api-key': {
    type: 'string',
    help: '--api-key <key>     the key is this API key (rk_…), hashed with the pepper as the API does',
  },
  scope: { type: 'string', help: '--scope <id>        the hash tag of a grouped policy (a workspace, a bot)' },
  ssm: {
    type: 'boolean',
    help: '--ssm               parameters from SSM (RATE_LIMIT_PARAMETER_PATH), not the local file',
  },
  json: { type: 'boolean', help: '--json              machine-readable output' },
  help: { type: 'boolean', short: 'h', help: '-h, --help          this help' },
} as const;

/** The values parseArgs gives for a set of options (none is `multiple`). */
export type ValuesOf<O extends ParseArgsOptionsConfig> = {
  readonly [K in keyof O]?: O[K]['type'] extends 'boolean' ? boolean : string;
};

export type SharedValues = ValuesOf<typeof SHARED_OPTIONS>;

export interface CommandSpec<O extends ParseArgsOptionsConfig = ParseArgsOptionsConfig> {
  readonly name: string;
  /** Its synopsis in the usage, e.g. `inspect <policy> <key>`. */
  readonly usage: string;
  /** What it does: the usage's lines beside (and under) the synopsis. */
  readonly summary: readonly string[];
  /** The options of its own (given in its synopsis). */
  readonly options: O;
  /** It talks to Redis, so the run waits for the connection first. */
  readonly redis?: boolean;
  /** It writes (and audits what it wrote): the admin function must be able to announce it before it runs. */
  readonly writes?: boolean;
  run(context: Context, rest: readonly string[], values: SharedValues & ValuesOf<O>): Promise<number>;
}

/** A spec with its options' types checked against its run (the registry holds them erased). */
export const defineCommand = <const O extends ParseArgsOptionsConfig>(spec: CommandSpec<O>): CommandSpec =>
  spec as unknown as CommandSpec;

/**
 * The message for a word that names nothing the CLI knows (a command, a
 * policy, an option): what it could have been, never the word itself. A word
 * out of place is often a key, an API key or an email (`inspect rk_… api-key`,
 * its arguments swapped), and the admin function logs every message the CLI
 * writes: repeated here, it would be in CloudWatch.
 */
export function unknownName(kind: string, known: readonly string[]): string {
  return `unknown ${kind} (not one of ${known.join(', ')}; what was given is not repeated: a word out of place may be a key or a secret)`;
}

/** A duration flag's value (`30s`, `8h`, `1.5m`) in ms; undefined when it is not one. */
export function durationFlag(text: string): number | undefined {
  return parseDuration(text.replace(/^(\d+(?:\.\d+)?)(ms|s|m|h)$/, '$1 $2'));
}
