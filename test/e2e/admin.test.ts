/**
 * The admin function (functions/admin/handler.ts): the operator's path to a
 * deployed stage's Redis, reached through its function URL with AWS_IAM auth.
 * Here against the suite's production-shaped cluster as the operator's ACL
 * user, with SSM and SQS standing in through aws-sdk-client-mock: the CLI's
 * commands, their exit codes and output, overrides written to SSM, the
 * caller's ARN in every audit line and in the notice each write puts on the
 * operations queue, a call naming no IAM caller refused, and any payload
 * answered, never thrown.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, beforeEach, describe, it } from 'node:test';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetParametersByPathCommand, type Parameter, PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { createLimiter } from '@platform/rate-limit';
import { createPolicyStore, FileParameterSource } from '@platform/rate-limit/config';
import { mockClient } from 'aws-sdk-client-mock';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { newApiKey } from '../../config/api-key.ts';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { keyDigest } from '../../functions/admin/notify.ts';
import { proxiedNode } from '../support/cut-after-run.ts';
import { connected, targets } from '../support/targets.ts';

const PATH = '/ratelimit/local';
const LOCAL_PARAMETERS = new URL('../../config/local-parameters.json', import.meta.url).pathname;
/** The stage's email pepper (config/local-parameters.json), which the notices' key digests are keyed with. */
const PEPPER = 'local-only-pepper-not-a-secret';
const QUEUE = 'https://sqs.eu-west-1.amazonaws.com/123456789012/ratelimit-prod-operations';
const ALICE = 'arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Operator_0123/alice@example.com';
/** The temporary access key id Alice signed with (Lambda puts it beside her ARN): an identifier, not a secret. */
const ACCESS_KEY = 'ASIAEXAMPLEALICE0001';
const ssm = mockClient(SSMClient);
const sqs = mockClient(SQSClient);
let handler: typeof import('../../functions/admin/handler.ts').handler;

/** A function URL event (payload 2.0) as Lambda builds it for an IAM-authenticated caller. */
function urlEvent(argv: unknown, caller: string | null = ALICE, method = 'POST'): Record<string, unknown> {
  return {
    version: '2.0',
    rawPath: '/',
    headers: { 'content-type': 'application/json' },
    requestContext: {
      http: { method, path: '/' },
      ...(caller
        ? {
            authorizer: {
              iam: {
                userArn: caller,
                accountId: '123456789012',
                callerId: 'AROAEXAMPLE:alice@example.com',
                accessKey: ACCESS_KEY,
              },
            },
          }
        : {}),
    },
    body: JSON.stringify({ argv }),
    isBase64Encoded: false,
  };
}

const local = JSON.parse(readFileSync(LOCAL_PARAMETERS, 'utf8')) as Record<string, unknown>;
/** What SSM answers for any path under the stage's: the local parameters. */
const stageParameters = {
  Parameters: Object.entries(local).map(([Name, value]) => ({
    Name,
    Value: typeof value === 'string' ? value : JSON.stringify(value),
  })),
};

/** Sets these variables for the rest of the test, as they were after it. */
function withEnv(t: { after: (fn: () => unknown) => void }, values: Record<string, string>): void {
  const saved = Object.fromEntries(Object.keys(values).map((name) => [name, process.env[name]]));
  Object.assign(process.env, values);
  t.after(() => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });
}

/** The audit lines among a text's lines. */
const auditsIn = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.audit === 'ratelimit');

const answerOf = (result: { statusCode: number; body: string }) => {
  assert.equal(result.statusCode, 200, result.body);
  return JSON.parse(result.body) as { exitCode: number; stdout: string; stderr: string };
};

before(async () => {
  assert.equal(local[`${PATH}/secrets/login/email-pepper`], PEPPER);
  ssm.on(GetParametersByPathCommand).resolves(stageParameters);
  ssm.on(PutParameterCommand).resolves({ Version: 2 });
  // as the deployed function: the stage's parameter path, the store as the operator's user, the operations queue
  Object.assign(process.env, {
    RATE_LIMIT_PARAMETER_PATH: PATH,
    RATE_LIMIT_PARAMETERS_FILE: '',
    REDIS_AUTH_SECRET_FILE: process.env.REDIS_OPERATOR_SECRET_FILE,
    OPERATIONS_QUEUE_URL: QUEUE,
  });
  ({ handler } = await import('../../functions/admin/handler.ts'));
});
beforeEach(() => {
  sqs.reset();
  sqs.on(SendMessageCommand).resolves({ MessageId: 'm-1' });
});
after(() => {
  ssm.restore();
  sqs.restore();
});

