/**
 * `npm run deploy -- --stage <stage> [--require-approval never|broadening|any-change] [-c name=value …]`
 * and `npm run diff -- --stage <stage>`: synthesizes the stage's app into
 * cdk.out, runs the pre-flight against the credentials in use, and only then
 * hands that very assembly to `cdk deploy` (or `cdk diff --fail`). Nothing is
 * asked on a terminal: the approval policy is the flag's (docs/deploy.md,
 * "Approval policy").
 *
 * The pre-flight refuses, with the numbers, what CloudFormation would refuse
 * half-way through a create:
 * - credentials for another account or region than the stage file's (STS
 *   GetCallerIdentity, the SDK's resolved region): "prod is wherever the
 *   credentials point" no more;
 * - reserved concurrency past what the account can reserve (Lambda
 *   GetAccountSettings): Lambda keeps 100 of the quota unreserved, so the
 *   template's reservations must fit in quota − 100 (a two-region stage:
 *   in each region, whose quota is its own);
 * - an API stage that writes execution logs in a region with no API Gateway
 *   CloudWatch Logs role, when the assembly does not set one (API Gateway
 *   GetAccount): the stage's create would fail ("CloudWatch Logs role ARN
 *   must be set in account settings"), a fresh account's first deploy;
 * - and, before asking anything, an assembly holding a placeholder handler
 *   (infra/rebalancer.ts marks its template): never deployed.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { CloudAssembly } from 'aws-cdk-lib/cx-api';
import { createPlatformApp } from '../infra/app.ts';
import { PLACEHOLDER_METADATA } from '../infra/rebalancer.ts';

/** Lambda's floor of unreserved concurrency (SPEC §9; a quota at or under it reserves nothing). */
export const UNRESERVED_MINIMUM = 100;

export const APPROVAL_POLICIES = ['never', 'broadening', 'any-change'] as const;
export type ApprovalPolicy = (typeof APPROVAL_POLICIES)[number];

/** What the pre-flight asks AWS: read-only calls, behind this interface so tests mock the SDK. */
export interface AccountProbe {
  /** The credentials' account and principal (STS GetCallerIdentity). */
  callerIdentity(): Promise<{ readonly account: string; readonly arn: string }>;
  /** The region the credentials' SDK configuration resolves to (AWS_REGION, the profile). */
  region(): Promise<string>;
  /** The account's concurrency quota and what is unreserved now (Lambda GetAccountSettings), in `region` or the credentials'. */
  concurrency(region?: string): Promise<{ readonly quota: number; readonly unreserved: number }>;
  /** The region's API Gateway CloudWatch Logs role (API Gateway GetAccount), or undefined when none is set. */
  apiGatewayLoggingRole(region?: string): Promise<string | undefined>;
}

/** What the assembly asks of the account, beyond its identity: read from the templates. */
export interface StageNeeds {
  /** Reserved concurrency: the stage's total, or a two-region stage's by region (each quota is its own). */
  readonly reserved: number | Readonly<Record<string, number>>;
  /** The regions where an API stage writes execution logs and no template sets the account's role. */
  readonly executionLogsWithoutRole?: readonly string[];
}

export interface StageTarget {
  readonly stage: string;
  readonly account: string;
  /** The stage's region (a two-region stage: its anchor). */
  readonly region: string;
  /** A two-region stage's regions, anchor first: the credentials' region may be any of them. */
  readonly regions?: readonly string[];
}

export class DeployRefusedError extends Error {
  override readonly name = 'DeployRefusedError';
}

/** The reserved concurrency every function of the assembly's templates asks for, by logical id. */
export function reservedConcurrencyOf(templates: readonly unknown[]): {
  total: number;
  byFunction: Map<string, number>;
} {
  const byFunction = new Map<string, number>();
  for (const template of templates) {
    const resources = (
      template as { Resources?: Record<string, { Type: string; Properties?: Record<string, unknown> }> }
    ).Resources;
    for (const [id, resource] of Object.entries(resources ?? {})) {
      const reserved = resource.Properties?.ReservedConcurrentExecutions;
      if (resource.Type === 'AWS::Lambda::Function' && typeof reserved === 'number') byFunction.set(id, reserved);
    }
  }
  return { total: [...byFunction.values()].reduce((sum, n) => sum + n, 0), byFunction };
}

/**
 * The regions whose templates hold an API Gateway stage that writes
 * execution logs (a method's LoggingLevel other than OFF) and no
 * `AWS::ApiGateway::Account` (the stage's `apiGatewayAccountRole`): those
 * need the region's role set already.
 */
