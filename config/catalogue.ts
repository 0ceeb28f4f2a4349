/**
 * The platform's policy catalogue as shipped: config/policies.json, one policy
 * per row of SPEC §4. It belongs to the platform, not to the layer: the
 * consumers and the CLI hand it to `createPolicyStore` as the last-resort
 * defaults, the CDK app writes one SSM parameter per entry, and each function
 * bundle embeds it (the layer itself ships no policy).
 */
import policies from './policies.json' with { type: 'json' };

export const PLATFORM_POLICIES: Readonly<Record<string, unknown>> = policies;