describe('The admin function (npx ratelimit on a deployed stage, through its IAM-authorized URL)', () => {
  it('inspects a key on the stage store, with the parameters from SSM, and notifies nobody (no write)', async () => {
    const answer = answerOf(
      await handler(urlEvent(['inspect', 'login-ip', '203.0.113.77', '--scope', '203.0.113.77', '--json'])),
    );
    assert.equal(answer.exitCode, 0, answer.stderr);
    const state = JSON.parse(answer.stdout) as { outcome: string; limit: number };
    assert.equal(state.outcome, 'allowed');
    assert.equal(state.limit, 20);
    assert.ok(ssm.commandCalls(GetParametersByPathCommand).some((c) => c.args[0].input.Path === PATH));
    assert.equal(sqs.commandCalls(SendMessageCommand).length, 0);
  });

  it("keeps its log's audit lines its own: a caller's words cannot forge one, and each names its request", async (t) => {
    const logged: string[] = [];
    t.mock.method(process.stderr, 'write', (chunk: unknown) => {
      logged.push(String(chunk));
      return true;
    });
    const bob = 'arn:aws:iam::123456789012:user/bob';
    const forged = JSON.stringify({ audit: 'ratelimit', who: bob, what: 'override', at: new Date().toISOString() });
    const unknown = answerOf(await handler(urlEvent([`x"\n${forged}\n`]), { awsRequestId: 'req-forge' }));
    assert.notEqual(unknown.exitCode, 0);
    const reset = answerOf(
      await handler(urlEvent(['reset', 'login-ip', '198.51.100.24', '--scope', '198.51.100.24']), {
        awsRequestId: 'req-real',
      }),
    );
    t.mock.restoreAll();
    assert.equal(reset.exitCode, 0, reset.stderr);
    const lines = logged
      .join('')
      .split('\n')
      .filter((line) => line !== '');
    const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>); // every line one JSON object
    // the write's audit lines (the log's other lines of this family say a notice failed, or a refusal)
    const audits = records.filter((r) => r.audit === 'ratelimit' && 'at' in r);
    assert.deepEqual(
      audits.map((r) => [r.who, r.what, r.requestId]),
      [[ALICE, 'reset', 'req-real']],
      'one audit line, the real one',
    );
  });

  it('writes an override to SSM, the audit line naming the caller, and notifies who/what/when without the key', async () => {
    const written = answerOf(
      await handler(urlEvent(['override', 'login-ip', '198.51.100.23', '{"limit":30}']), {
        awsRequestId: 'req-1',
        functionName: 'ratelimit-prod-admin',
      }),
    );
    assert.equal(written.exitCode, 0, written.stderr);
    const put = ssm.commandCalls(PutParameterCommand).at(-1)?.args[0].input;
    assert.equal(put?.Name, `${PATH}/overrides/login-ip/198.51.100.23`);
    assert.deepEqual(JSON.parse(String(put?.Value)), { limit: 30 });
    const audit = written.stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.audit === 'ratelimit');
    assert.equal(audit?.who, ALICE, 'the audit line names the person');
    assert.equal(audit?.accessKey, ACCESS_KEY, 'and the access key CloudTrail traces to the real AssumeRole');
    const sent = sqs.commandCalls(SendMessageCommand);
    assert.equal(sent.length, 1);
    assert.equal(sent[0]?.args[0].input.QueueUrl, QUEUE);
    const body = String(sent[0]?.args[0].input.MessageBody);
    const notice = JSON.parse(body) as Record<string, unknown>;
    assert.equal(notice.who, ALICE);
    assert.equal(notice.callerId, 'AROAEXAMPLE:alice@example.com');
    assert.equal(notice.accessKey, ACCESS_KEY, "the session name is the caller's choice; the access key is not");
    assert.equal(notice.what, 'override');
    assert.equal(notice.policy, 'login-ip');
    assert.deepEqual(notice.change, { limit: 30 });
    assert.equal(notice.requestId, 'req-1');
    assert.ok(!Number.isNaN(Date.parse(String(notice.at))));
    assert.equal(notice.keyDigest, keyDigest('198.51.100.23', PEPPER));
    const unkeyed = createHash('sha256').update('198.51.100.23').digest('hex').slice(0, 16);
    assert.notEqual(notice.keyDigest, unkeyed, 'an IP cannot be brute-forced back from the digest');
    assert.ok(!body.includes('198.51.100.23'), 'no raw key in the notice');
    const refused = answerOf(await handler(urlEvent(['override', 'login-ip', '{"limit":-1}'])));
    assert.equal(refused.exitCode, 3);
    assert.equal(sqs.commandCalls(SendMessageCommand).length, 1, 'a refused override notifies nothing');
  });

  it('audits and notifies a write whose answer never came as maybe done (SSM may have stored it)', async (t) => {
    ssm.on(PutParameterCommand).rejects(Object.assign(new Error('socket hang up'), { name: 'TimeoutError' }));
    t.after(() => ssm.on(PutParameterCommand).resolves({ Version: 2 }));
    const timedOut = answerOf(
      await handler(urlEvent(['override', 'login-ip', '198.51.100.25', '{"limit":31}']), { awsRequestId: 'req-lost' }),
    );
    assert.notEqual(timedOut.exitCode, 0, 'the caller is told it failed');
    const audit = timedOut.stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.audit === 'ratelimit');
    assert.equal(audit?.outcome, 'unknown');
    assert.equal(audit?.who, ALICE);
    assert.deepEqual(audit?.after, { limit: 31 }, 'what was asked');
    const notice = JSON.parse(String(sqs.commandCalls(SendMessageCommand).at(-1)?.args[0].input.MessageBody));
    assert.equal(notice.requestId, 'req-lost', 'the operators are told of it too');
    assert.equal(notice.outcome, 'unknown');
    assert.match(String(notice.subject), /maybe override/);
    // refused for sure: by SSM (a 4xx), or before anything was sent (a rate change for a policy with no runtime rate)
    ssm
      .on(PutParameterCommand)
      .rejects(
        Object.assign(new Error('bad value'), { name: 'ValidationException', $metadata: { httpStatusCode: 400 } }),
      );
    const notices = sqs.commandCalls(SendMessageCommand).length;
    for (const argv of [
      ['override', 'login-ip', '198.51.100.26', '{"limit":32}'],
      ['rate', 'api-key', 'rk_test', '--set', '2'],
    ]) {
      const refused = answerOf(await handler(urlEvent(argv), { awsRequestId: 'req-refused' }));
      assert.notEqual(refused.exitCode, 0, argv.join(' '));
      assert.doesNotMatch(refused.stderr, /"audit":"ratelimit"/, `${argv[0]}: not done, so not audited`);
    }
    assert.equal(sqs.commandCalls(SendMessageCommand).length, notices, 'nor notified');
  });

  it("audits and notifies a reset whose DEL is never answered as maybe done, long before the function's 30 s timeout", async (t) => {
    // the stage's store: a real Redis of its own, reached through the delaying proxy, as a plain node
    const node = await proxiedNode(t);
    withEnv(t, {
      REDIS_URL: `redis://127.0.0.1:${node.proxy.port}`,
      REDIS_CLUSTER_NODES: '',
      REDIS_AUTH_SECRET_FILE: '',
    });
    const ip = '203.0.113.80';
    // a counter to reset, its scripts (check and peek) cached on the server, as on a stage that has served
    const store = createPolicyStore({
      defaults: PLATFORM_POLICIES,
      source: new FileParameterSource(LOCAL_PARAMETERS),
      prefix: PATH,
    });
    await store.refresh();
    const limiter = createLimiter({ redis: node.admin, policies: store });
    await limiter.check({ policy: 'login-ip', key: ip }, { scope: ip });
    await limiter.peek([{ policy: 'login-ip', key: ip }], { scope: ip });
    // Redis stalls its writes once the reset has read the counter (the peek of its state before, seen run): its
    // reads (PTTL) still answer, its DEL is held, as in a failover or on a connection whose replies vanish
    const monitor = await (node.admin as Redis).monitor();
    let stalled = false;
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (stalled || !/^eval(sha)?$/i.test(String(args[0])) || !args.some((a) => String(a).includes(ip))) return;
      stalled = true;
      node.admin.call('CLIENT', 'PAUSE', '120000', 'WRITE').catch(() => {});
    });
    const started = performance.now();
    let answer: ReturnType<typeof answerOf> | undefined;
    try {
      const ran = handler(urlEvent(['reset', 'login-ip', ip, '--scope', ip]), { awsRequestId: 'req-stalled' });
      const hung = new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 20_000).unref());
      const result = await Promise.race([ran, hung]);
      assert.ok(result, 'the reset answered within 20 s (the function is killed at 30 s, unaudited)');
      answer = answerOf(result);
    } finally {
      monitor.disconnect();
      await node.admin.call('CLIENT', 'UNPAUSE');
    }
    const elapsedMs = performance.now() - started;
    assert.ok(stalled, 'the reset read the counter, then its writes were held');
    assert.ok(elapsedMs < 10_000, `answered in ${Math.round(elapsedMs)} ms: far below the 30 s timeout`);
    assert.equal(answer.exitCode, 1, answer.stderr);
    assert.match(answer.stderr, /Redis could not answer \(timeout\)/);
    const [audit, ...more] = auditsIn(answer.stderr);
    assert.equal(more.length, 0, answer.stderr);
    assert.equal(audit?.what, 'reset');
    assert.equal(audit?.outcome, 'unknown', 'Redis may yet run the DEL');
    assert.equal(audit?.reason, 'timeout');
    assert.equal(audit?.who, ALICE);
    assert.equal(audit?.accessKey, ACCESS_KEY);
    assert.equal(audit?.key, ip);
    assert.equal((audit?.before as Record<string, unknown>)?.outcome, 'allowed', 'the state before, read');
    const sent = sqs.commandCalls(SendMessageCommand);
    assert.equal(sent.length, 1, 'the operators are told of it');
    const notice = JSON.parse(String(sent[0]?.args[0].input.MessageBody)) as Record<string, unknown>;
    assert.deepEqual([notice.what, notice.outcome, notice.requestId], ['reset', 'unknown', 'req-stalled']);
    assert.match(String(notice.subject), /maybe reset login-ip/);
  });

  it('logs and answers no API key or email given where a name or the JSON goes (arguments out of place)', async (t) => {
    const apiKey = newApiKey();
    const email = `ann-${process.pid}@corp.io`;
    const logged: string[] = [];
    t.mock.method(process.stderr, 'write', (chunk: unknown) => {
      logged.push(String(chunk));
      return true;
    });
    const answers: string[] = [];
    try {
      for (const argv of [
        ['inspect', apiKey, 'api-basic'], // swapped: the key where the policy goes
        ['inspect', email, 'login-ip'],
        ['reset', email, '203.0.113.81'],
        ['rate', apiKey, 'site-1', '--set', '2'],
        ['override', email, '{"limit":1}'],
        ['override', 'login-account', email], // the email where the JSON goes
        ['override', 'api-key', `{"capacity":${apiKey}}`],
        [apiKey, 'api-key'], // where the command goes
        ['inspect', 'login-ip', `--${email}`], // where an option goes
      ]) {
        const result = await handler(urlEvent(argv), { awsRequestId: 'req-misplaced' });
        const answer = answerOf(result);
        assert.ok(answer.exitCode === 2 || answer.exitCode === 3, `${argv[0]}: ${answer.exitCode} ${answer.stderr}`);
        answers.push(result.body);
      }
    } finally {
      t.mock.restoreAll();
    }
    const log = logged.join('');
    // whole, or the 10 characters V8's JSON message quotes
    for (const secret of [apiKey, apiKey.slice(0, 10), email, email.split('@')[0] as string]) {
      const line = log.split('\n').find((l) => l.includes(secret));
      assert.equal(line, undefined, `${secret} is in the function's log`);
      for (const body of answers) assert.ok(!body.includes(secret), `${secret} is in an answer: ${body}`);
    }
    assert.match(log, /unknown policy \(not one of /, 'the refusals are logged, without the word');
    assert.match(log, /not JSON: unexpected character at position 0 /);
    assert.equal(sqs.commandCalls(SendMessageCommand).length, 0, 'nothing written, nobody notified');
  });

  it('notifies a reset with the caller, and says so when the notice could not be sent (the write stands)', async () => {
    const reset = answerOf(await handler(urlEvent(['reset', 'login-ip', '203.0.113.78', '--scope', '203.0.113.78'])));
    assert.equal(reset.exitCode, 0, reset.stderr);
    const notice = JSON.parse(String(sqs.commandCalls(SendMessageCommand)[0]?.args[0].input.MessageBody)) as {
      what: string;
      who: string;
    };
    assert.deepEqual([notice.what, notice.who], ['reset', ALICE]);
    sqs.on(SendMessageCommand).rejects(Object.assign(new Error('endpoint down'), { name: 'TimeoutError' }));
    const unannounced = answerOf(
      await handler(urlEvent(['reset', 'login-ip', '203.0.113.78', '--scope', '203.0.113.78'])),
    );
    assert.equal(unannounced.exitCode, 0);
    assert.match(unannounced.stderr, /reset is done but the operators were not notified \(TimeoutError\)/);
  });

  it('reads SSM even when the caller ends their argv with --, which makes every later word positional', async () => {
    for (const argv of [
      ['policies', '--json', '--'],
      ['--', 'policies'],
    ]) {
      ssm.resetHistory();
      const answer = answerOf(await handler(urlEvent(argv)));
      assert.equal(answer.exitCode, 0, answer.stderr);
      assert.ok(
        ssm.commandCalls(GetParametersByPathCommand).some((c) => c.args[0].input.Path === PATH),
        `${JSON.stringify(argv)} read the stage's parameters from SSM, not the local file`,
      );
    }
  });

  it('refuses every write, writing nothing, while its notifier is misconfigured in Lambda, says why, and still answers reads', async () => {
    // a login-ip counter in the stage's Redis, as login leaves it
    const ip = '203.0.113.79';
    const counter = `rl:{login-net:${ip}}:login-ip:${ip}`;
    const redis = targets[1]?.admin();
    assert.ok(redis);
    await connected(redis);
    const store = createPolicyStore({
      defaults: PLATFORM_POLICIES,
      source: new FileParameterSource(LOCAL_PARAMETERS),
      prefix: PATH,
    });
    await store.refresh();
    await createLimiter({ redis, policies: store }).check({ policy: 'login-ip', key: ip }, { scope: ip });
    assert.equal(await redis.exists(counter), 1);
    const puts = ssm.commandCalls(PutParameterCommand).length;
    const saved = { name: process.env.AWS_LAMBDA_FUNCTION_NAME, queue: process.env.OPERATIONS_QUEUE_URL };
    try {
      process.env.AWS_LAMBDA_FUNCTION_NAME = 'ratelimit-prod-admin';
      for (const queue of ['https://example.com/not-a-queue', '']) {
        process.env.OPERATIONS_QUEUE_URL = queue;
        for (const argv of [
          ['reset', 'login-ip', ip, '--scope', ip],
          ['override', 'login-ip', ip, '{"limit":1000}'],
          ['rate', 'harvester-source', 'site-1', '--set', '2'],
        ]) {
          const result = await handler(urlEvent(argv));
          assert.ok(result.statusCode >= 500 && result.statusCode < 600, `${result.statusCode} ${result.body}`);
          const { error } = JSON.parse(result.body) as { error: string };
          assert.match(error, /OPERATIONS_QUEUE_URL/);
          assert.match(error, /nothing (was )?run/);
          assert.doesNotMatch(error, /\bat .*\.ts:\d+/, 'no stack trace');
        }
        // a read needs no notifier: an incident's inspect still works
        const read = await handler(urlEvent(['inspect', 'login-ip', ip, '--scope', ip, '--json']));
        assert.equal(read.statusCode, 200, read.body);
        assert.equal((JSON.parse(read.body) as { exitCode: number }).exitCode, 0, read.body);
      }
    } finally {
      process.env.AWS_LAMBDA_FUNCTION_NAME = saved.name ?? '';
      if (saved.name === undefined) delete process.env.AWS_LAMBDA_FUNCTION_NAME;
      process.env.OPERATIONS_QUEUE_URL = saved.queue;
    }
    assert.equal(await redis.exists(counter), 1, 'the counter is still there: nothing was reset');
    assert.equal(ssm.commandCalls(PutParameterCommand).length, puts, 'no override written');
    assert.equal(sqs.commandCalls(SendMessageCommand).length, 0);
    // configured again, the same reset goes through (so the counter above is the one it deletes)
    const reset = answerOf(await handler(urlEvent(['reset', 'login-ip', ip, '--scope', ip])));
    assert.equal(reset.exitCode, 0, reset.stderr);
    assert.equal(await redis.exists(counter), 0);
    redis.disconnect();
  });

  it('refuses every write, writing nothing, while the pepper its notices digest keys with is missing or unreadable; reads still run', async () => {
    // a container of its own: a container that has read the pepper keeps it
    const fresh = (await import(
      new URL(`../../functions/admin/handler.ts?pepper=${Date.now()}`, import.meta.url).href
    )) as {
      handler: typeof handler;
    };
    const secrets = { Path: `${PATH}/secrets/login` };
    const puts = ssm.commandCalls(PutParameterCommand).length;
    try {
      for (const [answer, status, reason] of [
        [{ Parameters: [] as Parameter[] }, 500, /no \/ratelimit\/local\/secrets\/login\/email-pepper/],
        [Object.assign(new Error('denied'), { name: 'AccessDeniedException' }), 503, /AccessDeniedException/],
      ] as const) {
        if (answer instanceof Error) ssm.on(GetParametersByPathCommand, secrets).rejects(answer);
        else ssm.on(GetParametersByPathCommand, secrets).resolves(answer);
        const result = await fresh.handler(urlEvent(['override', 'login-ip', '198.51.100.24', '{"limit":30}']));
        assert.equal(result.statusCode, status, result.body);
        const { error } = JSON.parse(result.body) as { error: string };
        assert.match(error, reason);
        assert.match(error, /nothing was run/);
        const read = await fresh.handler(urlEvent(['policies', '--json']));
        assert.equal(read.statusCode, 200, read.body);
      }
    } finally {
      ssm.on(GetParametersByPathCommand, secrets).resolves(stageParameters);
    }
    assert.equal(ssm.commandCalls(PutParameterCommand).length, puts, 'no override written');
    assert.equal(sqs.commandCalls(SendMessageCommand).length, 0);
  });

  it('refuses a call that names no IAM caller (a direct lambda:Invoke payload) and runs nothing', async () => {
    const puts = ssm.commandCalls(PutParameterCommand).length;
    for (const event of [
      { argv: ['override', 'login-ip', '{"limit":1000000}'] },
      urlEvent(['override', 'login-ip', '{"limit":1000000}'], null), // a URL without IAM auth
      urlEvent(['override', 'login-ip', '{"limit":1000000}'], 'lambda:arn:aws:lambda:eu-west-1:1:function:x'),
    ]) {
      const result = await handler(event);
      assert.equal(result.statusCode, 403);
      assert.match(JSON.parse(result.body).error, /no IAM caller/);
    }
    assert.equal((await handler(urlEvent(['policies'], ALICE, 'GET'))).statusCode, 405);
    assert.equal(ssm.commandCalls(PutParameterCommand).length, puts, 'nothing written');
    assert.equal(sqs.commandCalls(SendMessageCommand).length, 0);
  });

  it('answers any payload with a status and, when run, an exit code; never an exception', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.anything(),
          fc.record({ argv: fc.anything() }),
          fc.anything().map((argv) => urlEvent(argv)),
          fc
            .array(fc.oneof(fc.constantFrom('inspect', 'reset', 'rate', 'policies', '--set', '-h'), fc.string()), {
              maxLength: 5,
            })
            .map((argv) => urlEvent(argv)),
        ),
        async (payload) => {
          const result = await handler(payload);
          assert.ok([200, 400, 403, 405].includes(result.statusCode));
          if (result.statusCode === 200) {
            const answer = JSON.parse(result.body) as { exitCode: number; stderr: string };
            assert.ok(Number.isInteger(answer.exitCode) && answer.exitCode >= 0 && answer.exitCode <= 3);
            assert.doesNotMatch(answer.stderr, /\bat .*\.ts:\d+/, 'no stack trace');
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
