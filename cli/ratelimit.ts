#!/usr/bin/env node
/**
 * `npx ratelimit <command>` (cli/commands.ts has the commands, and the admin
 * function runs the same against a deployed stage: with RATE_LIMIT_ADMIN_URL
 * set, the command is sent there signed, cli/remote.ts).
 */
import { runCli } from './commands.ts';
import { runRemote } from './remote.ts';

const io = {
  stdout: (text: string) => process.stdout.write(text),
  stderr: (text: string) => process.stderr.write(text),
};
const adminUrl = process.env.RATE_LIMIT_ADMIN_URL;
process.exitCode = adminUrl
  ? await runRemote(adminUrl, process.argv.slice(2), io)
  : await runCli(process.argv.slice(2), io);
