import { InvalidSettingError } from '@platform/rate-limit';
import { readRefusalLog } from '../../config/refusal-log.ts';

/**
 * What the consumers read from the environment, in one place (the layer's own
 * settings are in layer/src/config/settings.ts). A bad value is an InvalidSettingError
 * naming the variable at cold start.
 *
 * | variable                  | meaning                                                              | default                      |
 * | ------------------------- | -------------------------------------------------------------------- | ---------------------------- |
 * | `EVENT_QUEUE_URL`         | SQS queue accepted webhook events go to (AWS; required in Lambda where events are put) | none: the file below |
 * | `EVENT_SINK_FILE`         | JSON-lines file accepted events go to (local runs)                   | `.local/events.jsonl`        |
 * | `LOGIN_USERS_FILE`        | scrypt hashes of the local demo users                                | `config/local-users.json`    |
 * | `LOGIN_USER_POOL_ID`      | Cognito user pool login verifies passwords with (with the next; required in Lambda) | none: the users file  |
 * | `LOGIN_USER_POOL_CLIENT_ID` | its app client (ADMIN_USER_PASSWORD_AUTH, no client secret)        | none: the users file         |
 * | `API_KEYS_PARAMETER_PATH` | SSM path of the API key registry (`<path>/<key hash>` → owner, role; required in Lambda where keys are looked up) | none: the file below |
 * | `API_KEYS_FILE`           | the API key registry as a JSON file (local runs)                     | `config/local-api-keys.json` |
 * | `RATE_LIMIT_REFUSAL_LOG`  | JSON-lines file each refusal is also written to (local runs; `npx ratelimit top` reads it; config/refusal-log.ts) | none (`npm start`: `.local/refusals.jsonl`) |
 * | `LLM_PROVIDER`            | `bedrock` or `local` (the LLM route only; in Lambda only `bedrock`)  | `local` outside Lambda       |
 */
/** A setting a deployed function needs and was not given: refused where it is used (not every function uses each). */
export interface UnsetInLambda<V extends string> {
  readonly kind: 'unset';
  readonly variable: V;
}

export interface ConsumerSettings {
  /** In Lambda never the file: a deployed webhook's events must not go to a local file. */
  readonly sink:
    | { readonly kind: 'sqs'; readonly queueUrl: string }
    | { readonly kind: 'file'; readonly file: string }
    | UnsetInLambda<'EVENT_QUEUE_URL'>;
  readonly usersFile: string;
  /** In Lambda never the file: a deployed API must not take the repository's demo keys. */
  readonly apiKeys:
    | { readonly kind: 'ssm'; readonly path: string }
    | { readonly kind: 'file'; readonly file: string }
    | UnsetInLambda<'API_KEYS_PARAMETER_PATH'>;
  /** Where refusals are also written locally; in AWS they are log lines only (CloudWatch Contributor Insights reads them). */
  readonly refusalLog: string | undefined;
}

const ROOT = new URL('../../', import.meta.url).pathname;
type Env = Readonly<Record<string, string | undefined>>;

/** Running in Lambda (its runtime sets the function's name): there no setting falls back to a local stand-in. */
const inLambda = (env: Env): boolean => Boolean(env.AWS_LAMBDA_FUNCTION_NAME);

export function readConsumerSettings(env: Env = process.env): ConsumerSettings {
  const queueUrl = env.EVENT_QUEUE_URL;
  if (
    queueUrl &&
    !/^https:\/\/sqs\.[a-z0-9-]+\.amazonaws\.com(\.cn)?\/\d{12}\/[A-Za-z0-9_-]{1,80}(\.fifo)?$/.test(queueUrl)
  ) {
    throw new InvalidSettingError(
      'EVENT_QUEUE_URL',
      'must be an SQS queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)',
    );
  }
  const keysPath = env.API_KEYS_PARAMETER_PATH;
  if (keysPath && !/^(\/[A-Za-z0-9_.-]+)+$/.test(keysPath)) {
    throw new InvalidSettingError('API_KEYS_PARAMETER_PATH', 'must be an SSM path such as /platform/api-keys');
  }
  const deployed = inLambda(env);
  return {
    sink: queueUrl
      ? { kind: 'sqs', queueUrl }
      : deployed
        ? { kind: 'unset', variable: 'EVENT_QUEUE_URL' }
        : { kind: 'file', file: env.EVENT_SINK_FILE || `${ROOT}.local/events.jsonl` },
    usersFile: env.LOGIN_USERS_FILE || `${ROOT}config/local-users.json`,
    apiKeys: keysPath
      ? { kind: 'ssm', path: keysPath }
      : deployed
        ? { kind: 'unset', variable: 'API_KEYS_PARAMETER_PATH' }
        : { kind: 'file', file: env.API_KEYS_FILE || `${ROOT}config/local-api-keys.json` },
    refusalLog: readRefusalLog(env),
  };
}

