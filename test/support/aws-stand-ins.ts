/**
 * Local stand-ins for the AWS services the deployed functions call, speaking
 * the services' own wire protocols on 127.0.0.1, so the unmodified AWS SDK
 * (pointed here by `AWS_ENDPOINT_URL_<SERVICE>`) talks to them as to AWS:
 *
 * | service          | protocol                         | operations                          |
 * | ---------------- | -------------------------------- | ----------------------------------- |
 * | Secrets Manager  | AWS JSON 1.1 (`X-Amz-Target`)    | GetSecretValue                      |
 * | SSM              | AWS JSON 1.1                     | GetParametersByPath, GetParameter, PutParameter |
 * | SQS              | AWS JSON 1.0 (SDK v3's protocol) | SendMessage                         |
 * | Cognito IdP      | AWS JSON 1.1                     | AdminInitiateAuth                   |
 * | Bedrock Runtime  | REST JSON over HTTP/2 (`/model/{id}/converse`) | Converse              |
 *
 * Every request's SigV4 access key names its caller; `authorize` decides
 * whether the caller may take the action on the resource (the synthesized
 * app's test answers from the template's IAM policies), and a refusal is the
 * service's AccessDenied error, as AWS would answer a missing grant.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import {
  createServer as createHttp2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type ServerHttp2Session,
} from 'node:http2';
import type { AddressInfo } from 'node:net';

export interface StoredParameter {
  readonly value: string;
  readonly type: 'String' | 'SecureString';
}

export interface StandInCall {
  readonly service: string;
  readonly action: string;
  readonly caller: string;
  readonly input: Record<string, unknown>;
  /** What the stand-in answered (set once it has). */
  output?: unknown;
}

export interface StandInState {
  readonly region: string;
  readonly account: string;
  /** Secret ARN → its SecretString. */
  readonly secrets: Map<string, string>;
  /** Parameter name → value. */
  readonly parameters: Map<string, StoredParameter>;
  /** Queue URL → the message bodies sent, in order (with their attributes). */
  readonly queues: Map<string, { body: string; attributes: Record<string, unknown> }[]>;
  /** The user pool: its id, its app client's id, and email → password. */
  userPool: { id: string; clientId: string; users: Map<string, string> } | undefined;
  /** What a Bedrock model answers a prompt with, and the usage it reports. */
  readonly models: Map<string, (text: string) => { text: string; inputTokens: number; outputTokens: number }>;
}

/** May `caller` (an access key id) take `action` on `resource`? @default everyone may */
export type Authorize = (caller: string, action: string, resource: string) => boolean;

export interface AwsStandIns {
  readonly url: string;
  readonly state: StandInState;
  readonly calls: StandInCall[];
  /** Who may do what (the option's authorizer, or everyone). */
  readonly authorize: Authorize;
  /** The `AWS_ENDPOINT_URL_<SERVICE>` variables that point an SDK here. */
  readonly endpointEnv: Record<string, string>;
  close(): Promise<void>;
}

