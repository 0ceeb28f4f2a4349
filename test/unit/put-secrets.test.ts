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

  it("refuses a Telegram secret token shorter than 32 characters or outside Telegram's alphabet, naming the rule and not the value", () => {
    const refused = [
      ['a'.repeat(31), /at least 32 characters/],
      [`${'a'.repeat(31)}+`, /Telegram's alphabet, A-Z a-z 0-9 _ -/],
      [`${'a'.repeat(40)} `, /Telegram's alphabet/],
      ['é'.repeat(40), /Telegram's alphabet/],
      ['a'.repeat(257), /at most 256 characters/],
      [1_234_567_890_123_456, /must be a string/],
    ] as const;
    for (const [token, rule] of refused) {
      assert.throws(
        () => parseSecrets({ 'telegram-bot-demo': token }),
        (e: unknown) =>
          e instanceof InvalidSecretsError &&
          rule.test(e.message) &&
          e.message.startsWith('telegram-bot-demo: ') &&
          !e.message.includes(String(token).slice(0, 20)),
      );
    }
    // the bounds themselves, and every character Telegram takes
    for (const token of ['a'.repeat(32), 'Z'.repeat(256), 'AZaz09_-'.repeat(4)]) {
      assert.deepEqual(parseSecrets({ 'telegram-bot-demo': token }), { 'telegram-bot-demo': token });
    }
    // the other secrets keep their rule: 16+ characters, any
    assert.deepEqual(parseSecrets({ 'email-pepper': 'p+/='.repeat(4) }), { 'email-pepper': 'p+/='.repeat(4) });
  });

  it("accepts exactly the Telegram secret tokens of 32–256 characters of Telegram's alphabet", () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-';
    const valid = fc.string({ unit: fc.constantFrom(...alphabet), minLength: 32, maxLength: 256 });
    const any = fc.oneof(valid, fc.string({ maxLength: 300 }), fc.string({ unit: 'grapheme', maxLength: 300 }));
    fc.assert(
      fc.property(any, (token) => {
        const fits = token.length >= 32 && token.length <= 256 && [...token].every((c) => alphabet.includes(c));
        try {
          const stored = parseSecrets({ 'telegram-bot-x': token })['telegram-bot-x'];
          return fits && stored === token;
        } catch (error) {
          return !fits && error instanceof InvalidSecretsError;
        }
      }),
    );
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
