/**
 * The API roles and the policy of each: an API key's role (in the key
 * registry) picks its token bucket. A key whose role is not listed gets the
 * default role's. Per-key overrides (SSM) beat the role.
 */
import type { PolicyName } from './catalogue.ts';

export const API_ROLES = {
  standard: 'api-key',
  partner: 'api-partner',
} as const satisfies Record<string, PolicyName>;

export type ApiRole = keyof typeof API_ROLES;

export const DEFAULT_API_ROLE: ApiRole = 'standard';

/** The policy of a role as the registry spells it; an unknown role gets the default role's. */
export function rolePolicy(role: string): PolicyName {
  return Object.hasOwn(API_ROLES, role) ? API_ROLES[role as ApiRole] : API_ROLES[DEFAULT_API_ROLE];
}
