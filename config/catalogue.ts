/**
 * The platform's policy catalogue as shipped: config/policies.json, one policy
 * per limit the platform enforces (docs/design.md, "The limits"). It belongs
 * to the platform, not to the layer: the consumers and the CLI hand it to
 * `createPolicyStore` as the last-resort defaults, the CDK app writes one SSM
 * parameter per entry, and each function bundle embeds it (the layer itself
 * ships no policy).
 */
import policies from './policies.json' with { type: 'json' };

/** A policy of the catalogue: the route table, the handlers and the infra name policies by this type, so a typo does not compile. */
export type PolicyName = keyof typeof policies;

export const PLATFORM_POLICIES: Readonly<Record<string, unknown>> = policies;

export const POLICY_NAMES = Object.keys(policies) as PolicyName[];

export function isPolicyName(name: string): name is PolicyName {
  return Object.hasOwn(policies, name);
}
