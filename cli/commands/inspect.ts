/** `inspect <policy> <key>`: where one key of a policy stands, without debiting it. */
import { CliError, defineCommand, EXIT } from '../command.ts';
import { knownPolicy, out } from '../context.ts';
import { keyState, stateTable } from '../key-state.ts';
import { keyOf, scopeOf } from '../keys.ts';

export const inspect = defineCommand({
  name: 'inspect',
  usage: 'inspect <policy> <key>',
  summary: ["a key's live state, debiting nothing"],
  options: {},
  redis: true,
  async run(context, rest, values) {
    const [policy, given] = rest;
    if (!policy) throw new CliError(EXIT.usage, 'inspect <policy> <key>');
    knownPolicy(context, policy);
    const key = keyOf(context, given, values);
    const state = await keyState(context, policy, key, scopeOf(key, values));
    out(context, stateTable(state), state);
    return EXIT.ok;
  },
});
