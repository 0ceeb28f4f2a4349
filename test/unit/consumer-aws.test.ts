/**
 * The consumers' AWS clients, tested against aws-sdk-client-mock: the SQS
 * event sink and the SSM API key registry.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetParameterCommand, ParameterNotFound, SSMClient } from '@aws-sdk/client-ssm';
import { InvalidSettingError } from '@platform/rate-limit';
import { mockClient } from 'aws-sdk-client-mock';
import fc from 'fast-check';
import { keyRegistryFor } from '../../functions/api/auth.ts';
import { KeyRegistryUnavailableError, SsmKeyRegistry } from '../../functions/api/registry.ts';
import { readConsumerSettings } from '../../functions/shared/settings.ts';
import { eventSinkOf, SqsEventSink, UnsetEventSink } from '../../functions/shared/sink.ts';

const QUEUE = 'https://sqs.eu-west-1.amazonaws.com/123456789012/accepted-events';

describe('Class: SqsEventSink', () => {
  it('sends one message per accepted event, with its source and id as attributes', async () => {
    const sqs = mockClient(SQSClient);
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm-1' });
    await new SqsEventSink(QUEUE, new SQSClient({})).put({
      source: 'slack',
      id: 'Ev1',
      scope: 'T1',
      payload: { a: 1 },
    });
    const sent = sqs.commandCalls(SendMessageCommand)[0]?.args[0].input;
    assert.equal(sent?.QueueUrl, QUEUE);
    assert.deepEqual(JSON.parse(sent?.MessageBody ?? ''), {
      source: 'slack',
      id: 'Ev1',
      scope: 'T1',
      payload: { a: 1 },
    });
    assert.equal(sent?.MessageAttributes?.eventId?.StringValue, 'Ev1');
    sqs.restore();
  });

  it("hands the caller's abort signal to the SDK, so a put past the sender's ack time is stopped", async () => {
    const sqs = mockClient(SQSClient);
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm-2' });
    const abort = new AbortController();
    await new SqsEventSink(QUEUE, new SQSClient({})).put(
      { source: 'slack', id: 'Ev2', scope: 'T1', payload: {} },
      abort.signal,
    );
    // the mock's types know only the command; the SDK's send takes its HTTP options second
    const options = (sqs.send.getCall(0).args as unknown[])[1] as { abortSignal?: AbortSignal } | undefined;
    assert.equal(options?.abortSignal, abort.signal);
    sqs.restore();
  });

  it('throws when SQS refuses, so the webhook answers 503 and the sender retries', async () => {
    const sqs = mockClient(SQSClient);
    sqs.on(SendMessageCommand).rejects(new Error('throttled'));
    await assert.rejects(
      new SqsEventSink(QUEUE, new SQSClient({})).put({ source: 'telegram', id: '1', scope: 'b', payload: {} }),
    );
    sqs.restore();
  });
});

describe('Class: SsmKeyRegistry', () => {
  it('looks a key hash up once per TTL, found or not', async () => {
    const ssm = mockClient(SSMClient);
    ssm
      .on(GetParameterCommand, { Name: '/platform/api-keys/known' })
      .resolves({ Parameter: { Value: JSON.stringify({ owner: 'acme', role: 'partner' }) } });
    ssm
      .on(GetParameterCommand, { Name: '/platform/api-keys/unknown' })
      .rejects(new ParameterNotFound({ message: 'not found', $metadata: {} }));
    const clock = { ms: 0 };
    const registry = new SsmKeyRegistry('/platform/api-keys/', {
      client: new SSMClient({}),
      ttlMs: 1000,
      now: () => clock.ms,
    });
    assert.deepEqual(await registry.lookup('known'), { owner: 'acme', role: 'partner' });
    assert.equal(await registry.lookup('unknown'), undefined);
    assert.deepEqual(await registry.lookup('known'), { owner: 'acme', role: 'partner' });
    assert.equal(await registry.lookup('unknown'), undefined);
    assert.equal(ssm.commandCalls(GetParameterCommand).length, 2, 'cached within the TTL');
    clock.ms = 1000;
    await registry.lookup('known');
    assert.equal(ssm.commandCalls(GetParameterCommand).length, 3);
    ssm.restore();
  });

  it('takes an entry whose owner cannot key a counter for no key (its LLM calls were refused as over budget)', async () => {
    const ssm = mockClient(SSMClient);
    const registry = new SsmKeyRegistry('/platform/api-keys', { client: new SSMClient({}) });
    for (const [i, bad] of ['acme corp', 'ops@acme', '{acme}', 'acme:holds', 'acme:settled', ''].entries()) {
      ssm
        .on(GetParameterCommand, { Name: `/platform/api-keys/bad${i}` })
        .resolves({ Parameter: { Value: JSON.stringify({ owner: bad, role: 'partner' }) } });
      assert.equal(await registry.lookup(`bad${i}`), undefined, bad);
    }
    ssm
      .on(GetParameterCommand, { Name: '/platform/api-keys/good' })
      .resolves({ Parameter: { Value: JSON.stringify({ owner: 'acme-corp.eu', role: 'partner' }) } });
    assert.deepEqual(await registry.lookup('good'), { owner: 'acme-corp.eu', role: 'partner' });
    ssm.restore();
  });

  it('keeps the keys it found whatever the churn of unknown ones (10 000 random keys do not push one out)', async () => {
    const ssm = mockClient(SSMClient);
    ssm.on(GetParameterCommand).rejects(new ParameterNotFound({ message: 'not found', $metadata: {} })); // before the specific one, or it wins
    ssm
      .on(GetParameterCommand, { Name: '/platform/api-keys/real' })
      .resolves({ Parameter: { Value: JSON.stringify({ owner: 'acme', role: 'partner' }) } });
    const clock = { ms: 0 };
    const registry = new SsmKeyRegistry('/platform/api-keys', { client: new SSMClient({}), now: () => clock.ms });
    try {
      assert.deepEqual(await registry.lookup('real'), { owner: 'acme', role: 'partner' });
      for (let i = 0; i < 10_001; i++) await registry.lookup(`random${i}`);
      assert.ok(registry.remembers('real'), 'a known key outlives any number of unknown ones');
      assert.ok(!registry.remembers('random0'), 'the unknown keys are bounded among themselves: the oldest went');
      assert.ok(registry.remembers('random1') && registry.remembers('random10000'));
      assert.equal(ssm.commandCalls(GetParameterCommand).length, 1 + 10_001);
    } finally {
      ssm.restore();
    }
  });

  it('answers a key created or revoked since its last read as it now is, once its TTL is over', async () => {
    const ssm = mockClient(SSMClient);
    const clock = { ms: 0 };
    const registry = new SsmKeyRegistry('/platform/api-keys', {
      client: new SSMClient({}),
      ttlMs: 1000,
      now: () => clock.ms,
    });
    try {
      ssm.on(GetParameterCommand).rejects(new ParameterNotFound({ message: 'not found', $metadata: {} }));
      assert.equal(await registry.lookup('key'), undefined);
      ssm
        .on(GetParameterCommand)
        .resolves({ Parameter: { Value: JSON.stringify({ owner: 'acme', role: 'standard' }) } });
      clock.ms = 1000;
      assert.deepEqual(await registry.lookup('key'), { owner: 'acme', role: 'standard' }, 'created');
      ssm.on(GetParameterCommand).rejects(new ParameterNotFound({ message: 'not found', $metadata: {} }));
      clock.ms = 2000;
      assert.equal(await registry.lookup('key'), undefined, 'revoked');
      assert.equal(await registry.lookup('key'), undefined, 'revoked, from memory');
      assert.equal(ssm.commandCalls(GetParameterCommand).length, 3);
    } finally {
      ssm.restore();
    }
  });

  it('forgets the known key least recently used, and only to make room for a new one', async () => {
    const ssm = mockClient(SSMClient);
    ssm.on(GetParameterCommand).callsFake(({ Name }: { Name: string }) => ({
      Parameter: { Value: JSON.stringify({ owner: Name.split('/').pop(), role: 'standard' }) },
    }));
    const clock = { ms: 0 };
    const registry = new SsmKeyRegistry('/platform/api-keys', {
      client: new SSMClient({}),
      ttlMs: 60_000,
      now: () => clock.ms,
    });
    try {
      // 10 000 known keys (full): `first`, then `real`, then the rest
      await registry.lookup('first');
      await registry.lookup('real');
      await registry.lookup('hot');
      for (let i = 3; i < 10_000; i++) await registry.lookup(`k${i}`);
      clock.ms = 1;
      await registry.lookup('hot'); // read from memory: now the most recently used
      clock.ms = 60_000;
      await registry.lookup('real'); // lapsed and read again: the most recently used, and nothing made room for it
      assert.ok(registry.remembers('real'));
      for (const key of ['first', 'k3', 'k4', 'k5']) assert.ok(!registry.remembers(key), `${key} lapsed`);
      clock.ms = 59_999; // every entry back within its TTL: what `remembers` shows is what is held
      assert.ok(registry.remembers('first'), 'refreshing a held key evicted nothing');
      // two new keys: the two least recently used go, `first` and `k3`, not `hot` or `real`
      await registry.lookup('new1');
      await registry.lookup('new2');
      assert.ok(!registry.remembers('first') && !registry.remembers('k3'));
      assert.ok(registry.remembers('k4'));
      assert.ok(registry.remembers('hot'), 'a key read from memory was used, so not next to go');
      assert.ok(registry.remembers('real'), 'a key just read again is not next to go');
    } finally {
      ssm.restore();
    }
  });

  it('answers an SSM failure other than "not found" as unavailable (the API answers 503)', async () => {
    const ssm = mockClient(SSMClient);
    ssm.on(GetParameterCommand).rejects(new Error('ThrottlingException'));
    const registry = new SsmKeyRegistry('/platform/api-keys', { client: new SSMClient({}) });
    await assert.rejects(registry.lookup('any'), (error) => {
      assert.ok(error instanceof KeyRegistryUnavailableError, String(error));
      assert.match(String((error.cause as Error).message), /ThrottlingException/);
      return true;
    });
    ssm.restore();
  });

  it('after a failed read, answers keys not in memory unavailable for breakMs without reading SSM; keys in memory keep working', async () => {
    const ssm = mockClient(SSMClient);
    const throttled = new Error('Rate exceeded');
    throttled.name = 'ThrottlingException';
    ssm.on(GetParameterCommand).rejects(throttled); // before the specific one, or it wins
    ssm
      .on(GetParameterCommand, { Name: '/platform/api-keys/known' })
      .resolves({ Parameter: { Value: JSON.stringify({ owner: 'acme', role: 'partner' }) } });
    const clock = { ms: 0 };
    const registry = new SsmKeyRegistry('/platform/api-keys', {
      client: new SSMClient({}),
      ttlMs: 60_000,
      breakMs: 2_000,
      now: () => clock.ms,
    });
    const reads = () => ssm.commandCalls(GetParameterCommand).length;
    const unavailable = (retryAfterMs: number) => (error: unknown) => {
      assert.ok(error instanceof KeyRegistryUnavailableError, String(error));
      assert.equal(error.retryAfterMs, retryAfterMs);
      return true;
    };
    try {
      assert.deepEqual(await registry.lookup('known'), { owner: 'acme', role: 'partner' });
      await assert.rejects(registry.lookup('random0'), unavailable(2_000)); // SSM throttles: the breaker opens
      assert.equal(reads(), 2);
      clock.ms = 500;
      for (let i = 1; i <= 200; i++) await assert.rejects(registry.lookup(`random${i}`), unavailable(1_500));
      assert.equal(reads(), 2, 'no read while the breaker is open');
      assert.deepEqual(await registry.lookup('known'), { owner: 'acme', role: 'partner' }, 'a key in memory works');
      assert.ok(!registry.remembers('random1'), 'a refused key is not remembered as unknown');
      clock.ms = 2_000; // the breaker is over: one read tries SSM again, and its failure opens it again
      await assert.rejects(registry.lookup('random201'), unavailable(2_000));
      await assert.rejects(registry.lookup('random202'), unavailable(2_000));
      assert.equal(reads(), 3);
      ssm.on(GetParameterCommand).rejects(new ParameterNotFound({ message: 'not found', $metadata: {} }));
      clock.ms = 4_000; // SSM is back; "not found" is an answer, not a failure: the breaker stays closed
      assert.equal(await registry.lookup('random203'), undefined);
      assert.equal(await registry.lookup('random204'), undefined);
      assert.equal(reads(), 5);
    } finally {
      ssm.restore();
    }
  });
  it('opens no breaker for an entry that is not JSON (that key alone is refused)', async () => {
    const ssm = mockClient(SSMClient);
    ssm.on(GetParameterCommand).rejects(new ParameterNotFound({ message: 'not found', $metadata: {} }));
    ssm.on(GetParameterCommand, { Name: '/platform/api-keys/typo' }).resolves({ Parameter: { Value: '{owner: acme' } });
    const registry = new SsmKeyRegistry('/platform/api-keys', { client: new SSMClient({}), now: () => 0 });
    try {
      await assert.rejects(registry.lookup('typo'), SyntaxError);
      assert.equal(await registry.lookup('other'), undefined, 'read, and answered');
      assert.equal(ssm.commandCalls(GetParameterCommand).length, 2);
    } finally {
      ssm.restore();
    }
  });

  it('serves a found key past its TTL while SSM throttles, for 15 minutes past it, then answers unavailable', async () => {
    const ssm = mockClient(SSMClient);
    const throttled = Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
    ssm
      .on(GetParameterCommand, { Name: '/platform/api-keys/known' })
      .resolves({ Parameter: { Value: JSON.stringify({ owner: 'acme', role: 'partner' }) } });
    const clock = { ms: 0 };
    const registry = new SsmKeyRegistry('/platform/api-keys', { client: new SSMClient({}), now: () => clock.ms });
    const reads = () => ssm.commandCalls(GetParameterCommand).length;
    const acme = { owner: 'acme', role: 'partner' };
    const grace = 15 * 60_000; // past the 60 s TTL
    try {
      assert.deepEqual(await registry.lookup('known'), acme);
      ssm.on(GetParameterCommand).rejects(throttled);
      clock.ms = 61_000; // its TTL is over: read again, and the read fails
      assert.ok(!registry.remembers('known'), 'lapsed: it costs a read');
      assert.deepEqual(await registry.lookup('known'), acme, 'a key in memory keeps working while SSM throttles');
      assert.equal(reads(), 2);
      clock.ms = 62_000; // the breaker is open: served as last read, without a read
      assert.ok(registry.remembers('known'), 'answered from memory while the breaker is open');
      assert.deepEqual(await registry.lookup('known'), acme);
      assert.equal(reads(), 2, 'no read while the breaker is open');
      clock.ms = 60_000 + grace - 1;
      assert.deepEqual(await registry.lookup('known'), acme, 'the last millisecond of the grace');
      assert.equal(reads(), 3);
      clock.ms = 60_000 + grace + 5_000; // past the grace, breaker over: read, failed, and refused
      await assert.rejects(registry.lookup('known'), (error) => {
        assert.ok(error instanceof KeyRegistryUnavailableError, String(error));
        assert.equal(error.retryAfterMs, 2_000);
        return true;
      });
      clock.ms += 1_000; // past the grace, breaker open: refused without a read
      assert.ok(!registry.remembers('known'));
      await assert.rejects(registry.lookup('known'), KeyRegistryUnavailableError);
      assert.equal(reads(), 4);
      ssm
        .on(GetParameterCommand)
        .resolves({ Parameter: { Value: JSON.stringify({ owner: 'acme', role: 'partner' }) } });
      clock.ms += 2_000; // SSM is back: read, and remembered anew
      assert.deepEqual(await registry.lookup('known'), acme);
      assert.ok(registry.remembers('known'));
    } finally {
      ssm.restore();
    }
  });

  it('never serves from the grace a key a successful read found revoked (not found) or no longer JSON', async () => {
    const ssm = mockClient(SSMClient);
    const throttled = Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
    const entry = { Parameter: { Value: JSON.stringify({ owner: 'acme', role: 'partner' }) } };
    ssm.on(GetParameterCommand).resolves(entry);
    const clock = { ms: 0 };
    const registry = new SsmKeyRegistry('/platform/api-keys', { client: new SSMClient({}), now: () => clock.ms });
    const acme = { owner: 'acme', role: 'partner' };
    try {
      assert.deepEqual(await registry.lookup('revoked'), acme);
      assert.deepEqual(await registry.lookup('garbled'), acme);
      ssm.on(GetParameterCommand).rejects(throttled);
      clock.ms = 61_000;
      assert.deepEqual(await registry.lookup('revoked'), acme, 'SSM throttles: served from the grace');
      assert.deepEqual(await registry.lookup('garbled'), acme, 'SSM throttles: served from the grace');
      ssm.on(GetParameterCommand).rejects(new ParameterNotFound({ message: 'not found', $metadata: {} }));
      ssm.on(GetParameterCommand, { Name: '/platform/api-keys/garbled' }).resolves({ Parameter: { Value: '{owner' } });
      clock.ms = 64_000; // SSM answers again: the keys are as they now are
      assert.equal(await registry.lookup('revoked'), undefined, 'revoked at the first read that succeeds');
      await assert.rejects(registry.lookup('garbled'), SyntaxError);
      ssm.on(GetParameterCommand).rejects(throttled);
      clock.ms = 70_000;
      assert.equal(await registry.lookup('revoked'), undefined, 'not found, from memory');
      clock.ms = 130_000; // SSM throttles again, within what would have been their grace: neither is served
      await assert.rejects(registry.lookup('revoked'), KeyRegistryUnavailableError);
      await assert.rejects(registry.lookup('garbled'), KeyRegistryUnavailableError);
    } finally {
      ssm.restore();
    }
  });

  /** A logger that keeps what it is told. */
  function capturing() {
    const lines: { message: string; attributes: Record<string, unknown> }[] = [];
    return {
      lines,
      logger: { warn: (message: string, attributes: Record<string, unknown>) => lines.push({ message, attributes }) },
    };
  }

  it('warns of a failed read with the error name alone, never the key hash (the registry keyRegistryFor makes)', async () => {
    const hash = 'q3Xv9y8Zs7bW6cV5dU4eT3fS2gR1hQ0iP9jO8kN7mL6';
    const ssm = mockClient(SSMClient);
    const denied = Object.assign(
      new Error(
        `User: arn:aws:sts::123456789012:assumed-role/api/fn is not authorized to perform: ssm:GetParameter on resource: arn:aws:ssm:eu-west-1:123456789012:parameter/platform/api-keys/${hash}`,
      ),
      { name: 'AccessDeniedException' },
    );
    ssm.on(GetParameterCommand).rejects(denied);
    const { lines, logger } = capturing();
    const registry = keyRegistryFor({ kind: 'ssm', path: '/platform/api-keys' }, logger);
    try {
      await assert.rejects(registry.lookup(hash), (error) => {
        assert.ok(error instanceof KeyRegistryUnavailableError, String(error));
        assert.ok(!error.message.includes(hash), `no key hash in the error's own message: ${error.message}`);
        return true;
      });
      assert.equal(lines.length, 1, JSON.stringify(lines));
      assert.equal(lines[0]?.attributes.error, 'AccessDeniedException');
      assert.equal(lines[0]?.attributes.reason, 'registry_read_failed');
      assert.ok(!JSON.stringify(lines).includes(hash), `no key hash in the warning: ${JSON.stringify(lines)}`);
    } finally {
      ssm.restore();
    }
  });

  it('warns of each reason at most once a minute per container, counting the lines it left out', async () => {
    const ssm = mockClient(SSMClient);
    ssm.on(GetParameterCommand).rejects(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }));
    const clock = { ms: 0 };
    const { lines, logger } = capturing();
    const registry = new SsmKeyRegistry('/platform/api-keys', {
      client: new SSMClient({}),
      now: () => clock.ms,
      logger,
    });
    try {
      for (let i = 0; i < 30; i++, clock.ms += 2_000) {
        await assert.rejects(registry.lookup(`random${i}`), KeyRegistryUnavailableError); // each after the breaker: a read
      }
      assert.equal(ssm.commandCalls(GetParameterCommand).length, 30);
      assert.equal(lines.length, 1, 'a minute of failed reads: one line');
      clock.ms = 60_000;
      await assert.rejects(registry.lookup('random30'), KeyRegistryUnavailableError);
      assert.equal(lines.length, 2);
      assert.equal(lines[1]?.attributes.suppressed, 29);
    } finally {
      ssm.restore();
    }
  });

  it('warns of an entry whose owner cannot name a counter, and of one that is not JSON, without their value', async () => {
    const ssm = mockClient(SSMClient);
    ssm
      .on(GetParameterCommand, { Name: '/platform/api-keys/spaced' })
      .resolves({ Parameter: { Value: '{"owner":"a b","role":"standard"}' } });
    ssm.on(GetParameterCommand, { Name: '/platform/api-keys/typo' }).resolves({ Parameter: { Value: '{owner: acme' } });
    const { lines, logger } = capturing();
    const registry = new SsmKeyRegistry('/platform/api-keys', { client: new SSMClient({}), now: () => 0, logger });
    try {
      assert.equal(await registry.lookup('spaced'), undefined, 'no key (401)');
      assert.deepEqual(
        lines.map((l) => l.attributes.reason),
        ['entry_not_an_owner'],
      );
      await assert.rejects(registry.lookup('typo'), SyntaxError);
      assert.deepEqual(
        lines.map((l) => l.attributes.reason),
        ['entry_not_an_owner', 'entry_not_json'],
      );
      const logged = JSON.stringify(lines);
      for (const secret of ['a b', 'acme', 'spaced', 'typo'])
        assert.ok(!logged.includes(secret), `${secret} in ${logged}`);
    } finally {
      ssm.restore();
    }
  });
});

