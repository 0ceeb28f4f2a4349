/**
 * The synthesized app, run (issue 27, item 3): cdk.out is the source of
 * truth. Every Lambda function of the platform stack runs from its template
 * (asset, handler, layer, environment, memory, timeout) with Lambda's module
 * resolution and nothing else on disk; the template's API resources and
 * methods are served over HTTP; the AWS services are stand-ins speaking
 * their wire protocols, which apply the template's IAM policies
 * (test/support/synthesized-app.ts has the one table of references). Then
 * every route answers a real request, and the accepted events arrive on the
 * stage's bus through the template's pipe.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { API_KEY_PEPPER, hashApiKey, newApiKey } from '../../config/api-key.ts';
import { inferenceProfileIdOf } from '../../config/bedrock-profiles.ts';
import { routes } from '../../functions/routes.ts';
import { signSlackBody } from '../../functions/slack/signature.ts';
import { operated } from '../../functions/workers.ts';
import { createPlatformApp } from '../../infra/app.ts';
import { buildAll } from '../../scripts/build.ts';
import { call, loopbackAddress } from '../support/http.ts';
import { type SynthesizedApp, startSynthesizedApp } from '../support/synthesized-app.ts';

const CONFIG = new URL('../../config/', import.meta.url).pathname;
/** A model of config/llm-models.json, by the name callers use. */
const FIRST_MODEL = Object.keys(JSON.parse(readFileSync(join(CONFIG, 'llm-models.json'), 'utf8')))[0] as string;
const STAGE = 'prod';
/** This run's API caller, registered under the stage's registry path like any key (its own tenant, its own budget). */
const CALLER = { key: newApiKey(), owner: `synth-${randomUUID().slice(0, 8)}` };

/** The stage's first user, as docs/deploy.md has the operator create it (admin-create-user, admin-set-user-password). */
const USER = { email: 'alice@example.com', password: 'Correct-h0rse-battery!' };

let work: string;
let app: SynthesizedApp;
let place: { region: string; account: string };
before(async () => {
  work = mkdtempSync(join(tmpdir(), 'rl-synthesized-app-'));
  await buildAll(join(work, 'dist'));
  // the real stage file (infra/stages/prod.json): its account, region and reservations
  const synthesized = createPlatformApp({ context: { dist: join(work, 'dist') }, outdir: join(work, 'cdk.out') });
  synthesized.app.synth();
  place = { region: synthesized.context.region, account: synthesized.context.account };
  app = await startSynthesizedApp({
    dir: join(work, 'cdk.out'),
    stage: STAGE,
    place: { ...place, redisNode: String(process.env.REDIS_CLUSTER_NODES).split(',')[0] as string },
    // the local Redis's CA stands in for the public CA ElastiCache's certificates chain to
    extraEnv: { NODE_EXTRA_CA_CERTS: String(process.env.REDIS_TLS_CA_FILE) },
    provision(aws, resolve, assembly) {
      // what the data stack holds once deployed: each Redis role's secret (the user its template names, RBAC),
      // the user pool with its first user. Locally each secret holds the production shape's user of that name,
      // so a function granted the wrong role's secret, or told the wrong ARN, meets that user's ACL
      const localUsers = [process.env.REDIS_AUTH_SECRET_FILE, process.env.REDIS_OPERATOR_SECRET_FILE].map((file) => {
        const text = readFileSync(String(file), 'utf8');
        return { username: (JSON.parse(text) as { username: string }).username, text };
      });
      for (const [id, r] of Object.entries(assembly.data.Resources)) {
        if (r.Type === 'AWS::SecretsManager::Secret') {
          const generate = r.Properties?.GenerateSecretString as { SecretStringTemplate?: string } | undefined;
          const { username } = JSON.parse(generate?.SecretStringTemplate ?? '{}') as { username?: string };
          const user = localUsers.find((u) => u.username === username);
          assert.ok(user, `secret ${id} names user ${username}, which the local production shape does not have`);
          aws.state.secrets.set(String(resolve({ Ref: id }, assembly.data)), user.text);
        }
      }
      const poolId = Object.keys(assembly.data.Resources).find(
        (id) => assembly.data.Resources[id]?.Type === 'AWS::Cognito::UserPool',
      ) as string;
      const clientId = Object.keys(assembly.data.Resources).find(
        (id) => assembly.data.Resources[id]?.Type === 'AWS::Cognito::UserPoolClient',
      ) as string;
      aws.state.userPool = {
        id: String(resolve({ Ref: poolId }, assembly.data)),
        clientId: String(resolve({ Ref: clientId }, assembly.data)),
        users: new Map([[USER.email, USER.password]]),
      };
      // what `npm run secrets:put` and the API key registry's operator put under the stage's paths
      const local = JSON.parse(readFileSync(join(CONFIG, 'local-parameters.json'), 'utf8')) as Record<string, unknown>;
      for (const [name, value] of Object.entries(local)) {
        if (!name.startsWith('/ratelimit/local/secrets/')) continue;
        aws.state.parameters.set(name.replace('/ratelimit/local/', `/ratelimit/${STAGE}/`), {
          value: String(value),
          type: 'SecureString',
        });
      }
      const keys = JSON.parse(readFileSync(join(CONFIG, 'local-api-keys.json'), 'utf8')) as Record<string, unknown>;
      for (const [hash, owner] of Object.entries(keys)) {
        aws.state.parameters.set(`/platform/${STAGE}/api-keys/${hash}`, {
          value: JSON.stringify(owner),
          type: 'String',
        });
      }
      // and this run's own caller: a tenant no other test file spends (the suite's Redis is shared)
      const pepper = String(local[`/ratelimit/local/secrets/api/${API_KEY_PEPPER}`]);
      aws.state.parameters.set(`/platform/${STAGE}/api-keys/${hashApiKey(CALLER.key, pepper)}`, {
        value: JSON.stringify({ owner: CALLER.owner, role: 'partner' }),
        type: 'String',
      });
      // the foundation models the template lets a function invoke are the ones Bedrock serves here
      for (const model of JSON.stringify(assembly.platform).matchAll(/foundation-model\/([A-Za-z0-9.:-]+)/g)) {
        aws.state.models.set(model[1] as string, (text) => ({
          text: `stand-in answer to ${text.length} characters`,
          inputTokens: 7,
          outputTokens: 5,
        }));
      }
    },
  });
});
after(async () => {
  await app?.close();
  rmSync(work, { recursive: true, force: true });
});

