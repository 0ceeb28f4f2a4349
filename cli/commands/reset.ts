/** `reset <policy> <key>`: forgets one key of a policy (its counter, budget holds and runtime rate), audited. */
import { counterKey } from '@platform/rate-limit/policy';
import { CliError, defineCommand, EXIT } from '../command.ts';
import { audit, auditedWrite, knownPolicy, limiterOf, onStore, out } from '../context.ts';
import { decidedPerRegion, keyState, keysKeptFor, stateTable } from '../key-state.ts';
import { keyOf, scopeOf } from '../keys.ts';

export const reset = defineCommand({
  name: 'reset',
  writes: true,
  usage: 'reset <policy> <key>',
  summary: ["forget a key's counter (unlock an account, clear a window)"],
  options: {},
  redis: true,
  async run(context, rest, values) {
    const [policy, given] = rest;
    if (!policy) throw new CliError(EXIT.usage, 'reset <policy> <key>');
    knownPolicy(context, policy);
    const key = keyOf(context, given, values);
    const scope = scopeOf(key, values);
    const compiled = limiterOf(context).policyFor(policy, key);
    if (decidedPerRegion(context, compiled)) {
      // its state is this region's ring and the other regions' replicated copies, each written by its own region only
      throw new CliError(
        EXIT.refused,
        `${policy} is decided by each region on its own (regions: ${compiled.regions}): reset is not offered for it; its window clears by itself`,
      );
    }
    const before = await keyState(context, policy, key, scope);
    const counter = counterKey(compiled, key, scope);
    // bounded (onStore): a DEL whose reply does not come is audited (and notified) as outcome unknown, in time
    await auditedWrite(context, 'reset', { policy, key, before }, () =>
      onStore(context, compiled, (redis) => redis.del(...keysKeptFor(compiled, counter))),
    );
    const after = await keyState(context, policy, key, scope).catch((error: unknown) => {
      audit(context, 'reset', { policy, key, before, after: 'unread' }); // done; only its state after is not known
      throw error;
    });
    audit(context, 'reset', { policy, key, before, after });
    out(context, `reset ${policy} ${key}\n${stateTable(after)}`, { before, after });
    return EXIT.ok;
  },
});
