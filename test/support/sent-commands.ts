/**
 * The Redis commands TypeScript sends outside a Lua script, found by the type
 * checker rather than by a receiver's name: every call of a method ioredis
 * declares as a command (its RedisCommander: one method per command, and a
 * `…Buffer` twin), on whatever the client is called (`redis`, `client`,
 * `this.#redis`, a pipeline), and every `new Command(name, …)` of
 * ioredis's, by its name's literal type. A call through a project's own interface (the
 * CLI's StateReader) is found where that interface is wired to the client.
 */
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const ROOT = new URL('../../', import.meta.url).pathname;
const COMMANDER = /[\\/]node_modules[\\/]ioredis[\\/]built[\\/]utils[\\/]RedisCommander\.d\.ts$/;
const COMMAND_CLASS = /[\\/]node_modules[\\/]ioredis[\\/]built[\\/]Command\.d\.ts$/;

export interface SentCommand {
  /** The command, lower case (`zcount`); `call` names its own (the first argument, when a literal). */
  readonly command: string;
  /** The first argument when it is a string literal, lower case: a container's subcommand (`script load`). */
  readonly subcommand?: string;
  /** file:line, from the repository's root. */
  readonly at: string;
}

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.endsWith('.test.ts') && !f.includes('node_modules'))
    .map((f) => join(ROOT, dir, f));
}

function literal(node: ts.Expression | undefined): string | undefined {
  return node && (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node))
    ? node.text.toLowerCase()
    : undefined;
}

/** Every command the TypeScript under `dirs` (from the repository's root) sends on an ioredis client. */
export function commandsSentFrom(dirs: readonly string[]): SentCommand[] {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  if (!config) throw new Error('tsconfig.json unreadable');
  const files = dirs.flatMap(sources);
  const program = ts.createProgram(files, config.options);
  const checker = program.getTypeChecker();
  const sent: SentCommand[] = [];
  for (const file of files) {
    const source = program.getSourceFile(file);
    if (!source) throw new Error(`${file} not compiled`);
    const visit = (node: ts.Node): void => {
      if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
        const declarations = checker.getSymbolAtLocation(node.expression.name)?.declarations ?? [];
        const name = node.expression.name.text.replace(/Buffer$/, '');
        // a pipeline's exec sends what it queued; a transaction's EXEC comes with its MULTI, counted as `multi`
        if (name !== 'exec' && declarations.some((d) => COMMANDER.test(d.getSourceFile().fileName))) {
          const [first, second] = node.arguments;
          const generic = name === 'call';
          const command = generic ? (literal(first) ?? 'call(a command named at run time)') : name;
          const subcommand = literal(generic ? second : first);
          const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
          const at = `${relative(ROOT, file)}:${line + 1}`;
          sent.push(subcommand === undefined ? { command, at } : { command, subcommand, at });
        }
      }
      // a command built and handed to sendCommand (the limiter's checks keep theirs): `new Command(name, …)`,
      // its name a literal or a union of literals (each one a command it may send)
      if (ts.isNewExpression(node)) {
        const named = checker.getSymbolAtLocation(node.expression);
        const symbol = named && named.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(named) : named;
        if ((symbol?.declarations ?? []).some((d) => COMMAND_CLASS.test(d.getSourceFile().fileName))) {
          const [first] = node.arguments ?? [];
          const type = first && checker.getTypeAtLocation(first);
          const names = type
            ? (type.isUnion() ? type.types : [type]).map((t) => (t.isStringLiteral() ? t.value : undefined))
            : [];
          const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
          const at = `${relative(ROOT, file)}:${line + 1}`;
          for (const name of names.length > 0 ? names : [undefined])
            sent.push({ command: name?.toLowerCase() ?? 'new Command(a name known at run time)', at });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return sent;
}