const byName = (name: string) => [...app.functions.values()].find((f) => f.spec.name === `ratelimit-${STAGE}-${name}`);
const callsBy = (name: string, action: string) =>
  app.aws.calls.filter((c) => c.action === action && c.caller === byName(name)?.spec.logicalId);
const logsOf = (name: string) => byName(name)?.log.join('').slice(-2000);

describe('The synthesized app, run from cdk.out', () => {
  it('starts every function of the platform stack from its own asset and the layer asset, no init error', () => {
    const names = [...app.functions.values()].map((f) => f.spec.name).sort();
    assert.deepEqual(names, [...routes, ...operated].map((r) => `ratelimit-${STAGE}-${r.id}`).sort());
    for (const f of app.functions.values()) {
      assert.equal(f.initError, undefined, `${f.spec.name}: ${JSON.stringify(f.initError)}`);
      assert.equal(f.spec.layers.length, 1, `${f.spec.name} runs on the layer`);
    }
  });

  it("deploys the layer without the build's V8 code caches (not byte-stable, and not read on Lambda's arm64), its ioredis bundle included", () => {
    const layers = new Set([...app.functions.values()].flatMap((f) => f.spec.layers));
    assert.equal(layers.size, 1);
    const files = readdirSync([...layers][0] as string, { recursive: true }).map(String);
    assert.ok(
      files.some((f) => f.endsWith('vendor/ioredis.cjs')),
      'the bundled ioredis is in the layer asset',
    );
    assert.deepEqual(
      files.filter((f) => f.includes('.v8cache')),
      [],
    );
  });

  it('serves exactly the methods of the route table, each to its own function', () => {
    const expected = routes.flatMap((r) => r.methods.map((m) => `${m} ${r.path}`)).sort();
    assert.deepEqual([...app.served.keys()].sort(), expected);
    for (const route of routes) {
      for (const method of route.methods) {
        assert.equal(app.served.get(`${method} ${route.path}`)?.spec.name, `ratelimit-${STAGE}-${route.id}`);
      }
    }
  });

  it('login: verifies the password against the user directory (Cognito AdminInitiateAuth) and answers its tokens', async () => {
    const from = loopbackAddress();
    const ok = await call(app.url, { method: 'POST', path: '/auth/login', from, body: JSON.stringify(USER) });
    assert.equal(ok.status, 200, `${ok.body}\n${logsOf('login')}`);
    const auth = callsBy('login', 'AdminInitiateAuth');
    assert.equal(auth.length, 1);
    // the tokens the user directory issued, handed to the caller
    const issued = (
      (auth[0]?.output ?? { AuthenticationResult: {} }) as { AuthenticationResult: Record<string, string> }
    ).AuthenticationResult;
    for (const token of ['IdToken', 'AccessToken', 'RefreshToken'] as const) {
      assert.ok(ok.body.includes(String(issued[token])), `${token} in ${ok.body}`);
    }
    assert.equal(auth[0]?.input.UserPoolId, app.aws.state.userPool?.id, "the template's pool");
    assert.equal(auth[0]?.input.AuthFlow, 'ADMIN_USER_PASSWORD_AUTH');
    const wrong = await call(app.url, {
      method: 'POST',
      path: '/auth/login',
      from,
      body: JSON.stringify({ ...USER, password: 'not-it' }),
    });
    const unknown = await call(app.url, {
      method: 'POST',
      path: '/auth/login',
      from,
      body: JSON.stringify({ email: 'nobody@example.com', password: 'not-it' }),
    });
    assert.equal(wrong.status, 401, wrong.body);
    assert.deepEqual([unknown.status, unknown.body], [wrong.status, wrong.body], 'no enumeration');
  });

  it('api: finds the key in the SSM registry under the template path and answers its owner', async () => {
    const answer = await call(app.url, {
      path: '/v1/whoami',
      from: loopbackAddress(),
      headers: { 'x-api-key': CALLER.key },
    });
    assert.equal(answer.status, 200, `${answer.body}\n${logsOf('api')}`);
    assert.deepEqual(answer.json(), { owner: CALLER.owner, role: 'partner' });
    assert.ok(callsBy('api', 'GetParameter').length >= 1, 'the deployed registry, not the file');
  });

  it('llm: calls Bedrock Converse on a model its role is granted, and answers', async () => {
    const answer = await call(app.url, {
      method: 'POST',
      path: '/v1/llm/complete',
      from: loopbackAddress(),
      headers: { 'x-api-key': CALLER.key },
      body: JSON.stringify({ model: FIRST_MODEL, prompt: 'hello', max_tokens: 10 }),
    });
    assert.equal(answer.status, 200, `${answer.body}\n${logsOf('llm')}`);
    const converse = app.aws.calls.filter((c) => c.action === 'Converse' && c.caller === byName('llm')?.spec.logicalId);
    assert.equal(converse.length, 1, 'the deployed provider, not the fake one');
    const models = JSON.parse(readFileSync(join(CONFIG, 'llm-models.json'), 'utf8')) as Record<
      string,
      { bedrockModelId: string }
    >;
    const profile = inferenceProfileIdOf(models[FIRST_MODEL]?.bedrockModelId ?? '', place.region);
    assert.equal(converse[0]?.input.modelId, profile, "the model's inference profile in the function's region");
  });

  it('slack and telegram: accepted events go on the queue and arrive on the stage bus through the pipe', async () => {
    const slackBody = JSON.stringify({
      type: 'event_callback',
      team_id: 'TSYNTH',
      event_id: `Ev${Date.now()}`,
      event: { channel: 'C1' },
    });
    const slack = await call(app.url, {
      method: 'POST',
      path: '/webhooks/slack',
      from: loopbackAddress(),
      body: slackBody,
      headers: signSlackBody('local-only-slack-signing-secret', slackBody),
    });
    assert.equal(slack.status, 200, `${slack.body}\n${logsOf('slack')}`);
    const telegram = await call(app.url, {
      method: 'POST',
      path: '/webhooks/telegram/demo',
      from: loopbackAddress(),
      body: JSON.stringify({ update_id: Date.now(), message: { chat: { id: 5 } } }),
      headers: { 'X-Telegram-Bot-Api-Secret-Token': 'local-only-telegram-secret-token' },
    });
    assert.equal(telegram.status, 200, `${telegram.body}\n${logsOf('telegram')}`);
    assert.equal(app.drainPipes(), 2);
    const busName = app.aws.state.parameters.get(`/ratelimit/${STAGE}/platform/event-bus-name`)?.value;
    assert.equal(busName, `ratelimit-${STAGE}`, 'the bus name is published in SSM');
    const events = app.buses.get(busName as string) ?? [];
    assert.deepEqual(
      events.map((e) => [e.source, (e.detail as { source: string }).source]),
      [
        ['platform.accepted-events', 'slack'],
        ['platform.accepted-events', 'telegram'],
      ],
    );
  });

  it('admin: the operator runs CLI commands through its IAM-authorized URL; a write notifies the alarm topic, naming the caller', async () => {
    const admin = byName('admin');
    const operator = `arn:aws:sts::${place.account}:assumed-role/AWSReservedSSO_Operator_0123/alice@example.com`;
    // what Lambda hands the function behind an AWS_IAM function URL: the SigV4-verified caller
    const urlEvent = (argv: string[]) => ({
      version: '2.0',
      rawPath: '/',
      headers: { 'content-type': 'application/json' },
      requestContext: {
        http: { method: 'POST', path: '/' },
        authorizer: {
          iam: {
            userArn: operator,
            accountId: place.account,
            callerId: 'AROAEXAMPLE:alice@example.com',
            accessKey: 'ASIAEXAMPLEALICE0001',
          },
        },
      },
      body: JSON.stringify({ argv }),
      isBase64Encoded: false,
    });
    const run = async (argv: string[]) => {
      const result = (await admin?.invoke(urlEvent(argv)))?.result as { statusCode: number; body: string };
      assert.equal(result?.statusCode, 200, `${JSON.stringify(result)}\n${logsOf('admin')}`);
      return JSON.parse(result.body) as { exitCode: number; stdout: string; stderr: string };
    };
    const inspected = await run(['inspect', 'login-ip', '203.0.113.9', '--scope', '203.0.113.9']);
    assert.equal(inspected.exitCode, 0, `${JSON.stringify(inspected)}\n${logsOf('admin')}`);
    assert.match(inspected.stdout, /login-ip/);
    const reset = await run(['reset', 'login-ip', '203.0.113.9', '--scope', '203.0.113.9']);
    assert.equal(reset.exitCode, 0, `${JSON.stringify(reset)}\n${logsOf('admin')}`);
    // an override reads what it replaces from the overrides folder: what the template lets the admin role read
    const override = await run(['override', 'login-ip', '{"limit": 30}']);
    assert.equal(override.exitCode, 0, `${JSON.stringify(override)}\n${logsOf('admin')}`);
    assert.equal(
      JSON.parse(app.aws.state.parameters.get(`/ratelimit/${STAGE}/overrides/login-ip`)?.value ?? '{}').limit,
      30,
    );
    app.drainPipes();
    const notices = [...app.topics.values()].flat().map((body) => JSON.parse(body) as { who: string; what: string });
    assert.deepEqual(
      notices.map((n) => [n.what, n.who]),
      [
        ['reset', operator],
        ['override', operator],
      ],
      `one notice per write, naming the person\n${logsOf('admin')}`,
    );
  });

  it("applies the template's IAM: only the login role may AdminInitiateAuth, only the llm role may invoke models", () => {
    const pool = `arn:aws:cognito-idp:${place.region}:${place.account}:userpool/${app.aws.state.userPool?.id}`;
    const base = [...app.aws.state.models.keys()][0] as string;
    const model = `arn:aws:bedrock:${place.region}:${place.account}:inference-profile/${inferenceProfileIdOf(base, place.region)}`;
    for (const f of app.functions.values()) {
      const id = f.spec.name.replace(`ratelimit-${STAGE}-`, '');
      assert.equal(
        authorizeFor(f.spec.logicalId, 'cognito-idp:AdminInitiateAuth', pool),
        id === 'login',
        `${id} and the pool`,
      );
      assert.equal(authorizeFor(f.spec.logicalId, 'bedrock:InvokeModel', model), id === 'llm', `${id} and Bedrock`);
    }
  });
});

/** The stand-ins' authorizer (the template's policies), asked directly: a function's access key id is its logical id. */
function authorizeFor(caller: string, action: string, resource: string): boolean {
  return app.aws.authorize(caller, action, resource);
}