/** Which provider the LLM route calls (`LLM_PROVIDER`): Bedrock when deployed, the local fake otherwise. */
export type LlmProviderKind = 'bedrock' | 'local';

/**
 * `LLM_PROVIDER`: `bedrock` | `local`, default `local` outside Lambda. In
 * Lambda (`AWS_LAMBDA_FUNCTION_NAME` set) anything but `bedrock` is an
 * InvalidSettingError: a deployed route never answers from the fake. Read
 * by the LLM route only (the other functions have no such variable).
 */
export function readLlmProvider(env: Env = process.env): LlmProviderKind {
  const value = env.LLM_PROVIDER || undefined;
  if (inLambda(env) && value !== 'bedrock') {
    throw new InvalidSettingError('LLM_PROVIDER', 'must be "bedrock" in Lambda (the local fake is never deployed)');
  }
  if (value !== undefined && value !== 'bedrock' && value !== 'local') {
    throw new InvalidSettingError('LLM_PROVIDER', 'must be "bedrock" or "local"');
  }
  return value ?? 'local';
}

/** Where login verifies passwords: a Cognito user pool (AWS), or the local users file. */
export type LoginDirectory =
  | { readonly kind: 'cognito'; readonly userPoolId: string; readonly clientId: string }
  | { readonly kind: 'file'; readonly file: string };

const USER_POOL_ID = /^[\w-]+_[0-9a-zA-Z]+$/;
const CLIENT_ID = /^[\w+]{1,128}$/;

/**
 * The login route's directory, read at its cold start (only login reads it, so
 * no other function needs the pool). Both variables set: Cognito; neither: the
 * local file, except in Lambda (`AWS_LAMBDA_FUNCTION_NAME`), where a deployed
 * login must never read a local file.
 */
export function readLoginSettings(env: Env = process.env): LoginDirectory {
  const userPoolId = env.LOGIN_USER_POOL_ID;
  const clientId = env.LOGIN_USER_POOL_CLIENT_ID;
  if (userPoolId && !(USER_POOL_ID.test(userPoolId) && userPoolId.length <= 55)) {
    throw new InvalidSettingError('LOGIN_USER_POOL_ID', 'must be a Cognito user pool id such as eu-west-1_AbCdEf123');
  }
  if (clientId && !CLIENT_ID.test(clientId)) {
    throw new InvalidSettingError('LOGIN_USER_POOL_CLIENT_ID', 'must be a Cognito app client id');
  }
  if (userPoolId && clientId) return { kind: 'cognito', userPoolId, clientId };
  if (userPoolId || clientId) {
    const missing = userPoolId ? 'LOGIN_USER_POOL_CLIENT_ID' : 'LOGIN_USER_POOL_ID';
    throw new InvalidSettingError(missing, 'must be set with the other (the pool and its app client go together)');
  }
  if (inLambda(env)) {
    throw new InvalidSettingError(
      'LOGIN_USER_POOL_ID',
      'must be set in Lambda: a deployed login never reads a local users file',
    );
  }
  return { kind: 'file', file: env.LOGIN_USERS_FILE || `${ROOT}config/local-users.json` };
}

/**
 * `OPERATIONS_QUEUE_URL`: the SQS queue the admin function puts one record on
 * per write (who, what, when), piped to the alarm topic (infra/admin-entry.ts).
 * Read by the admin function only. In Lambda it must be set (a deployed
 * write is never silent); outside Lambda unset means stderr only.
 */
export function readOperationsQueue(env: Env = process.env): string | undefined {
  const url = env.OPERATIONS_QUEUE_URL || undefined;
  if (url === undefined) {
    if (inLambda(env))
      throw new InvalidSettingError(
        'OPERATIONS_QUEUE_URL',
        'must be set in Lambda: every write notifies the operators',
      );
    return undefined;
  }
  if (!/^https:\/\/sqs\.[a-z0-9-]+\.amazonaws\.com(\.cn)?\/\d{12}\/[A-Za-z0-9_-]{1,80}$/.test(url)) {
    throw new InvalidSettingError('OPERATIONS_QUEUE_URL', 'must be an SQS queue URL');
  }
  return url;
}
