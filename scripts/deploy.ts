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
 *   template's reservations must fit in quota − 100.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { CloudAssembly } from 'aws-cdk-lib/cx-api';
import { createPlatformApp } from '../infra/app.ts';

/** Lambda's floor of unreserved concurrency (SPEC §9; a quota at or under it reserves nothing). */
export const UNRESERVED_MINIMUM = 100;

export const APPROVAL_POLICIES = ['never', 'broadening', 'any-change'] as const;
export type ApprovalPolicy = (typeof APPROVAL_POLICIES)[number];

/** What the pre-flight asks AWS: two read-only calls, behind this interface so tests mock the SDK. */
export interface AccountProbe {
  /** The credentials' account and principal (STS GetCallerIdentity). */
  callerIdentity(): Promise<{ readonly account: string; readonly arn: string }>;
  /** The region the credentials' SDK configuration resolves to (AWS_REGION, the profile). */
  region(): Promise<string>;
  /** The account's concurrency quota and what is unreserved now (Lambda GetAccountSettings). */
  concurrency(): Promise<{ readonly quota: number; readonly unreserved: number }>;
}

export interface StageTarget {
  readonly stage: string;
  readonly account: string;
  readonly region: string;
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

/** Resolves when the credentials and the account can take this stage; otherwise a DeployRefusedError naming both sides. */
export async function preflight(target: StageTarget, reservedTotal: number, probe: AccountProbe): Promise<void> {
  const [identity, region] = await Promise.all([probe.callerIdentity(), probe.region()]);
  const file = `infra/stages/${target.stage}.json`;
  if (identity.account !== target.account) {
    throw new DeployRefusedError(
      `stage ${target.stage} deploys to account ${target.account} (${file}), but the credentials are for account ${identity.account} (${identity.arn})`,
    );
  }
  if (region !== target.region) {
    throw new DeployRefusedError(
      `stage ${target.stage} deploys to region ${target.region} (${file}), but the credentials' region is ${region} (AWS_REGION or the profile's)`,
    );
  }
  const { quota, unreserved } = await probe.concurrency();
  const reservable = Math.max(0, quota - UNRESERVED_MINIMUM);
  if (reservedTotal > reservable) {
    throw new DeployRefusedError(
      `stage ${target.stage} reserves ${reservedTotal} concurrent executions, but account ${target.account} can reserve ${reservable} (quota ${quota} − ${UNRESERVED_MINIMUM} Lambda keeps unreserved; ${unreserved} unreserved now): lower reservedConcurrency in ${file} or raise the quota (Service Quotas, L-B99A9384)`,
    );
  }
}

/** The probe over the AWS SDK (the credentials and region of the environment, as the CDK CLI uses them). */
export async function awsAccountProbe(): Promise<AccountProbe> {
  const [{ STSClient, GetCallerIdentityCommand }, { LambdaClient, GetAccountSettingsCommand }] = await Promise.all([
    import('@aws-sdk/client-sts'),
    import('@aws-sdk/client-lambda'),
  ]);
  const sts = new STSClient({});
  return {
    async callerIdentity() {
      const answer = await sts.send(new GetCallerIdentityCommand({}));
      return { account: answer.Account ?? '', arn: answer.Arn ?? '' };
    },
    region: () => sts.config.region(),
    async concurrency() {
      const answer = await new LambdaClient({ region: await sts.config.region() }).send(
        new GetAccountSettingsCommand({}),
      );
      return {
        quota: answer.AccountLimit?.ConcurrentExecutions ?? 0,
        unreserved: answer.AccountLimit?.UnreservedConcurrentExecutions ?? 0,
      };
    },
  };
}

/** Synthesizes the stage into `outdir` (cdk-nag and the deployed-environment check run here). */
export function synthesizeStage(
  stage: string,
  outdir: string,
  extra: Readonly<Record<string, string>> = {},
): { target: StageTarget; assembly: CloudAssembly } {
  const { app, context } = createPlatformApp({ context: { dist: 'dist', ...extra, stage }, outdir });
  const assembly = app.synth();
  return { target: { stage, account: context.account, region: context.region }, assembly };
}

function templatesOf(assembly: CloudAssembly): unknown[] {
  return assembly.stacks.map((stack) => JSON.parse(readFileSync(join(assembly.directory, stack.templateFile), 'utf8')));
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
    const reserved = reservedConcurrencyOf(templatesOf(assembly));
    await preflight(target, reserved.total, await awsAccountProbe());
    console.log(
      `pre-flight: account ${target.account}, region ${target.region}, ${reserved.total} reserved concurrent executions fit`,
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
