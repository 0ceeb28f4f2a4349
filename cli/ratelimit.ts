#!/usr/bin/env node
/**
 * `npx ratelimit <command>` (cli/commands.ts has the commands, and the admin
 * function runs the same against a deployed stage).
 */
import { runCli } from './commands.ts';

process.exitCode = await runCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
});
