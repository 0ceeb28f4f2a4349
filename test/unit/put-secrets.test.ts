import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import fc from 'fast-check';
import { InvalidSecretsError, parseSecrets, putSecrets } from '../../scripts/put-secrets.ts';

describe('npm run secrets:put', () => {
  const ssm = mockClient(SSMClient);
  beforeEach(() => ssm.reset());

  it('puts each secret as a SecureString under the stage path, with the data key', async () => {
    ssm.on(PutParameterCommand).resolves({ Version: 1 });
    const written = await putSecrets(
      new SSMClient({ region: 'eu-west-1' }),
      'prod',
      parseSecrets({ 'email-pepper': 'p'.repeat(32), 'telegram-bot-demo': 't'.repeat(40) }),
    );
    assert.deepEqual(written, [
      '/ratelimit/prod/secrets/login/email-pepper',
      '/ratelimit/prod/secrets/telegram/telegram-bot-demo',
    ]);
    const calls = ssm.commandCalls(PutParameterCommand).map((c) => c.args[0].input);
    assert.deepEqual(calls[0], {
      Name: '/ratelimit/prod/secrets/login/email-pepper',
      Value: 'p'.repeat(32),
      Type: 'SecureString',
      KeyId: 'alias/ratelimit-prod',
      Overwrite: true,
    });
    assert.equal(calls.length, 2);
  });

  it('refuses unknown names and short values without quoting a value, and puts nothing', () => {
    for (const input of [{ 'db-password': 'x'.repeat(20) }, { 'email-pepper': 'short' }, [], {}, null, 'x']) {
      assert.throws(
        () => parseSecrets(input),
        (e: unknown) => e instanceof InvalidSecretsError && !(e as Error).message.includes('x'.repeat(20)),
      );
    }
    assert.equal(ssm.commandCalls(PutParameterCommand).length, 0);
  });

  it('answers any JSON with secrets or an InvalidSecretsError', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (input) => {
        try {
          return Object.keys(parseSecrets(input)).length > 0;
        } catch (error) {
          return error instanceof InvalidSecretsError;
        }
      }),
    );
  });
});
