/**
 * A flood of random API keys from one IP against the SSM key registry
 * (aws-sdk-client-mock counts the GetParameter calls): the IP's guessing
 * window (`api-unknown-key-ip`) refuses it before its keys cost a read, so
 * Parameter Store's throughput stays with real lookups and policy refreshes.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { GetParameterCommand, ParameterNotFound, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { newApiKey } from '../../config/api-key.ts';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { useRegistry } from '../../functions/api/auth.ts';
import { SsmKeyRegistry } from '../../functions/api/registry.ts';
import { consumers, type TestPlatform } from '../support/consumers.ts';
import { restEvent } from '../support/events.ts';

let platform: TestPlatform;
before(async () => {
  platform = await consumers();
});
after(() => platform.close());

const KEYS = 10_000;

describe('The API under a flood of random keys from one IP', () => {
  it('reads the registry only for the keys its guessing window lets through', async (t) => {
    const ssm = mockClient(SSMClient);
    ssm.on(GetParameterCommand).rejects(new ParameterNotFound({ message: 'not found', $metadata: {} }));
    useRegistry(new SsmKeyRegistry('/platform/test/api-keys', { client: new SSMClient({}) }));
    const { handler } = await import('../../functions/api/handler.ts');
    const ip = `198.51.100.${1 + (process.pid % 250)}`;
    const statuses = new Map<number, number>();
    const send = async (from: string, apiKey: string) => {
      const event = {
        ...restEvent({ ip: from, headers: { 'x-api-key': apiKey } }),
        httpMethod: 'GET',
        path: '/v1/whoami',
        pathParameters: { proxy: 'whoami' },
      };
      return (await handler(event, {} as never)) as { statusCode: number };
    };
    let malformedReads: number;
    try {
      // well-formed random keys: the shape passes, the registry is asked until the window closes
      for (let i = 0; i < KEYS; i++) {
        const answer = await send(ip, newApiKey());
        statuses.set(answer.statusCode, (statuses.get(answer.statusCode) ?? 0) + 1);
      }
      // malformed ones (from another IP, with its window open): answered as unknown, never a read
      const before = ssm.commandCalls(GetParameterCommand).length;
      const other = `203.0.113.${1 + (process.pid % 250)}`;
      for (let i = 0; i < 5; i++) assert.equal((await send(other, randomBytes(16).toString('hex'))).statusCode, 401);
      malformedReads = ssm.commandCalls(GetParameterCommand).length - before;
    } finally {
      ssm.restore();
    }
    assert.equal(malformedReads, 0, 'a malformed key costs no registry read');
    const reads = ssm.commandCalls(GetParameterCommand).length;
    const window = (PLATFORM_POLICIES['api-unknown-key-ip'] as { limit: number }).limit;
    t.diagnostic(
      `${KEYS} random keys from one IP: ${reads} SSM GetParameter calls (the window admits ${window}); answers ${JSON.stringify(Object.fromEntries(statuses))}`,
    );
    assert.equal(reads, window, 'one read per key the window let through, none after');
    assert.equal(statuses.get(401), window);
    assert.equal(statuses.get(429), KEYS - window);
    // every refusal is observed as one: the Limited metric and the refusal log (top offenders) see the flood
    const log = (() => {
      try {
        return readFileSync(process.env.RATE_LIMIT_REFUSAL_LOG as string, 'utf8');
      } catch {
        return ''; // nothing refused was logged
      }
    })();
    const refusals = log
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { policy: string; key: string })
      .filter((r) => r.policy === 'api-unknown-key-ip' && r.key === ip);
    assert.equal(refusals.length, KEYS - window, 'each 429 of the guessing window is in the refusal log');
  });
  it('during an SSM throttle, reads SSM once per breaker interval, not once per random key', async () => {
    const ssm = mockClient(SSMClient);
    const throttled = new Error('Rate exceeded');
    throttled.name = 'ThrottlingException';
    ssm.on(GetParameterCommand).rejects(throttled);
    const clock = { ms: 0 }; // never moves: the breaker stays open after the first failure
    useRegistry(new SsmKeyRegistry('/platform/test/api-keys', { client: new SSMClient({}), now: () => clock.ms }));
    const { handler } = await import('../../functions/api/handler.ts');
    const ip = `192.0.2.${1 + (process.pid % 250)}`; // not the first test's IP: its window is over
    const answers: { statusCode: number; headers?: Record<string, string> }[] = [];
    try {
      for (let i = 0; i < 200; i++) {
        const event = {
          ...restEvent({ ip, headers: { 'x-api-key': newApiKey() } }),
          httpMethod: 'GET',
          path: '/v1/whoami',
          pathParameters: { proxy: 'whoami' },
        };
        answers.push((await handler(event, {} as never)) as (typeof answers)[number]);
      }
    } finally {
      ssm.restore();
    }
    assert.equal(ssm.commandCalls(GetParameterCommand).length, 1, 'the first failure opened the breaker');
    assert.deepEqual(new Set(answers.map((a) => a.statusCode)), new Set([503]));
    assert.equal(answers[1]?.headers?.['Retry-After'], '2', 'as long as the breaker refuses');
  });
});
