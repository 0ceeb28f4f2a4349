/** `reset <policy> <key>`: forgets one key of a policy (its counter, budget holds and runtime rate), audited. */
import type { RedisClient } from '@platform/rate-limit';
import { counterKey } from '@platform/rate-limit/policy';
import { CliError, defineCommand, EXIT } from '../command.ts';
import { audit, limiterOf, out } from '../context.ts';
import { keyState, keysKeptFor, stateTable } from '../key-state.ts';
import { keyOf, scopeOf } from '../keys.ts';

export const reset = defineCommand({
  name: 'reset',
  usage: 'reset <policy> <key>',
  summary: ["forget a key's counter (unlock an account, clear a window)"],
  options: {},
  redis: true,
  async run(context, rest, values) {
    const [policy, given] = rest;
    if (!policy) throw new CliError(EXIT.usage, 'reset <policy> <key>');
    const key = keyOf(context, given, values);
    const scope = scopeOf(key, values);
    const before = await keyState(context, policy, key, scope);
    const compiled = limiterOf(context).policyFor(policy, key);
    const counter = counterKey(compiled, key, scope);
    await (context.redis as RedisClient).del(...keysKeptFor(compiled, counter));
    const after = await keyState(context, policy, key, scope);
    audit(context, 'reset', { policy, key, before, after });
    out(context, `reset ${policy} ${key}\n${stateTable(after)}`, { before, after });
    return EXIT.ok;
  },
});
