/**
 * The API roles and the limits of each: an API key's role (in the key
 * registry) picks its token bucket (its `rate`, per minute) and, for a role
 * sold with one, its calendar `quota` (a monthly total), decided together,
 * all-or-nothing (one group, the key hash as scope). A key whose role is not
 * listed gets the default role's. Per-key overrides (SSM) beat the role.
 */
import type { PolicyName } from './catalogue.ts';

/** What limits a role: its bucket, and optionally its calendar quota. */
export interface RoleLimits {
  readonly rate: PolicyName;
  readonly quota?: PolicyName;
}

export const API_ROLES = {
  standard: { rate: 'api-key' },
  partner: { rate: 'api-partner', quota: 'api-partner-month' },
} as const satisfies Record<string, RoleLimits>;

export type ApiRole = keyof typeof API_ROLES;

export const DEFAULT_API_ROLE: ApiRole = 'standard';

/** The limits of a role as the registry spells it; an unknown role gets the default role's. */
export function roleLimits(role: string): RoleLimits {
  return Object.hasOwn(API_ROLES, role) ? API_ROLES[role as ApiRole] : API_ROLES[DEFAULT_API_ROLE];
}
