/**
 * The deploy pre-flight (scripts/deploy.ts): the SDK calls it makes, mocked
 * with aws-sdk-client-mock, and the refusals it gives before CloudFormation
 * would fail a create half-way.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { APIGatewayClient, GetAccountCommand } from '@aws-sdk/client-api-gateway';
import { GetAccountSettingsCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { GetCallerIdentityCommand, STSClient } from '@aws-sdk/client-sts';
import { mockClient } from 'aws-sdk-client-mock';
import {
  type AccountProbe,
  awsAccountProbe,
  DeployRefusedError,
  executionLogsWithoutRole,
  preflight,
  reservedConcurrencyOf,
} from '../../scripts/deploy.ts';

const sts = mockClient(STSClient);
const lambda = mockClient(LambdaClient);
const apiGateway = mockClient(APIGatewayClient);
const region = process.env.AWS_REGION;
afterEach(() => {
  sts.reset();
  lambda.reset();
  apiGateway.reset();
  if (region === undefined) delete process.env.AWS_REGION;
  else process.env.AWS_REGION = region;
});

const prod = { stage: 'prod', account: '222222222222', region: 'eu-west-1' };

/** The SDK probe, with the credentials' account and region and the account's quota as AWS would answer. */
async function probeOf(answers: { account: string; region: string; quota: number; unreserved?: number }) {
  process.env.AWS_REGION = answers.region;
  sts.on(GetCallerIdentityCommand).resolves({
    Account: answers.account,
    Arn: `arn:aws:iam::${answers.account}:role/deployer`,
    UserId: 'AROA',
  });
  lambda.on(GetAccountSettingsCommand).resolves({
    AccountLimit: {
      ConcurrentExecutions: answers.quota,
      UnreservedConcurrentExecutions: answers.unreserved ?? answers.quota,
    },
  });
  return awsAccountProbe();
}

describe('Function: preflight', () => {
  it('lets a stage through whose reservations fit in quota − 100, in its own account and region', async () => {
    const probe = await probeOf({ account: '222222222222', region: 'eu-west-1', quota: 1000 });
    await preflight(prod, { reserved: 257 }, probe);
    assert.equal(sts.commandCalls(GetCallerIdentityCommand).length, 1);
    assert.equal(lambda.commandCalls(GetAccountSettingsCommand).length, 1);
  });

  it("refuses a new account's quota with the numbers (GetAccountSettings answers 50)", async () => {
    const probe = await probeOf({ account: '222222222222', region: 'eu-west-1', quota: 50 });
    await assert.rejects(preflight(prod, { reserved: 257 }, probe), {
      name: 'DeployRefusedError',
      message:
        'stage prod reserves 257 concurrent executions, but account 222222222222 can reserve 0 (quota 50 − 100 Lambda keeps unreserved; 50 unreserved now): lower reservedConcurrency in infra/stages/prod.json or raise the quota (Service Quotas, L-B99A9384)',
    });
  });

  it('refuses one execution past the line, and takes exactly quota − 100', async () => {
    const probe = await probeOf({ account: '222222222222', region: 'eu-west-1', quota: 357 });
    await preflight(prod, { reserved: 257 }, probe);
    await assert.rejects(
      preflight(prod, { reserved: 258 }, probe),
      /reserves 258 concurrent executions, but .* can reserve 257/,
    );
  });

  it('lets a stage without reservations deploy into a quota of 10', async () => {
    const probe = await probeOf({ account: '111111111111', region: 'eu-west-1', quota: 10 });
    await preflight({ stage: 'dev', account: '111111111111', region: 'eu-west-1' }, { reserved: 0 }, probe);
  });

  it('refuses credentials for another account, naming both, before asking Lambda anything', async () => {
    const probe = await probeOf({ account: '333333333333', region: 'eu-west-1', quota: 1000 });
    await assert.rejects(preflight(prod, { reserved: 0 }, probe), {
      message:
        'stage prod deploys to account 222222222222 (infra/stages/prod.json), but the credentials are for account 333333333333 (arn:aws:iam::333333333333:role/deployer)',
    });
    assert.equal(lambda.commandCalls(GetAccountSettingsCommand).length, 0);
  });

  it("refuses the credentials' other region, naming both", async () => {
    const probe = await probeOf({ account: '222222222222', region: 'us-east-1', quota: 1000 });
    await assert.rejects(preflight(prod, { reserved: 0 }, probe), {
      message:
        "stage prod deploys to region eu-west-1 (infra/stages/prod.json), but the credentials' region is us-east-1 (AWS_REGION or the profile's)",
    });
  });

  it('passes an STS failure on as it is (no deploy on credentials it could not read)', async () => {
    process.env.AWS_REGION = 'eu-west-1';
    sts
      .on(GetCallerIdentityCommand)
      .rejects(new Error('ExpiredToken: the security token included in the request is expired'));
    await assert.rejects(preflight(prod, { reserved: 0 }, await awsAccountProbe()), /ExpiredToken/);
  });

  it('is a DeployRefusedError, a typed error', async () => {
    const probe: AccountProbe = {
      callerIdentity: async () => ({ account: '222222222222', arn: 'arn' }),
      region: async () => 'eu-west-1',
      concurrency: async () => ({ quota: 10, unreserved: 10 }),
      apiGatewayLoggingRole: async () => undefined,
    };
    await assert.rejects(preflight(prod, { reserved: 1 }, probe), DeployRefusedError);
  });
});

