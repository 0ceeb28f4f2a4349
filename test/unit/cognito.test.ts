/**
 * CognitoCredentialStore against aws-sdk-client-mock: what each Cognito answer
 * becomes (no enumeration: every "cannot log in" is one `rejected`), and the
 * floor every answer is held to.
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import {
  AdminInitiateAuthCommand,
  CognitoIdentityProviderClient,
  NotAuthorizedException,
  PasswordResetRequiredException,
  TooManyRequestsException,
  UserNotConfirmedException,
  UserNotFoundException,
} from '@aws-sdk/client-cognito-identity-provider';
import { InvalidSettingError } from '@platform/rate-limit';
import { mockClient } from 'aws-sdk-client-mock';
import { CognitoCredentialStore } from '../../functions/login/cognito.ts';
import { readLoginSettings } from '../../functions/shared/settings.ts';

const cognito = mockClient(CognitoIdentityProviderClient);
const meta = { $metadata: {} };

function store(options: { elapsedMs?: number } = {}) {
  const slept: number[] = [];
  let t = 0;
  const s = new CognitoCredentialStore({
    userPoolId: 'eu-west-1_Abc123',
    clientId: 'client123',
    client: new CognitoIdentityProviderClient({ region: 'eu-west-1' }),
    now: () => {
      const at = t;
      t += options.elapsedMs ?? 40;
      return at;
    },
    sleep: async (ms) => {
      slept.push(ms);
    },
  });
  return { store: s, slept };
}

describe('Class: CognitoCredentialStore', () => {
  beforeEach(() => cognito.reset());

  it('asks AdminInitiateAuth with ADMIN_USER_PASSWORD_AUTH and answers the tokens', async () => {
    cognito.on(AdminInitiateAuthCommand).resolves({
      AuthenticationResult: { IdToken: 'id', AccessToken: 'access', RefreshToken: 'refresh', ExpiresIn: 3600 },
    });
    const { store: s } = store();
    assert.deepEqual(await s.verify('alice@example.com', 'pw'), {
      outcome: 'accepted',
      tokens: { IdToken: 'id', AccessToken: 'access', RefreshToken: 'refresh', ExpiresIn: 3600 },
    });
    const [call] = cognito.commandCalls(AdminInitiateAuthCommand);
    assert.deepEqual(call?.args[0].input, {
      UserPoolId: 'eu-west-1_Abc123',
      ClientId: 'client123',
      AuthFlow: 'ADMIN_USER_PASSWORD_AUTH',
      AuthParameters: { USERNAME: 'alice@example.com', PASSWORD: 'pw' },
    });
  });

  it('answers a wrong password, an unknown user, an unconfirmed one and a reset one alike: rejected, held to the same floor', async () => {
    const errors = [
      new NotAuthorizedException({ message: 'Incorrect username or password.', ...meta }),
      new UserNotFoundException({ message: 'User does not exist.', ...meta }),
      new UserNotConfirmedException({ message: 'User is not confirmed.', ...meta }),
      new PasswordResetRequiredException({ message: 'Password reset required.', ...meta }),
    ];
    for (const error of errors) {
      cognito.reset();
      cognito.on(AdminInitiateAuthCommand).rejects(error);
      const { store: s, slept } = store({ elapsedMs: 40 });
      assert.deepEqual(await s.verify('x@example.com', 'pw'), { outcome: 'rejected' }, error.name);
      assert.deepEqual(slept, [260], `${error.name}: held to the 300 ms floor`);
    }
  });

  it("tells Cognito's lockout (NotAuthorizedException 'Password attempts exceeded') from a wrong password, held to the same floor", async () => {
    cognito
      .on(AdminInitiateAuthCommand)
      .rejects(new NotAuthorizedException({ message: 'Password attempts exceeded', ...meta }));
    const { store: s, slept } = store({ elapsedMs: 40 });
    assert.deepEqual(await s.verify('x@example.com', 'pw'), { outcome: 'locked' });
    assert.deepEqual(slept, [260]);
  });

  it('rejects, without asking Cognito and held to the floor, what no user can have: a name past 128 characters or with a space, a password past 256', async () => {
    cognito.on(AdminInitiateAuthCommand).rejects(new NotAuthorizedException({ message: 'unexpected', ...meta }));
    const long = `${'a'.repeat(117)}@example.com`; // 129 characters
    for (const [email, password] of [
      [long, 'pw'],
      ['a b@example.com', 'pw'],
      ['x@example.com', 'p'.repeat(257)],
    ] as const) {
      const { store: s, slept } = store({ elapsedMs: 0 });
      assert.deepEqual(await s.verify(email, password), { outcome: 'rejected' });
      assert.deepEqual(slept, [300], 'held to the floor like any answer');
    }
    assert.equal(cognito.commandCalls(AdminInitiateAuthCommand).length, 0, 'Cognito not asked');
    // the edges themselves are asked
    const { store: s } = store();
    await s.verify(`${'a'.repeat(116)}@example.com`, 'p'.repeat(256));
    assert.equal(cognito.commandCalls(AdminInitiateAuthCommand).length, 1);
  });

  it('does not wait when Cognito took longer than the floor', async () => {
    cognito.on(AdminInitiateAuthCommand).rejects(new NotAuthorizedException({ message: 'no', ...meta }));
    const { store: s, slept } = store({ elapsedMs: 400 });
    assert.deepEqual(await s.verify('x@example.com', 'pw'), { outcome: 'rejected' });
    assert.deepEqual(slept, []);
  });

  it('answers throttling, a timeout and a network error as unavailable (a 503 with a short Retry-After)', async () => {
    const timeout = Object.assign(new Error('aborted'), { name: 'TimeoutError' });
    const network = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    for (const error of [new TooManyRequestsException({ message: 'Rate exceeded', ...meta }), timeout, network]) {
      cognito.reset();
      cognito.on(AdminInitiateAuthCommand).rejects(error);
      const { store: s } = store();
      assert.deepEqual(await s.verify('x@example.com', 'pw'), { outcome: 'unavailable', retryAfterMs: 1000 });
    }
  });

  it('abandons a call that outlives its timeout as unavailable', async () => {
    cognito.on(AdminInitiateAuthCommand).callsFake(() => new Promise(() => {})); // Cognito never answers
    const s = new CognitoCredentialStore({
      userPoolId: 'eu-west-1_Abc123',
      clientId: 'client123',
      client: new CognitoIdentityProviderClient({ region: 'eu-west-1' }),
      callTimeoutMs: 20,
      answerFloorMs: 0,
    });
    assert.deepEqual(await s.verify('x@example.com', 'pw'), { outcome: 'unavailable', retryAfterMs: 1000 });
  });

  it('answers a challenge (NEW_PASSWORD_REQUIRED) as such, never as a success', async () => {
    cognito.on(AdminInitiateAuthCommand).resolves({ ChallengeName: 'NEW_PASSWORD_REQUIRED', Session: 's' });
    const { store: s } = store();
    assert.deepEqual(await s.verify('x@example.com', 'pw'), {
      outcome: 'challenge',
      challenge: 'NEW_PASSWORD_REQUIRED',
    });
  });

  it('throws for what is the deployment’s fault (access denied, a wrong pool)', async () => {
    cognito.on(AdminInitiateAuthCommand).rejects(Object.assign(new Error('denied'), { name: 'AccessDeniedException' }));
    const { store: s } = store();
    await assert.rejects(s.verify('x@example.com', 'pw'), /AccessDeniedException/);
  });
});

describe('Function: readLoginSettings', () => {
  it('chooses Cognito with both variables, the file with neither, and refuses the file in Lambda', () => {
    assert.deepEqual(
      readLoginSettings({ LOGIN_USER_POOL_ID: 'eu-west-1_Abc123', LOGIN_USER_POOL_CLIENT_ID: 'client123' }),
      { kind: 'cognito', userPoolId: 'eu-west-1_Abc123', clientId: 'client123' },
    );
    assert.equal(readLoginSettings({}).kind, 'file');
    assert.throws(
      () => readLoginSettings({ AWS_LAMBDA_FUNCTION_NAME: 'login' }),
      (e: unknown) => e instanceof InvalidSettingError && e.setting === 'LOGIN_USER_POOL_ID',
    );
    assert.throws(
      () => readLoginSettings({ LOGIN_USER_POOL_ID: 'eu-west-1_Abc123' }),
      (e: unknown) => e instanceof InvalidSettingError && e.setting === 'LOGIN_USER_POOL_CLIENT_ID',
    );
    assert.throws(
      () => readLoginSettings({ LOGIN_USER_POOL_ID: 'not a pool', LOGIN_USER_POOL_CLIENT_ID: 'c' }),
      InvalidSettingError,
    );
  });
});
