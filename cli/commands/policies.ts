/** `policies [<key>]`: every policy in force, each field with where its value comes from (optionally for one key). */
import { defineCommand, EXIT } from '../command.ts';
import { out } from '../context.ts';
import { keyOf } from '../keys.ts';

function valueAt(config: unknown, path: string): unknown {
  return path
    .split('.')
    .reduce<unknown>((value, part) => (value as Record<string, unknown> | undefined)?.[part], config);
}

export const policies = defineCommand({
  name: 'policies',
  usage: 'policies [<key>]',
  summary: ['every policy in force, and where each value came from'],
  options: {},
  async run(context, rest, values) {
    const key =
      rest[0] === undefined && !values.email && !values['api-key'] ? undefined : keyOf(context, rest[0], values);
    const names = context.store.policyNames();
    const all = Object.fromEntries(names.map((name) => [name, context.store.explain(name, key)]));
    const human = names
      .map((name) => {
        const sources = all[name]?.sources ?? {};
        // the widest field name sets the column (adaptive.decreaseFactor is 23 characters)
        const width = Math.max(22, ...Object.keys(sources).map((field) => field.length + 1));
        const lines = Object.entries(sources).map(
          ([field, from]) =>
            `  ${field.padEnd(width)} ${JSON.stringify(valueAt(all[name]?.config, field)).padEnd(24)} ${from}`,
        );
        const expires = Object.entries(all[name]?.expires ?? {}).map(([layer, at]) => `  ${layer} ends ${at}`);
        return [`${name}${key ? ` (key ${key})` : ''}`, ...lines, ...expires].join('\n');
      })
      .join('\n\n');
    out(context, human, all);
    return EXIT.ok;
  },
});