export function executionLogsWithoutRole(templates: readonly { region: string; template: unknown }[]): string[] {
  const resourcesOf = (template: unknown) =>
    Object.values(
      (template as { Resources?: Record<string, { Type: string; Properties?: Record<string, unknown> }> }).Resources ??
        {},
    );
  const logs = (resource: { Type: string; Properties?: Record<string, unknown> }) =>
    resource.Type === 'AWS::ApiGateway::Stage' &&
    ((resource.Properties?.MethodSettings ?? []) as { LoggingLevel?: unknown }[]).some(
      (method) => method.LoggingLevel !== undefined && method.LoggingLevel !== 'OFF',
    );
  const regions = [...new Set(templates.map((t) => t.region))];
  return regions.filter((region) => {
    const resources = templates.filter((t) => t.region === region).flatMap((t) => resourcesOf(t.template));
    return resources.some(logs) && !resources.some((resource) => resource.Type === 'AWS::ApiGateway::Account');
  });
}

/** The functions whose template says they are a placeholder (infra/rebalancer.ts), by template. */
export function placeholdersOf(templates: readonly unknown[]): string[] {
  return templates.flatMap(
    (template) =>
      ((template as { Metadata?: Record<string, unknown> }).Metadata?.[PLACEHOLDER_METADATA] as string[]) ?? [],
  );
}

/** A refusal when any template of the assembly would deploy a placeholder handler. */
export function refusePlaceholders(stage: string, templates: readonly unknown[]): void {
  const placeholders = placeholdersOf(templates);
  if (placeholders.length > 0) {
    throw new DeployRefusedError(
      `stage ${stage} would deploy placeholder handlers (${[...new Set(placeholders)].join(', ')}): build the real ones (functions/<id>/handler.ts) first`,
    );
  }
}

/**
 * Resolves when the credentials and the account can take this stage;
 * otherwise a DeployRefusedError naming both sides.
 */
export async function preflight(target: StageTarget, needs: StageNeeds, probe: AccountProbe): Promise<void> {
  const { reserved } = needs;
  const [identity, region] = await Promise.all([probe.callerIdentity(), probe.region()]);
  const file = `infra/stages/${target.stage}.json`;
  if (identity.account !== target.account) {
    throw new DeployRefusedError(
      `stage ${target.stage} deploys to account ${target.account} (${file}), but the credentials are for account ${identity.account} (${identity.arn})`,
    );
  }
  const regions = target.regions ?? [target.region];
  if (!regions.includes(region)) {
    throw new DeployRefusedError(
      `stage ${target.stage} deploys to region ${regions.join(' and ')} (${file}), but the credentials' region is ${region} (AWS_REGION or the profile's)`,
    );
  }
  const byRegion = typeof reserved === 'number' ? { [target.region]: reserved } : reserved;
  for (const [where, reservedTotal] of Object.entries(byRegion)) {
    const { quota, unreserved } = await probe.concurrency(target.regions ? where : undefined);
    const reservable = Math.max(0, quota - UNRESERVED_MINIMUM);
    if (reservedTotal > reservable) {
      const inRegion = target.regions ? ` in ${where}` : '';
      throw new DeployRefusedError(
        `stage ${target.stage} reserves ${reservedTotal} concurrent executions${inRegion}, but account ${target.account} can reserve ${reservable}${inRegion} (quota ${quota} − ${UNRESERVED_MINIMUM} Lambda keeps unreserved; ${unreserved} unreserved now): lower reservedConcurrency in ${file} or raise the quota (Service Quotas, L-B99A9384)`,
      );
    }
  }
  for (const where of needs.executionLogsWithoutRole ?? []) {
    if ((await probe.apiGatewayLoggingRole(target.regions ? where : undefined)) !== undefined) continue;
    throw new DeployRefusedError(
      `stage ${target.stage}'s API writes execution logs in ${where}, but account ${target.account} has no API Gateway CloudWatch Logs role there (GetAccount: no cloudwatchRoleArn), so the stage's create would fail: set the role once for the region (aws apigateway update-account; docs/deploy.md, "First deploy into a fresh account") or set "apiGatewayAccountRole": true in ${file}`,
    );
  }
}

