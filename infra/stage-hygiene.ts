/**
 * The stage file's hygiene fields (issue 28, point 5), read beside the rest of
 * the deploy context (infra/context.ts spreads these entries into its schema):
 * who owns the stage and pays for it (tags), what it may cost a month (a
 * budget), whether it is traced, and whether it owns the region's API
 * Gateway logging role. Each is a stage-file value (an object in the JSON
 * file) or `-c name=<JSON or text>`.
 */
import * as v from 'valibot';

/** X-Ray: `off` (nothing traced, no X-Ray cost) or `sampled` (a low fixed rate, infra/tracing.ts). */
export type TracingMode = 'off' | 'sampled';

export interface HygieneContext {
  /** Who owns the stage and which cost centre pays: tagged on every resource with the stage and service (infra/tags.ts). @default owner and costCentre 'unassigned' */
  readonly tags: { readonly owner: string; readonly costCentre: string };
  /** An AWS Budgets monthly cost budget for the stage's tagged resources (infra/budget.ts); absent, none. */
  readonly budget?: { readonly monthlyLimitUsd: number; readonly emails: readonly string[] };
  /** @default 'off' */
  readonly tracing: TracingMode;
  /**
   * Whether this stage sets the region's API Gateway account role (the
   * CloudWatch Logs role API Gateway writes execution logs with; one per
   * account and region). @default false (a shared account's owner sets it once)
   */
  readonly apiGatewayAccountRole: boolean;
}

/**
 * A JSON object given as a value (a stage file) or as text (`-c
 * tags='{"owner":"…"}'`, `-c reservedConcurrency='{"login":50}'`): every
 * object-valued stage field reads through it (here and infra/context.ts).
 */
export const objectOrJson = v.union([
  v.record(v.string(), v.unknown()),
  v.pipe(
    v.string(),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      try {
        return JSON.parse(dataset.value) as unknown;
      } catch {
        addIssue({ message: 'a JSON object' });
        return NEVER;
      }
    }),
  ),
]);

// Tag values every service accepts (CloudFormation, ECS, Budgets): 1–256 of letters, digits, spaces and _.:/=+-@
const tagValue = v.pipe(
  v.string(),
  v.regex(/^[\p{L}\p{N} _.:/=+\-@]{1,256}$/u, 'a tag value (letters, digits, _.:/=+-@)'),
);
const flag = v.pipe(
  v.union([v.boolean(), v.picklist(['true', 'false'])]),
  v.transform((value) => value === true || value === 'true'),
);

/** The hygiene entries of the deploy-context schema. */
export const HYGIENE_ENTRIES = {
  tags: v.optional(v.pipe(objectOrJson, v.strictObject({ owner: tagValue, costCentre: tagValue })), {
    owner: 'unassigned',
    costCentre: 'unassigned',
  }),
  budget: v.optional(
    v.pipe(
      objectOrJson,
      v.strictObject({
        monthlyLimitUsd: v.pipe(v.number('a number of US dollars'), v.minValue(1), v.maxValue(1_000_000)),
        // Budgets allows 10 subscribers per notification: the alarm topic and up to 9 addresses
        emails: v.optional(v.pipe(v.array(v.pipe(v.string(), v.email('an e-mail address'))), v.maxLength(9)), []),
      }),
    ),
  ),
  tracing: v.optional(v.picklist(['off', 'sampled']), 'off'),
  apiGatewayAccountRole: v.optional(flag, false),
};
