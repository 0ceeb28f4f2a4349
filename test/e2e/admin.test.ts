/**
 * The admin function (functions/admin/handler.ts): the operator's path to a
 * deployed stage's Redis, invoked through IAM. Here against the suite's
 * production-shaped cluster as the operator's ACL user, with SSM standing in
 * through aws-sdk-client-mock: the CLI's commands, their exit codes and
 * output, overrides written to SSM, and any payload answered, never thrown.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { GetParametersByPathCommand, PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import fc from 'fast-check';

const PATH = '/ratelimit/local';
const ssm = mockClient(SSMClient);
let handler: typeof import('../../functions/admin/handler.ts').handler;

before(async () => {
  const local = JSON.parse(
    readFileSync(new URL('../../config/local-parameters.json', import.meta.url), 'utf8'),
  ) as Record<string, unknown>;
  ssm.on(GetParametersByPathCommand).resolves({
    Parameters: Object.entries(local).map(([Name, value]) => ({
      Name,
      Value: typeof value === 'string' ? value : JSON.stringify(value),
    })),
  });
  ssm.on(PutParameterCommand).resolves({ Version: 2 });
  // as the deployed function: the stage's parameter path, the store as the operator's user
  Object.assign(process.env, {
    RATE_LIMIT_PARAMETER_PATH: PATH,
    RATE_LIMIT_PARAMETERS_FILE: '',
    REDIS_AUTH_SECRET_FILE: process.env.REDIS_OPERATOR_SECRET_FILE,
  });
  ({ handler } = await import('../../functions/admin/handler.ts'));
});
after(() => ssm.restore());

describe('The admin function (npx ratelimit on a deployed stage)', () => {
  it('inspects a key on the stage store, with the parameters from SSM', async () => {
    const answer = await handler({
      argv: ['inspect', 'login-ip', '203.0.113.77', '--scope', '203.0.113.77', '--json'],
    });
    assert.equal(answer.exitCode, 0, answer.stderr);
    const state = JSON.parse(answer.stdout) as { outcome: string; limit: number };
    assert.equal(state.outcome, 'allowed');
    assert.equal(state.limit, 20);
    assert.ok(ssm.commandCalls(GetParametersByPathCommand).some((c) => c.args[0].input.Path === PATH));
  });

  it('writes an override to SSM, audited, and refuses an invalid one with exit 3', async () => {
    const written = await handler(
      { argv: ['override', 'login-ip', '{"limit":30}'] },
      { invokedFunctionArn: 'arn:aws:lambda:eu-west-1:1:function:ratelimit-prod-admin' },
    );
    assert.equal(written.exitCode, 0, written.stderr);
    const put = ssm.commandCalls(PutParameterCommand).at(-1)?.args[0].input;
    assert.equal(put?.Name, `${PATH}/overrides/login-ip`);
    assert.deepEqual(JSON.parse(String(put?.Value)), { limit: 30 });
    assert.match(written.stderr, /"audit":"ratelimit".*"who":"lambda:arn:aws:lambda:[^"]+admin"/);
    const refused = await handler({ argv: ['override', 'login-ip', '{"limit":-1}'] });
    assert.equal(refused.exitCode, 3);
  });

  it('answers any payload with an exit code, never an exception', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.anything(),
          fc.record({ argv: fc.anything() }),
          fc.record({
            argv: fc.array(
              fc.oneof(fc.constantFrom('inspect', 'reset', 'rate', 'policies', '--set', '-h'), fc.string()),
              {
                maxLength: 5,
              },
            ),
          }),
        ),
        async (payload) => {
          const answer = await handler(payload);
          assert.ok(Number.isInteger(answer.exitCode) && answer.exitCode >= 0 && answer.exitCode <= 3);
          assert.doesNotMatch(answer.stderr, /\bat .*\.ts:\d+/, 'no stack trace');
        },
      ),
      { numRuns: 60 },
    );
  });
});
