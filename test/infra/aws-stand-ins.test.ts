/**
 * The AWS stand-ins of the synthesized app's test (test/support/aws-stand-ins.ts),
 * each proven with the service's own SDK client, found only through
 * `AWS_ENDPOINT_URL_<SERVICE>`, as the deployed functions find them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BedrockRuntimeClient, ConverseCommand } from '@aws-sdk/client-bedrock-runtime';
import {
  AdminInitiateAuthCommand,
  CognitoIdentityProviderClient,
  NotAuthorizedException,
} from '@aws-sdk/client-cognito-identity-provider';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetParameterCommand, GetParametersByPathCommand, ParameterNotFound, SSMClient } from '@aws-sdk/client-ssm';
import { type AwsStandIns, startAwsStandIns } from '../support/aws-stand-ins.ts';

let aws: AwsStandIns;
const saved = { ...process.env };
before(async () => {
  aws = await startAwsStandIns({
    authorize: (caller, action) => caller !== 'AKIDDENIED' || !action.startsWith('ssm:'),
    userPool: { id: 'eu-west-1_local', clientId: 'client', users: new Map([['alice@example.com', 'Correct-h0rse!']]) },
  });
  Object.assign(process.env, aws.endpointEnv, {
    AWS_REGION: 'eu-west-1',
    AWS_ACCESS_KEY_ID: 'AKIDTEST',
    AWS_SECRET_ACCESS_KEY: 'test',
  });
});
after(async () => {
  process.env = saved;
  await aws.close();
});

describe('The AWS stand-ins, through the SDK', () => {
  it('Secrets Manager: GetSecretValue answers the secret by its ARN', async () => {
    const arn = 'arn:aws:secretsmanager:eu-west-1:222222222222:secret:redis-auth';
    aws.state.secrets.set(arn, '{"password":"p"}');
    const answer = await new SecretsManagerClient({}).send(new GetSecretValueCommand({ SecretId: arn }));
    assert.equal(answer.SecretString, '{"password":"p"}');
  });

  it('SSM: GetParametersByPath pages through a path, GetParameter answers one or ParameterNotFound', async () => {
    for (let i = 0; i < 12; i++) aws.state.parameters.set(`/p/defaults/x${i}`, { value: String(i), type: 'String' });
    aws.state.parameters.set('/p/other', { value: 'no', type: 'String' });
    const ssm = new SSMClient({});
    const names: string[] = [];
    let next: string | undefined;
    do {
      const page = await ssm.send(
        new GetParametersByPathCommand({ Path: '/p/defaults', Recursive: true, NextToken: next }),
      );
      names.push(...(page.Parameters ?? []).map((p) => p.Name as string));
      next = page.NextToken;
    } while (next);
    assert.equal(names.length, 12);
    assert.equal((await ssm.send(new GetParameterCommand({ Name: '/p/other' }))).Parameter?.Value, 'no');
    await assert.rejects(ssm.send(new GetParameterCommand({ Name: '/p/none' })), ParameterNotFound);
  });

  it("refuses a caller its authorizer denies, as AWS's AccessDeniedException", async () => {
    const denied = new SSMClient({ credentials: { accessKeyId: 'AKIDDENIED', secretAccessKey: 'x' } });
    await assert.rejects(denied.send(new GetParameterCommand({ Name: '/p/other' })), {
      name: 'AccessDeniedException',
    });
  });

  it('SQS: SendMessage over the JSON protocol, to the queue URL, with the checksums the SDK verifies', async () => {
    const url = 'https://sqs.eu-west-1.amazonaws.com/222222222222/events';
    aws.state.queues.set(url, []);
    // as functions/shared/sink.ts makes it: the endpoint the SDK resolves, not the queue URL's host
    const answer = await new SQSClient({ useQueueUrlAsEndpoint: false }).send(
      new SendMessageCommand({
        QueueUrl: url,
        MessageBody: '{"source":"slack"}',
        MessageAttributes: { source: { DataType: 'String', StringValue: 'slack' } },
      }),
    );
    assert.ok(answer.MessageId);
    assert.deepEqual(
      aws.state.queues.get(url)?.map((m) => m.body),
      ['{"source":"slack"}'],
      'the endpoint variable wins over the queue URL host',
    );
  });

  it('Cognito: AdminInitiateAuth answers tokens for the right password, NotAuthorized otherwise', async () => {
    const cognito = new CognitoIdentityProviderClient({});
    const auth = (USERNAME: string, PASSWORD: string) =>
      cognito.send(
        new AdminInitiateAuthCommand({
          UserPoolId: 'eu-west-1_local',
          ClientId: 'client',
          AuthFlow: 'ADMIN_USER_PASSWORD_AUTH',
          AuthParameters: { USERNAME, PASSWORD },
        }),
      );
    const ok = await auth('alice@example.com', 'Correct-h0rse!');
    assert.ok(ok.AuthenticationResult?.IdToken && ok.AuthenticationResult.AccessToken);
    assert.equal(ok.AuthenticationResult.ExpiresIn, 3600);
    await assert.rejects(auth('alice@example.com', 'wrong'), NotAuthorizedException);
    await assert.rejects(auth('nobody@example.com', 'wrong'), NotAuthorizedException);
  });

  it('Bedrock Runtime: Converse answers with the model’s text and usage', async () => {
    aws.state.models.set('amazon.nova-micro-v1:0', (text) => ({
      text: `echo ${text}`,
      inputTokens: 3,
      outputTokens: 2,
    }));
    const answer = await new BedrockRuntimeClient({}).send(
      new ConverseCommand({
        modelId: 'amazon.nova-micro-v1:0',
        messages: [{ role: 'user', content: [{ text: 'hi' }] }],
        inferenceConfig: { maxTokens: 10 },
      }),
    );
    assert.equal(answer.output?.message?.content?.[0]?.text, 'echo hi');
    assert.deepEqual(answer.usage, { inputTokens: 3, outputTokens: 2, totalTokens: 5 });
    await assert.rejects(
      new BedrockRuntimeClient({}).send(new ConverseCommand({ modelId: 'not.a-model', messages: [] })),
      { name: 'ValidationException' },
    );
  });
});
