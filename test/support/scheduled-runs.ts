/**
 * What a synthesized template's schedules leave to the runs they start
 * (infra/scheduled-run.ts): for each scheduled rule's Lambda target, the
 * alias it starts, the retries of EventBridge's delivery and of Lambda's
 * asynchronous invocation, and how long Lambda keeps a run it could not
 * start. `undefined` is the service's default (185 deliveries; two Lambda
 * retries; six hours).
 */
interface Resource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
}

export interface ScheduledRunRetries {
  /** The function's logical id in the template. */
  readonly function: string;
  /** The alias's name (the event-invoke config found is the one naming it). */
  readonly alias: unknown;
  readonly delivery: unknown;
  readonly invocation: unknown;
  readonly maxEventAgeSeconds: unknown;
}

const refOf = (value: unknown): string | undefined =>
  typeof value === 'object' && value !== null && 'Ref' in value ? String((value as { Ref: unknown }).Ref) : undefined;

/** A qualifier naming the alias: its name, or CDK's form, the name cut from the alias's ARN (its 8th field). */
const namesAlias = (qualifier: unknown, aliasId: string, name: unknown): boolean =>
  qualifier === name ||
  JSON.stringify(qualifier) === JSON.stringify({ 'Fn::Select': [7, { 'Fn::Split': [':', { Ref: aliasId }] }] });

export function scheduledRunRetries(template: { Resources: Record<string, Resource> }): ScheduledRunRetries[] {
  const resources = Object.entries(template.Resources);
  const rules = resources.filter(([, r]) => r.Type === 'AWS::Events::Rule' && r.Properties?.ScheduleExpression);
  return rules.flatMap(([ruleId, rule]) =>
    ((rule.Properties?.Targets ?? []) as { Arn: unknown; RetryPolicy?: { MaximumRetryAttempts?: unknown } }[]).map(
      (target) => {
        const aliasId = refOf(target.Arn) ?? '';
        const alias = template.Resources[aliasId];
        if (alias?.Type !== 'AWS::Lambda::Alias') throw new Error(`${ruleId} starts something other than an alias`);
        const fn = refOf(alias.Properties?.FunctionName) ?? '';
        const config = resources.find(
          ([, r]) =>
            r.Type === 'AWS::Lambda::EventInvokeConfig' &&
            refOf(r.Properties?.FunctionName) === fn &&
            namesAlias(r.Properties?.Qualifier, aliasId, alias.Properties?.Name),
        )?.[1];
        return {
          function: fn,
          alias: alias.Properties?.Name,
          delivery: target.RetryPolicy?.MaximumRetryAttempts,
          invocation: config?.Properties?.MaximumRetryAttempts,
          maxEventAgeSeconds: config?.Properties?.MaximumEventAgeInSeconds,
        };
      },
    ),
  );
}
