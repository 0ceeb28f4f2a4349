/** `npx ratelimit` as its user runs it: a fresh process, the environment given, its exit code and output. */
import { execFile } from 'node:child_process';

const CLI = new URL('../../cli/ratelimit.ts', import.meta.url).pathname;

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export function runRatelimit(args: readonly string[], env: NodeJS.ProcessEnv): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
  });
}
