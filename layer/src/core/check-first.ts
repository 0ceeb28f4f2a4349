/**
 * The first of several limits that admits (lua/check_first.lua): a login
 * attempt with a device cookie is the device's own backoff, else (the device
 * revoked) the account's, decided in one round trip. Its reply is
 * lua/check.lua's layout, the admitting limit as the binding one.
 */

import { parseCheckReply } from '../lua/contract.ts';
import type { CompiledPolicy } from '../policy/policy.ts';
import { type Allowed, allowedBy, type Limited, type LimitStatus } from './decision.ts';

/** The decision: admitted by its binding limit (the first that admitted; only those tried are listed), or refused. */
export function parseFirstReply(policies: readonly CompiledPolicy[], reply: unknown): Allowed | Limited {
  const decision = parseCheckReply(policies, reply);
  if (decision.outcome !== 'allowed') return decision;
  const chosen = Array.isArray(reply) ? Number(reply[1]) : 0;
  const tried = decision.limits.slice(0, chosen);
  const binding = tried[chosen - 1] as LimitStatus | undefined;
  if (!binding) throw new TypeError(`unexpected check_first reply: ${JSON.stringify(reply)}`);
  return { ...allowedBy(tried), binding };
}
