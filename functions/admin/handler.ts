/**
 * The operator's path to a deployed stage's Redis (which sits in isolated
 * subnets): a function invoked through IAM only — no route, no URL — that
 * runs the admin CLI's commands (cli/commands.ts) against the stage's store
 * and parameters, as `npx ratelimit` does locally:
 *
 *   aws lambda invoke --function-name ratelimit-prod-admin \
 *     --cli-binary-format raw-in-base64-out \
 *     --payload '{"argv":["inspect","login-ip","203.0.113.9"]}' out.json
 *
 * The answer is `{ exitCode, stdout, stderr }` (the audit lines of a write in
 * stderr, and in the function's log). Parameters are read from SSM
 * (`--ssm` is implied); overrides are written there.
 */
import * as v from 'valibot';
import { runCli } from '../../cli/commands.ts';

/** What an invocation may ask: a command line of a few short words (no shell, no files). */
const Invocation = v.object({
  argv: v.pipe(v.array(v.pipe(v.string(), v.maxLength(4096))), v.minLength(1), v.maxLength(16)),
});

export interface AdminAnswer {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

export async function handler(event: unknown, context?: { invokedFunctionArn?: string }): Promise<AdminAnswer> {
  const parsed = v.safeParse(Invocation, event);
  if (!parsed.success) {
    return { exitCode: 2, stdout: '', stderr: 'ratelimit: the payload must be {"argv": ["<command>", …]}\n' };
  }
  const argv = parsed.output.argv.includes('--ssm') ? parsed.output.argv : [...parsed.output.argv, '--ssm'];
  let stdout = '';
  let stderr = '';
  const exitCode = await runCli(argv, {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
      process.stderr.write(text); // the audit lines land in the function's log too
    },
    who: `lambda:${context?.invokedFunctionArn ?? 'admin'}`,
  });
  return { exitCode, stdout, stderr };
}
