import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { GetParametersByPathCommand, type ParameterType, SSMClient } from '@aws-sdk/client-ssm';
import { PolicyStore } from '@platform/rate-limit/config';
import { SsmParameterSource } from '@platform/rate-limit/ssm';
import { mockClient } from 'aws-sdk-client-mock';

const PREFIX = '/ratelimit/prod';
const defaults = { 'login-ip': { strategy: 'slidingWindow', limit: 20, window: '15 m' } };
const ssm = mockClient(SSMClient);

function store(clock = { now: 0 }, warnings: unknown[] = []) {
  return new PolicyStore({
    prefix: PREFIX,
    source: new SsmParameterSource(new SSMClient({ region: 'eu-west-1' })),
    defaults,
    ttlMs: 60_000,
    now: () => clock.now,
    logger: { warn: (message, attributes) => warnings.push({ message, ...attributes }) },
  });
}

const parameter = (name: string, value: unknown, type: ParameterType = 'String') => ({
  Name: `${PREFIX}/${name}`,
  Value: typeof value === 'string' ? value : JSON.stringify(value),
  Type: type,
});

describe('Class: SsmParameterSource', () => {
  beforeEach(() => ssm.reset());

  it('reads every page of the path, recursively, asking SSM to decrypt SecureStrings', async () => {
    ssm
      .on(GetParametersByPathCommand, { Path: PREFIX, NextToken: undefined })
      .resolves({ Parameters: [parameter('overrides/login-ip', { limit: 5 })], NextToken: 'page-2' })
      .on(GetParametersByPathCommand, { Path: PREFIX, NextToken: 'page-2' })
      .resolves({ Parameters: [parameter('secrets/email-pepper', 'decrypted-pepper', 'SecureString')] });
    const policies = store();
    await policies.refresh();
    assert.equal(policies.resolve('login-ip', 'k')?.limit, 5);
    assert.equal(policies.secret('email-pepper'), 'decrypted-pepper');
    const calls = ssm.commandCalls(GetParametersByPathCommand);
    assert.equal(calls.length, 2);
    for (const call of calls) {
      assert.equal(call.args[0].input.WithDecryption, true);
      assert.equal(call.args[0].input.Recursive, true);
    }
  });

  it('keeps the last good values when SSM throttles', async () => {
    const clock = { now: 0 };
    const warnings: Record<string, unknown>[] = [];
    const policies = store(clock, warnings);
    ssm.on(GetParametersByPathCommand).resolvesOnce({ Parameters: [parameter('overrides/login-ip', { limit: 5 })] });
    await policies.refresh();
    ssm
      .on(GetParametersByPathCommand)
      .rejects(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }));
    clock.now += 60_000;
    await policies.refresh();
    assert.equal(policies.resolve('login-ip', 'k')?.limit, 5);
    assert.equal(warnings.length, 1);
    assert.match(String(warnings[0]?.reason), /ThrottlingException|Rate exceeded/);
  });

  it('rejects a malformed value and keeps the default', async () => {
    const warnings: Record<string, unknown>[] = [];
    const policies = store({ now: 0 }, warnings);
    ssm.on(GetParametersByPathCommand).resolves({ Parameters: [parameter('overrides/login-ip', '{"limit": -3}')] });
    await policies.refresh();
    assert.equal(policies.resolve('login-ip', 'k')?.limit, 20);
    assert.deepEqual(warnings, [
      {
        // never good: nothing of it applies (the default does)
        message: 'rate-limit parameter rejected; it does not apply: the policy in force does',
        parameter: `${PREFIX}/overrides/login-ip`,
        reason: 'limit must be at least 1',
      },
    ]);
  });

  it('picks up a changed value at the first request after the TTL, not before', async () => {
    const clock = { now: 0 };
    const policies = store(clock);
    ssm.on(GetParametersByPathCommand).resolves({ Parameters: [parameter('overrides/login-ip', { limit: 5 })] });
    await policies.ready();
    ssm.on(GetParametersByPathCommand).resolves({ Parameters: [parameter('overrides/login-ip', { limit: 8 })] });
    clock.now += 59_999;
    policies.resolve('login-ip', 'k');
    assert.equal(ssm.commandCalls(GetParametersByPathCommand).length, 1);
    clock.now += 1;
    policies.resolve('login-ip', 'k'); // stale: starts the refresh
    await policies.refresh(); // joins the refresh in flight
    assert.equal(ssm.commandCalls(GetParametersByPathCommand).length, 2);
    assert.equal(policies.resolve('login-ip', 'k')?.limit, 8);
  });
});