describe('Function: readConsumerSettings', () => {
  it('chooses SQS and SSM in AWS, files locally', () => {
    const aws = readConsumerSettings({ EVENT_QUEUE_URL: QUEUE, API_KEYS_PARAMETER_PATH: '/platform/api-keys' });
    assert.deepEqual(aws.sink, { kind: 'sqs', queueUrl: QUEUE });
    assert.deepEqual(aws.apiKeys, { kind: 'ssm', path: '/platform/api-keys' });
    const local = readConsumerSettings({});
    assert.equal(local.sink.kind, 'file');
    assert.equal(local.apiKeys.kind, 'file');
  });

  it('never falls back to the local files in Lambda: an unset queue or key registry is refused where it is used', async () => {
    const lambda = readConsumerSettings({ AWS_LAMBDA_FUNCTION_NAME: 'ratelimit-prod-api' });
    assert.deepEqual(lambda.sink, { kind: 'unset', variable: 'EVENT_QUEUE_URL' });
    assert.ok(
      eventSinkOf(lambda.sink) instanceof UnsetEventSink,
      'what the webhooks refuse before counting (sinkConfigured)',
    );
    assert.deepEqual(lambda.apiKeys, { kind: 'unset', variable: 'API_KEYS_PARAMETER_PATH' });
    assert.throws(
      () => keyRegistryFor(lambda.apiKeys),
      (error) => error instanceof InvalidSettingError && error.setting === 'API_KEYS_PARAMETER_PATH',
    );
    await assert.rejects(eventSinkOf(lambda.sink).put({ source: 'slack', id: 'e1', body: {} } as never), (error) => {
      assert.ok(error instanceof InvalidSettingError && error.setting === 'EVENT_QUEUE_URL', String(error));
      return true;
    });
  });

  it('answers any environment with settings or an InvalidSettingError naming the variable', () => {
    const name = fc.constantFrom(
      'EVENT_QUEUE_URL',
      'EVENT_SINK_FILE',
      'LOGIN_USERS_FILE',
      'API_KEYS_PARAMETER_PATH',
      'API_KEYS_FILE',
    );
    fc.assert(
      fc.property(fc.dictionary(name, fc.oneof(fc.string(), fc.webUrl(), fc.constant(QUEUE))), (env) => {
        try {
          readConsumerSettings(env);
        } catch (error) {
          if (!(error instanceof InvalidSettingError)) throw error;
        }
      }),
    );
    assert.throws(
      () => readConsumerSettings({ EVENT_QUEUE_URL: 'http://example.com/q' }),
      /invalid setting EVENT_QUEUE_URL/,
    );
  });
});