describe('Function: preflight, the API Gateway logging role', () => {
  const needs = { reserved: 0, executionLogsWithoutRole: ['eu-west-1'] };

  it("refuses a stage whose API logs execution in a region without the account's role (a fresh account)", async () => {
    const probe = await probeOf({ account: '222222222222', region: 'eu-west-1', quota: 1000 });
    apiGateway.on(GetAccountCommand).resolves({ throttleSettings: { rateLimit: 10_000, burstLimit: 5_000 } });
    await assert.rejects(preflight(prod, needs, probe), {
      name: 'DeployRefusedError',
      message:
        'stage prod\'s API writes execution logs in eu-west-1, but account 222222222222 has no API Gateway CloudWatch Logs role there (GetAccount: no cloudwatchRoleArn), so the stage\'s create would fail: set the role once for the region (aws apigateway update-account; docs/deploy.md, "First deploy into a fresh account") or set "apiGatewayAccountRole": true in infra/stages/prod.json',
    });
    assert.equal(apiGateway.commandCalls(GetAccountCommand).length, 1);
  });

  it('lets it through once the region has the role, and asks nothing when the stack sets it', async () => {
    const probe = await probeOf({ account: '222222222222', region: 'eu-west-1', quota: 1000 });
    apiGateway.on(GetAccountCommand).resolves({ cloudwatchRoleArn: 'arn:aws:iam::222222222222:role/apigw-logs' });
    await preflight(prod, needs, probe);
    await preflight(prod, { reserved: 0, executionLogsWithoutRole: [] }, probe);
    assert.equal(apiGateway.commandCalls(GetAccountCommand).length, 1);
  });

  it('passes a GetAccount failure on as it is (no deploy on an account it could not read)', async () => {
    const probe = await probeOf({ account: '222222222222', region: 'eu-west-1', quota: 1000 });
    apiGateway.on(GetAccountCommand).rejects(new Error('AccessDeniedException: not authorized to GET /account'));
    await assert.rejects(preflight(prod, needs, probe), /AccessDeniedException/);
  });
});

describe('Function: executionLogsWithoutRole', () => {
  const stage = (level: string) => ({
    Type: 'AWS::ApiGateway::Stage',
    Properties: { MethodSettings: [{ HttpMethod: '*', ResourcePath: '/*', LoggingLevel: level }] },
  });
  const account = { Type: 'AWS::ApiGateway::Account', Properties: {} };

  it('names the regions whose API stage logs execution and whose templates set no account role', () => {
    const templates = [
      { region: 'eu-west-1', template: { Resources: { S: stage('ERROR') } } },
      { region: 'us-east-1', template: { Resources: { S: stage('INFO') } } },
      { region: 'us-east-1', template: { Resources: { A: account } } },
      { region: 'eu-central-1', template: { Resources: { S: stage('OFF') } } },
      { region: 'ap-south-1', template: {} },
    ];
    assert.deepEqual(executionLogsWithoutRole(templates), ['eu-west-1']);
  });
});

describe('Function: reservedConcurrencyOf', () => {
  it("sums the functions' ReservedConcurrentExecutions of every template, and nothing else", () => {
    const templates = [
      {
        Resources: {
          A: { Type: 'AWS::Lambda::Function', Properties: { ReservedConcurrentExecutions: 50 } },
          B: { Type: 'AWS::Lambda::Function', Properties: {} },
          C: { Type: 'AWS::SQS::Queue', Properties: { ReservedConcurrentExecutions: 7 } },
        },
      },
      { Resources: { D: { Type: 'AWS::Lambda::Function', Properties: { ReservedConcurrentExecutions: 5 } } } },
      {},
    ];
    const reserved = reservedConcurrencyOf(templates);
    assert.equal(reserved.total, 55);
    assert.deepEqual(
      [...reserved.byFunction],
      [
        ['A', 50],
        ['D', 5],
      ],
    );
  });
});