/** The probe over the AWS SDK (the credentials and region of the environment, as the CDK CLI uses them). */
export async function awsAccountProbe(): Promise<AccountProbe> {
  const [
    { STSClient, GetCallerIdentityCommand },
    { LambdaClient, GetAccountSettingsCommand },
    { APIGatewayClient, GetAccountCommand },
  ] = await Promise.all([
    import('@aws-sdk/client-sts'),
    import('@aws-sdk/client-lambda'),
    import('@aws-sdk/client-api-gateway'),
  ]);
  const sts = new STSClient({});
  return {
    async callerIdentity() {
      const answer = await sts.send(new GetCallerIdentityCommand({}));
      return { account: answer.Account ?? '', arn: answer.Arn ?? '' };
    },
    region: () => sts.config.region(),
    async concurrency(region?: string) {
      const answer = await new LambdaClient({ region: region ?? (await sts.config.region()) }).send(
        new GetAccountSettingsCommand({}),
      );
      return {
        quota: answer.AccountLimit?.ConcurrentExecutions ?? 0,
        unreserved: answer.AccountLimit?.UnreservedConcurrentExecutions ?? 0,
      };
    },
    async apiGatewayLoggingRole(region?: string) {
      const answer = await new APIGatewayClient({ region: region ?? (await sts.config.region()) }).send(
        new GetAccountCommand({}),
      );
      return answer.cloudwatchRoleArn || undefined;
    },
  };
}

/** Synthesizes the stage into `outdir` (cdk-nag and the deployed-environment check run here). */
export function synthesizeStage(
  stage: string,
  outdir: string,
  extra: Readonly<Record<string, string>> = {},
): { target: StageTarget; assembly: CloudAssembly } {
  const { app, context, multiRegion } = createPlatformApp({ context: { dist: 'dist', ...extra, stage }, outdir });
  const assembly = app.synth();
  const regions = multiRegion ? { regions: multiRegion.regions.map((place) => place.region) } : {};
  return { target: { stage, account: context.account, region: context.region, ...regions }, assembly };
}

/** Each stack's template with its region. */
function templatesOf(assembly: CloudAssembly): { region: string; template: unknown }[] {
  return assembly.stacks.map((stack) => ({
    region: stack.environment.region,
    template: JSON.parse(readFileSync(join(assembly.directory, stack.templateFile), 'utf8')),
  }));
}

/** The reserved concurrency to check: the stage's total, or a two-region stage's by region. */
function reservedToCheck(target: StageTarget, templates: { region: string; template: unknown }[]) {
  if (!target.regions) return reservedConcurrencyOf(templates.map((t) => t.template)).total;
  return Object.fromEntries(
    target.regions.map((region) => [
      region,
      reservedConcurrencyOf(templates.filter((t) => t.region === region).map((t) => t.template)).total,
    ]),
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      stage: { type: 'string' },
      'require-approval': { type: 'string', default: 'broadening' },
      diff: { type: 'boolean', default: false },
      // context values as cdk's -c gives them (alarmEmails=…); the stage file's win or must agree
      context: { type: 'string', short: 'c', multiple: true, default: [] },
    },
  });
  const extra = Object.fromEntries(
    (values.context ?? []).map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );
  const policy = values['require-approval'] as ApprovalPolicy;
  if (!values.stage || !(APPROVAL_POLICIES as readonly string[]).includes(policy)) {
    console.error(
      'usage: npm run deploy -- --stage <stage> [--require-approval never|broadening|any-change] [-c name=value …]\n       npm run diff -- --stage <stage> [-c name=value …]',
    );
    process.exit(2);
  }
  try {
    const { target, assembly } = synthesizeStage(values.stage, 'cdk.out', extra);
    const templates = templatesOf(assembly);
    if (!values.diff)
      refusePlaceholders(
        target.stage,
        templates.map((t) => t.template),
      );
    const reserved = reservedToCheck(target, templates);
    await preflight(
      target,
      { reserved, executionLogsWithoutRole: executionLogsWithoutRole(templates) },
      await awsAccountProbe(),
    );
    console.log(
      `pre-flight: account ${target.account}, region ${(target.regions ?? [target.region]).join(' and ')}, ${JSON.stringify(reserved)} reserved concurrent executions fit`,
    );
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    console.error(
      error instanceof DeployRefusedError
        ? `${error.name}: ${message}`
        : `pre-flight: no deploy, the stage or the credentials could not be read: ${message}`,
    );
    process.exit(1);
  }
  const cdk = values.diff
    ? ['cdk', 'diff', '--app', 'cdk.out', '--all', '--fail']
    : ['cdk', 'deploy', '--app', 'cdk.out', '--all', '--require-approval', policy, '--ci', '--progress', 'events'];
  const result = spawnSync('npx', ['--no-install', ...cdk], { stdio: 'inherit' });
  process.exit(result.status ?? 1);
}
