/**
 * The CLI is one module per command (cli/commands/<name>.ts, each exporting
 * its spec), and its usage is built from the specs: every module is listed,
 * and the usage names every command with its synopsis and the options every
 * command takes.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { SHARED_OPTIONS } from '../../cli/command.ts';
import { COMMANDS, runCli, usage, writesOf } from '../../cli/commands.ts';

const COMMAND_DIR = new URL('../../cli/commands/', import.meta.url);

function capture() {
  const written = { stdout: '', stderr: '' };
  const io = {
    stdout(text: string) {
      written.stdout += text;
    },
    stderr(text: string) {
      written.stderr += text;
    },
  };
  return { written, io };
}

describe('The CLI, one module per command (cli/commands/)', () => {
  it('marks as writes exactly the commands that audit a write (the admin function announces those first)', () => {
    for (const command of COMMANDS) {
      const source = readFileSync(new URL(`${command.name}.ts`, COMMAND_DIR), 'utf8');
      assert.equal(command.writes === true, /\baudit\(context/.test(source), command.name);
    }
    assert.deepEqual(
      COMMANDS.filter((c) => c.writes)
        .map((c) => c.name)
        .sort(),
      ['override', 'rate', 'reset'],
    );
    assert.equal(writesOf(['--ssm', '--json', 'reset', 'login-ip', 'k']), true, 'options before the name');
    assert.equal(writesOf(['--ssm', 'reset', '--help']), false, 'help runs nothing');
    assert.equal(writesOf(['--ssm', 'inspect', 'login-ip', 'k']), false);
    assert.equal(writesOf(['--ssm', '--bogus', 'reset']), false, 'a line that does not parse runs nothing');
  });

  it('lists every module of cli/commands/ and no command twice', async () => {
    const modules = readdirSync(COMMAND_DIR).filter((file) => file.endsWith('.ts'));
    const specs = await Promise.all(
      modules.map(async (file) => Object.values(await import(new URL(file, COMMAND_DIR).href))),
    );
    for (const [i, exported] of specs.entries()) {
      assert.ok(
        exported.some((spec) => COMMANDS.includes(spec as (typeof COMMANDS)[number])),
        `cli/commands/${modules[i]} exports a spec cli/commands.ts lists`,
      );
    }
    const names = COMMANDS.map((command) => command.name);
    assert.deepEqual([...new Set(names)], names);
    assert.equal(COMMANDS.length, modules.length);
  });

  it('names every command in the usage (top included), each with its synopsis and summary', () => {
    const text = usage();
    for (const command of COMMANDS) {
      assert.ok(text.includes(`  ${command.usage}`), `the usage gives ${command.name}'s synopsis`);
      for (const line of command.summary) assert.ok(text.includes(line), `the usage says what ${command.name} does`);
    }
    assert.match(text, /^ {2}top <policy> \[--since 1h\] +the keys a policy refused most/m);
    for (const option of Object.values(SHARED_OPTIONS)) assert.ok(text.includes(option.help));
  });

  it('prints that usage for --help (exit 0) and for no command (exit 2); an unknown command is a usage error', async () => {
    const help = capture();
    assert.equal(await runCli(['--help'], help.io), 0);
    assert.equal(help.written.stdout, `${usage()}\n`);
    const none = capture();
    assert.equal(await runCli([], none.io), 2);
    assert.equal(none.written.stdout, `${usage()}\n`);
    const unknown = capture();
    assert.equal(await runCli(['nope'], unknown.io), 2);
    assert.match(
      unknown.written.stderr,
      /^ratelimit: unknown command \(not one of policies, inspect, reset, rate, override, top, api-key; what was given is not repeated[^\n]*\)\n\nusage: ratelimit/,
    );
  });

  it('never repeats a word that names no command, policy or option, nor a text that is not JSON (it may be a secret)', async () => {
    // arguments out of place: an API key or an email where a name or the JSON goes
    const apiKey = 'rk_0123456789abcdefghijABCDEFGHIJ_-';
    const email = 'ann@corp.io';
    for (const [argv, code, says] of [
      [[apiKey, 'login-ip'], 2, /unknown command \(not one of policies, /],
      [[email], 2, /unknown command/],
      [['top', apiKey], 2, /unknown policy \(not one of [a-z0-9-]+(, [a-z0-9-]+)+; what was given is not repeated/],
      [['top', email], 2, /unknown policy/],
      [['override', email, '{"limit":1}'], 3, /unknown policy/],
      [['override', apiKey, '10.0.0.1', '{"limit":1}'], 3, /unknown policy/],
      [
        ['override', 'login-account', email],
        3,
        /not JSON: unexpected character at position 0 \(line 1, column 1\) of 11/,
      ],
      [['override', 'login-ip', `{"limit":${apiKey}}`], 3, /not JSON: unexpected character at position 9 /],
      [['override', 'login-ip', `["${email}"`], 3, /not JSON: it ends before its value is complete \(14 characters\)/],
      [['override', 'login-ip', '{"limit":1}', '--until', email], 2, /--until takes a real ISO 8601 time/],
      [['top', 'login-ip', `--${email}`], 2, /unknown option \(not one of --email, /],
      [['top', 'login-ip', `--email=${email}`, `--${apiKey}=1`], 2, /unknown option/],
    ] as const) {
      const run = capture();
      assert.equal(await runCli([...argv], run.io), code, `${argv.join(' ')}: ${run.written.stderr}`);
      for (const secret of [apiKey, email, 'rk_0123', 'ann@'])
        assert.ok(
          !run.written.stdout.includes(secret) && !run.written.stderr.includes(secret),
          `${argv.join(' ')}: ${secret} repeated in ${run.written.stderr.split('\n')[0]}`,
        );
      assert.match(run.written.stderr, says, argv.join(' '));
    }
  });

  it("takes a command's own option and refuses one no command knows (exit 2)", async () => {
    const bogus = capture();
    assert.equal(await runCli(['top', '--bogus'], bogus.io), 2);
    assert.match(
      bogus.written.stderr,
      /unknown option \(not one of --email, --api-key, --scope, --ssm, --json, --help \(-h\), /,
    );
    for (const option of ['--until', '--for', '--set', '--increase', '--decrease', '--pause', '--since'])
      assert.ok(bogus.written.stderr.includes(option), `the message names ${option}`);
    const badSince = capture();
    assert.equal(await runCli(['top', 'login-ip', '--since', 'soon'], badSince.io), 2);
    assert.match(badSince.written.stderr, /--since takes a duration such as 1h or 15m/);
  });
});