class ServiceError extends Error {
  readonly status: number;
  readonly type: string;
  constructor(status: number, type: string, message: string) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

const json11 = 'application/x-amz-json-1.1';
const json10 = 'application/x-amz-json-1.0';

/** SQS's MD5 of message attributes (its documented encoding: each name, type and value length-prefixed, by name). */
function md5OfAttributes(attributes: Record<string, { DataType: string; StringValue?: string }>): string {
  const hash = createHash('md5');
  const field = (text: string) => {
    const bytes = Buffer.from(text, 'utf8');
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    hash.update(length).update(bytes);
  };
  for (const name of Object.keys(attributes).sort()) {
    const attribute = attributes[name] as { DataType: string; StringValue?: string };
    field(name);
    field(attribute.DataType);
    hash.update(Buffer.from([1]));
    field(attribute.StringValue ?? '');
  }
  return hash.digest('hex');
}

const md5 = (text: string) => createHash('md5').update(text, 'utf8').digest('hex');

/** The access key id of a SigV4-signed request (`Credential=<key>/<date>/<region>/<service>/aws4_request`). */
function callerOf(request: IncomingMessage | Http2ServerRequest): string {
  return /Credential=([^/,\s]+)\//.exec(String(request.headers.authorization ?? ''))?.[1] ?? 'anonymous';
}

export async function startAwsStandIns(
  options: { region?: string; account?: string; authorize?: Authorize; userPool?: StandInState['userPool'] } = {},
): Promise<AwsStandIns> {
  const region = options.region ?? 'eu-west-1';
  const account = options.account ?? '222222222222';
  const state: StandInState = {
    region,
    account,
    secrets: new Map(),
    parameters: new Map(),
    queues: new Map(),
    userPool: options.userPool,
    models: new Map(),
  };
  const calls: StandInCall[] = [];
  const authorize = options.authorize ?? (() => true);
  const parameterArn = (name: string) => `arn:aws:ssm:${region}:${account}:parameter/${name.replace(/^\//, '')}`;
  const queueArn = (url: string) => `arn:aws:sqs:${region}:${account}:${url.split('/').at(-1)}`;
  const allow = (caller: string, action: string, resource: string, type = 'AccessDeniedException') => {
    if (!authorize(caller, action, resource)) {
      throw new ServiceError(
        400,
        type,
        `User: ${caller} is not authorized to perform: ${action} on resource: ${resource} because no identity-based policy allows the ${action} action`,
      );
    }
  };

  const handlers: Record<string, (input: Record<string, unknown>, caller: string) => unknown> = {
    'secretsmanager.GetSecretValue': (input, caller) => {
      const id = String(input.SecretId);
      allow(caller, 'secretsmanager:GetSecretValue', id);
      const secret = state.secrets.get(id);
      if (secret === undefined) {
        throw new ServiceError(400, 'ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
      }
      return {
        ARN: id,
        Name: id.split(':').at(-1),
        SecretString: secret,
        VersionId: 'v1',
        VersionStages: ['AWSCURRENT'],
      };
    },
    'AmazonSSM.GetParametersByPath': (input, caller) => {
      const path = String(input.Path).replace(/\/$/, '');
      allow(caller, 'ssm:GetParametersByPath', parameterArn(path));
      const recursive = input.Recursive === true;
      const found = [...state.parameters].filter(([name]) => {
        if (!name.startsWith(`${path}/`)) return false;
        return recursive || !name.slice(path.length + 1).includes('/');
      });
      const start = Number(input.NextToken ?? 0);
      const page = found.slice(start, start + 10);
      return {
        Parameters: page.map(([name, p]) => ({ Name: name, Type: p.type, Value: p.value, Version: 1 })),
        ...(start + 10 < found.length ? { NextToken: String(start + 10) } : {}),
      };
    },
    'AmazonSSM.GetParameter': (input, caller) => {
      const name = String(input.Name);
      allow(caller, 'ssm:GetParameter', parameterArn(name));
      const p = state.parameters.get(name);
      if (!p) throw new ServiceError(400, 'ParameterNotFound', `Parameter ${name} not found.`);
      return { Parameter: { Name: name, Type: p.type, Value: p.value, Version: 1, ARN: parameterArn(name) } };
    },
    'AmazonSSM.PutParameter': (input, caller) => {
      const name = String(input.Name);
      allow(caller, 'ssm:PutParameter', parameterArn(name));
      if (state.parameters.has(name) && input.Overwrite !== true) {
        throw new ServiceError(400, 'ParameterAlreadyExists', 'The parameter already exists.');
      }
      const type = input.Type === 'SecureString' ? 'SecureString' : 'String';
      state.parameters.set(name, { value: String(input.Value), type });
      return { Version: 1, Tier: 'Standard' };
    },
    'AmazonSQS.SendMessage': (input, caller) => {
      const url = String(input.QueueUrl);
      allow(caller, 'sqs:SendMessage', queueArn(url), 'com.amazonaws.sqs#AccessDenied');
      const queue = state.queues.get(url);
      if (!queue) {
        throw new ServiceError(400, 'com.amazonaws.sqs#QueueDoesNotExist', 'The specified queue does not exist.');
      }
      const body = String(input.MessageBody);
      const attributes = (input.MessageAttributes ?? {}) as Record<string, { DataType: string; StringValue?: string }>;
      queue.push({ body, attributes });
      return {
        MessageId: randomUUID(),
        MD5OfMessageBody: md5(body),
        ...(Object.keys(attributes).length ? { MD5OfMessageAttributes: md5OfAttributes(attributes) } : {}),
      };
    },
    'AWSCognitoIdentityProviderService.AdminInitiateAuth': (input, caller) => {
      const pool = state.userPool;
      const poolArn = `arn:aws:cognito-idp:${region}:${account}:userpool/${String(input.UserPoolId)}`;
      allow(caller, 'cognito-idp:AdminInitiateAuth', poolArn);
      if (!pool || input.UserPoolId !== pool.id) {
        throw new ServiceError(
          400,
          'ResourceNotFoundException',
          `User pool ${String(input.UserPoolId)} does not exist.`,
        );
      }
      if (input.ClientId !== pool.clientId) {
        throw new ServiceError(400, 'ResourceNotFoundException', 'User pool client does not exist.');
      }
      if (input.AuthFlow !== 'ADMIN_USER_PASSWORD_AUTH') {
        throw new ServiceError(400, 'InvalidParameterException', 'Auth flow not enabled for this client');
      }
      const { USERNAME, PASSWORD } = (input.AuthParameters ?? {}) as Record<string, string>;
      // the client prevents user-existence errors: an unknown user is a wrong password
      if (!USERNAME || pool.users.get(USERNAME) !== PASSWORD) {
        throw new ServiceError(400, 'NotAuthorizedException', 'Incorrect username or password.');
      }
      const token = (kind: string) => `${kind}.${Buffer.from(USERNAME).toString('base64url')}.${randomUUID()}`;
      return {
        AuthenticationResult: {
          AccessToken: token('access'),
          IdToken: token('id'),
          RefreshToken: token('refresh'),
          ExpiresIn: 3600,
          TokenType: 'Bearer',
        },
        ChallengeParameters: {},
      };
    },
  };

  function converse(modelId: string, input: Record<string, unknown>, caller: string) {
    // a cross-region inference profile (`eu.amazon.nova-lite-v1:0`): Bedrock authorizes the profile and the model
    // in the region it routes to (here its own); a model id alone, the model in this region
    const profile = /^(us-gov|us|eu|apac)\.(.+)$/.exec(modelId);
    const base = profile ? (profile[2] as string) : modelId;
    if (profile)
      allow(caller, 'bedrock:InvokeModel', `arn:aws:bedrock:${region}:${account}:inference-profile/${modelId}`);
    allow(caller, 'bedrock:InvokeModel', `arn:aws:bedrock:${region}::foundation-model/${base}`);
    const model = state.models.get(base);
    if (!model) throw new ServiceError(400, 'ValidationException', 'The provided model identifier is invalid.');
    const messages = (input.messages ?? []) as { content?: { text?: string }[] }[];
    const prompt = messages.flatMap((m) => (m.content ?? []).map((c) => c.text ?? '')).join('\n');
    const answer = model(prompt);
    return {
      output: { message: { role: 'assistant', content: [{ text: answer.text }] } },
      stopReason: 'end_turn',
      usage: {
        inputTokens: answer.inputTokens,
        outputTokens: answer.outputTokens,
        totalTokens: answer.inputTokens + answer.outputTokens,
      },
      metrics: { latencyMs: 1 },
    };
  }

  function reply(
    response: ServerResponse | Http2ServerResponse,
    status: number,
    type: string,
    body: unknown,
    extra: Record<string, string> = {},
  ) {
    const headers = { 'content-type': type, 'x-amzn-requestid': randomUUID(), ...extra };
    // the two servers' responses share this much of their API, not their types
    (response as ServerResponse).writeHead(status, headers).end(JSON.stringify(body));
  }

  const serve = (request: IncomingMessage | Http2ServerRequest, response: ServerResponse | Http2ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const target = String(request.headers['x-amz-target'] ?? '');
      const contentType = target.startsWith('AmazonSQS.') ? json10 : target ? json11 : 'application/json';
      const caller = callerOf(request);
      try {
        const input = (text ? JSON.parse(text) : {}) as Record<string, unknown>;
        const bedrock = /^\/model\/([^/]+)\/converse$/.exec(request.url ?? '');
        if (bedrock && request.method === 'POST') {
          const modelId = decodeURIComponent(bedrock[1] as string);
          calls.push({ service: 'bedrock-runtime', action: 'Converse', caller, input: { modelId, ...input } });
          return reply(response, 200, contentType, converse(modelId, input, caller));
        }
        const handler = handlers[target];
        if (!handler)
          throw new ServiceError(400, 'UnknownOperationException', `no stand-in for ${target || request.url}`);
        const call: StandInCall = {
          service: target.split('.')[0] as string,
          action: target.split('.')[1] as string,
          caller,
          input,
        };
        calls.push(call);
        call.output = handler(input, caller);
        return reply(response, 200, contentType, call.output);
      } catch (error) {
        const e =
          error instanceof ServiceError
            ? error
            : new ServiceError(500, 'InternalFailure', String((error as Error).message));
        return reply(
          response,
          e.status,
          contentType,
          { __type: e.type, message: e.message },
          {
            'x-amzn-errortype': e.type.replace(/^.*#/, ''),
            ...(target.startsWith('AmazonSQS.')
              ? { 'x-amzn-query-error': `${e.type.replace(/^.*#/, '')};Sender` }
              : {}),
          },
        );
      }
    });
  };
  // HTTP/1.1 for the JSON protocols; HTTP/2 (cleartext, prior knowledge) for Bedrock Runtime, whose client speaks only h2
  const server: Server = createServer(serve);
  const h2 = createHttp2Server(serve);
  const sessions = new Set<ServerHttp2Session>();
  h2.on('session', (session: ServerHttp2Session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
  });
  await Promise.all([
    new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve)),
    new Promise<void>((resolve) => h2.listen(0, '127.0.0.1', resolve)),
  ]);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const h2Url = `http://127.0.0.1:${(h2.address() as AddressInfo).port}`;
  return {
    url,
    state,
    calls,
    authorize,
    endpointEnv: {
      AWS_ENDPOINT_URL_SECRETS_MANAGER: url,
      AWS_ENDPOINT_URL_SSM: url,
      AWS_ENDPOINT_URL_SQS: url,
      AWS_ENDPOINT_URL_COGNITO_IDENTITY_PROVIDER: url,
      AWS_ENDPOINT_URL_BEDROCK_RUNTIME: h2Url,
    },
    close: async () => {
      // the SDK clients keep their connections (HTTP/1.1 keep-alive, h2 sessions) open: end them, or close waits on them
      server.closeAllConnections();
      for (const session of sessions) session.destroy();
      await Promise.all([
        new Promise<void>((resolve) => server.close(() => resolve())),
        new Promise<void>((resolve) => h2.close(() => resolve())),
      ]);
    },
  };
}
