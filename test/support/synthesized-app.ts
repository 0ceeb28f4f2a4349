/**
 * The synthesized app, run from cdk.out alone: every Lambda function of the
 * platform stack from its template (code asset, handler, layer assets,
 * environment, memory, timeout), each in its own Node process laid out as
 * Lambda lays it out (the asset alone in its task folder, the layers under
 * /opt, the runtime's SDK, module resolution as scripts/lambda-resolve.ts),
 * and the template's REST API resources and methods served over HTTP.
 *
 * CloudFormation references in the environment (and in the IAM policies the
 * AWS stand-ins enforce) are resolved by ONE table, `STAND_INS`, below:
 *
 * | reference                                         | local stand-in                                              |
 * | ------------------------------------------------- | ----------------------------------------------------------- |
 * | ElastiCache/MemoryDB endpoint address, port       | the suite's TLS Redis Cluster (its first node)              |
 * | Secrets Manager secret (Ref)                      | an ARN the Secrets Manager stand-in serves the Redis credentials under (the test says whose) |
 * | SQS queue (Ref, Arn, QueueName)                   | `https://sqs.<region>.amazonaws.com/<account>/<logical id>`, held by the SQS stand-in |
 * | EventBridge bus (Ref, Name, Arn)                  | its name; the local bus the pipe stand-in delivers to       |
 * | Cognito user pool (Ref, Arn), app client (Ref)    | `<region>_<logical id>`, `client<logical id>`: the Cognito stand-in's pool |
 * | SSM parameter (Ref)                               | its name, in the SSM stand-in                               |
 * | KMS key (Arn), Lambda function (Arn), alias (Ref), IAM role (Arn) | ARNs of the logical id (no stand-in calls them) |
 * | SNS topic (Ref)                                   | an ARN of the logical id: what a pipe to it publishes is kept in `topics` |
 * | `AWS::Region`, `AWS::AccountId`, `AWS::Partition` | the stage file's region and account, `aws`                  |
 * | Bedrock model ids                                 | literal in the template: the stand-in serves the foundation models the LLM role is granted |
 *
 * Besides the template's environment a function gets only what Lambda's
 * runtime sets (AWS_LAMBDA_FUNCTION_NAME, _MEMORY_SIZE, AWS_REGION,
 * credentials — here an access key naming the function, so the stand-ins
 * can apply its role's policies), `AWS_ENDPOINT_URL_<SERVICE>` for the
 * stand-ins, and NODE_EXTRA_CA_CERTS with the local Redis CA (standing in
 * for the public CA ElastiCache's certificates chain to, which Lambda trusts).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { lambdaNodeArgs } from '../../scripts/lambda-layout.ts';
import { type Authorize, type AwsStandIns, startAwsStandIns } from './aws-stand-ins.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const RUNTIME = join(ROOT, 'scripts', 'lambda-runtime.ts');

type Resource = { Type: string; Properties?: Record<string, unknown> };
export interface Template {
  Resources: Record<string, Resource>;
  Outputs?: Record<string, { Value: unknown; Export?: { Name: unknown } }>;
}

export interface Assembly {
  readonly dir: string;
  readonly platform: Template;
  readonly data: Template;
  /** Asset hash → its folder in cdk.out (the stacks' assets manifests). */
  readonly assets: ReadonlyMap<string, string>;
}

export function readAssembly(dir: string, stage: string): Assembly {
  const read = (name: string) => JSON.parse(readFileSync(join(dir, name), 'utf8'));
  const assets = new Map<string, string>();
  for (const stack of [`RateLimitPlatform-${stage}`, `RateLimitData-${stage}`]) {
    const manifest = read(`${stack}.assets.json`) as { files: Record<string, { source: { path: string } }> };
    for (const [hash, file] of Object.entries(manifest.files)) assets.set(hash, join(dir, file.source.path));
  }
  return {
    dir,
    platform: read(`RateLimitPlatform-${stage}.template.json`),
    data: read(`RateLimitData-${stage}.template.json`),
    assets,
  };
}

/** Where the references point: the stage's place and the suite's Redis. */
export interface StandInPlace {
  readonly region: string;
  readonly account: string;
  /** `host:port` of a node of the local Redis Cluster. */
  readonly redisNode: string;
}

type StandIn = (place: StandInPlace, id: string, resource: Resource) => string;
const arn = (place: StandInPlace, service: string, rest: string) =>
  `arn:aws:${service}:${place.region}:${place.account}:${rest}`;

/** THE table: `<resource type> <Ref | attribute>` → the local value it resolves to. */
export const STAND_INS: Readonly<Record<string, StandIn>> = {
  'AWS::ElastiCache::ReplicationGroup ConfigurationEndPoint.Address': (p) => p.redisNode.split(':')[0] as string,
  'AWS::ElastiCache::ReplicationGroup ConfigurationEndPoint.Port': (p) => p.redisNode.split(':')[1] as string,
  'AWS::MemoryDB::Cluster ClusterEndpoint.Address': (p) => p.redisNode.split(':')[0] as string,
  'AWS::SecretsManager::Secret Ref': (p, id) => arn(p, 'secretsmanager', `secret:${id}-AbCdEf`),
  'AWS::SQS::Queue Ref': (p, id) => `https://sqs.${p.region}.amazonaws.com/${p.account}/${id}`,
  'AWS::SQS::Queue Arn': (p, id) => arn(p, 'sqs', id),
  'AWS::SQS::Queue QueueName': (_, id) => id,
  'AWS::Events::EventBus Ref': (_, __, r) => String(r.Properties?.Name),
  'AWS::Events::EventBus Name': (_, __, r) => String(r.Properties?.Name),
  'AWS::Events::EventBus Arn': (p, _, r) => arn(p, 'events', `event-bus/${String(r.Properties?.Name)}`),
  'AWS::Cognito::UserPool Ref': (p, id) => `${p.region}_${id}`,
  'AWS::Cognito::UserPool Arn': (p, id) => arn(p, 'cognito-idp', `userpool/${p.region}_${id}`),
  'AWS::Cognito::UserPoolClient Ref': (_, id) => `client${id}`,
  'AWS::SSM::Parameter Ref': (_, __, r) => String(r.Properties?.Name),
  'AWS::KMS::Key Arn': (p, id) => arn(p, 'kms', `key/${id}`),
  'AWS::Lambda::Function Arn': (p, id) => arn(p, 'lambda', `function:${id}`),
  'AWS::Lambda::Alias Ref': (p, id) => arn(p, 'lambda', `function:${id}:live`),
  'AWS::SNS::Topic Ref': (p, id) => arn(p, 'sns', id),
  'AWS::IAM::Role Arn': (p, id) => `arn:aws:iam::${p.account}:role/${id}`,
};

/** Resolves a template value to a local one (THE table for references); an unknown reference throws, naming it. */
export function resolver(assembly: Assembly, place: StandInPlace): (value: unknown, where?: Template) => unknown {
  const templates = [assembly.platform, assembly.data];
  const pseudo: Record<string, string> = {
    'AWS::Region': place.region,
    'AWS::AccountId': place.account,
    'AWS::Partition': 'aws',
    'AWS::URLSuffix': 'amazonaws.com',
  };
  const reference = (where: Template, id: string, attribute: string): string => {
    if (attribute === 'Ref' && pseudo[id] !== undefined) return pseudo[id] as string;
    const resource = where.Resources[id];
    if (!resource) throw new Error(`the template references ${id}, which it lacks`);
    const standIn = STAND_INS[`${resource.Type} ${attribute}`];
    if (!standIn) throw new Error(`no local stand-in for ${resource.Type} ${attribute} (${id}): add one to STAND_INS`);
    return standIn(place, id, resource);
  };
  const resolve = (value: unknown, where: Template = assembly.platform): unknown => {
    if (value === null || typeof value !== 'object') return value;
    if (Array.isArray(value)) return value.map((v) => resolve(v, where));
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length !== 1) return Object.fromEntries(entries.map(([k, v]) => [k, resolve(v, where)]));
    const [[fn, arg]] = entries as [[string, unknown]];
    switch (fn) {
      case 'Ref':
        return reference(where, String(arg), 'Ref');
      case 'Fn::GetAtt': {
        const [id, attribute] = arg as [string, string];
        return reference(where, id, attribute);
      }
      case 'Fn::ImportValue': {
        const name = resolve(arg, where);
        for (const template of templates) {
          for (const output of Object.values(template.Outputs ?? {})) {
            if (output.Export && resolve(output.Export.Name, template) === name) return resolve(output.Value, template);
          }
        }
        throw new Error(`nothing exports ${String(name)}`);
      }
      case 'Fn::Join': {
        const [separator, parts] = arg as [string, unknown[]];
        return (resolve(parts, where) as unknown[]).join(separator);
      }
      case 'Fn::Split': {
        const [separator, text] = arg as [string, unknown];
        return String(resolve(text, where)).split(separator);
      }
      case 'Fn::Select': {
        const [index, list] = arg as [number, unknown];
        return (resolve(list, where) as unknown[])[Number(index)];
      }
      case 'Fn::Sub':
        return String(arg).replace(/\$\{([^}]+)\}/g, (_, name: string) => {
          const [id, attribute] = name.split('.');
          return attribute ? reference(where, id as string, attribute) : reference(where, name, 'Ref');
        });
      default:
        return Object.fromEntries(entries.map(([k, v]) => [k, resolve(v, where)]));
    }
  };
  return resolve;
}

/** What the template says a function is. */
export interface FunctionSpec {
  readonly logicalId: string;
  readonly name: string;
  readonly handler: string;
  readonly code: string;
  readonly layers: readonly string[];
  readonly environment: Readonly<Record<string, string>>;
  readonly memoryMb: number;
  readonly timeoutSeconds: number;
  readonly roleId: string;
}

const assetOf = (assembly: Assembly, s3Key: unknown): string => {
  const hash = String(s3Key).replace(/\.zip$/, '');
  const dir = assembly.assets.get(hash);
  if (!dir) throw new Error(`no asset ${hash} in cdk.out`);
  return dir;
};

export function functionSpecs(assembly: Assembly, resolve: ReturnType<typeof resolver>): FunctionSpec[] {
  const resources = assembly.platform.Resources;
  return Object.entries(resources)
    .filter(([, r]) => r.Type === 'AWS::Lambda::Function' && (r.Properties?.Code as { S3Key?: unknown })?.S3Key)
    .filter(([, r]) => String(r.Properties?.FunctionName ?? '').startsWith('ratelimit-'))
    .map(([logicalId, r]) => {
      const p = r.Properties as Record<string, unknown>;
      const layers = ((p.Layers ?? []) as { Ref: string }[]).map((layer) =>
        assetOf(
          assembly,
          (resources[layer.Ref] as unknown as { Properties: { Content: { S3Key: unknown } } }).Properties.Content.S3Key,
        ),
      );
      const variables = ((p.Environment as { Variables?: Record<string, unknown> })?.Variables ?? {}) as Record<
        string,
        unknown
      >;
      return {
        logicalId,
        name: String(p.FunctionName),
        handler: String(p.Handler),
        code: assetOf(assembly, (p.Code as { S3Key: unknown }).S3Key),
        layers,
        environment: Object.fromEntries(Object.entries(variables).map(([k, v]) => [k, String(resolve(v))])),
        memoryMb: Number(p.MemorySize ?? 128),
        timeoutSeconds: Number(p.Timeout ?? 3),
        roleId: (p.Role as { 'Fn::GetAtt': [string] })['Fn::GetAtt'][0],
      };
    });
}

/** Does one of the template's IAM policies on `roleId` allow `action` on `resource`? (Allow statements; conditions not evaluated.) */
export function templateAuthorizer(
  assembly: Assembly,
  resolve: ReturnType<typeof resolver>,
  roleOfCaller: (caller: string) => string | undefined,
): Authorize {
  const glob = (pattern: string) =>
    new RegExp(
      `^${pattern
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replaceAll('*', '.*')
        .replaceAll('?', '.')}$`,
    );
  const statementsOf = new Map<string, { actions: string[]; resources: string[] }[]>();
  for (const resource of Object.values(assembly.platform.Resources)) {
    if (resource.Type !== 'AWS::IAM::Policy') continue;
    const roles = ((resource.Properties?.Roles ?? []) as { Ref: string }[]).map((r) => r.Ref);
    const document = resolve(resource.Properties?.PolicyDocument) as {
      Statement: { Effect: string; Action: string | string[]; Resource: string | string[] }[];
    };
    for (const role of roles) {
      const list = statementsOf.get(role) ?? [];
      for (const st of document.Statement.filter((s) => s.Effect === 'Allow')) {
        list.push({ actions: [st.Action].flat(), resources: [st.Resource].flat() });
      }
      statementsOf.set(role, list);
    }
  }
  return (caller, action, resource) => {
    const role = roleOfCaller(caller);
    return (statementsOf.get(role ?? '') ?? []).some(
      (st) => st.actions.some((a) => glob(a).test(action)) && st.resources.some((r) => glob(r).test(resource)),
    );
  };
}

/** One function's process: invoked over IPC, as the Runtime API hands it events. */
export interface RunningFunction {
  readonly spec: FunctionSpec;
  /** What the function printed (its CloudWatch log). */
  readonly log: string[];
  readonly initError: { name: string; message: string } | undefined;
  invoke(event: unknown): Promise<{ result?: unknown; error?: { name: string; message: string } }>;
  stop(): void;
}

async function startFunction(
  spec: FunctionSpec,
  root: string,
  extraEnv: Readonly<Record<string, string>>,
): Promise<RunningFunction> {
  // /var/task: the code asset alone; /opt: each layer asset; /var/runtime/node_modules: the SDK Lambda ships
  const task = join(root, spec.logicalId, 'var', 'task');
  const opt = join(root, spec.logicalId, 'opt');
  const runtimeModules = join(root, spec.logicalId, 'var', 'runtime', 'node_modules');
  cpSync(spec.code, task, { recursive: true });
  for (const layer of spec.layers) cpSync(layer, opt, { recursive: true });
  mkdirSync(runtimeModules, { recursive: true });
  symlinkSync(join(ROOT, 'node_modules', '@aws-sdk'), join(runtimeModules, '@aws-sdk'), 'dir');
  const child: ChildProcess = fork(RUNTIME, [spec.handler, String(spec.timeoutSeconds)], {
    cwd: task,
    execArgv: [...lambdaNodeArgs, `--max-old-space-size=${Math.floor(spec.memoryMb * 0.9)}`],
    env: {
      PATH: process.env.PATH ?? '',
      NODE_PATH: [
        join(opt, 'nodejs', 'node24', 'node_modules'),
        join(opt, 'nodejs', 'node_modules'),
        runtimeModules,
      ].join(delimiter),
      LAMBDA_TASK_ROOT: task,
      AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs24.x',
      AWS_LAMBDA_FUNCTION_NAME: spec.name,
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(spec.memoryMb),
      AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
      // the function's credentials name it: the stand-ins apply its role's policies
      AWS_ACCESS_KEY_ID: spec.logicalId,
      AWS_SECRET_ACCESS_KEY: 'stand-in',
      AWS_SESSION_TOKEN: 'stand-in',
      TZ: ':UTC',
      ...extraEnv,
      ...spec.environment,
    },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const log: string[] = [];
  child.stdout?.on('data', (chunk: Buffer) => log.push(chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => log.push(chunk.toString('utf8')));
  const pending = new Map<number, (answer: { result?: unknown; error?: { name: string; message: string } }) => void>();
  let next = 0;
  const ready = await new Promise<{ initError?: { name: string; message: string } }>((resolve, reject) => {
    child.once('message', (m) => resolve(m as { initError?: { name: string; message: string } }));
    child.once('exit', (code) => reject(new Error(`${spec.name} exited during init (${code}): ${log.join('')}`)));
  });
  child.on('message', (m: { id?: number; result?: unknown; error?: { name: string; message: string } }) => {
    if (m.id === undefined) return;
    pending.get(m.id)?.(m);
    pending.delete(m.id);
  });
  return {
    spec,
    log,
    initError: ready.initError,
    invoke(event) {
      const id = next++;
      return new Promise((resolve) => {
        // Lambda's timeout: the invocation ends, "Task timed out"
        const timer = setTimeout(() => {
          pending.delete(id);
          resolve({
            error: { name: 'Sandbox.Timedout', message: `Task timed out after ${spec.timeoutSeconds} seconds` },
          });
        }, spec.timeoutSeconds * 1000);
        pending.set(id, (answer) => {
          clearTimeout(timer);
          resolve(answer);
        });
        child.send({ id, event });
      });
    },
    stop: () => child.kill(),
  };
}

/** The full path of an API Gateway resource, from its PathPart and its parents. */
function resourcePath(resources: Template['Resources'], id: string): string {
  const resource = resources[id];
  if (resource?.Type !== 'AWS::ApiGateway::Resource') return '';
  const parent = (resource.Properties?.ParentId as { Ref?: string } | undefined)?.Ref;
  return `${parent ? resourcePath(resources, parent) : ''}/${String(resource.Properties?.PathPart)}`;
}

/** The template's methods: path, HTTP method and the function its AWS_PROXY integration invokes. */
export function apiMethods(template: Template): { path: string; method: string; functionId: string }[] {
  return Object.values(template.Resources)
    .filter((r) => r.Type === 'AWS::ApiGateway::Method')
    .map((r) => {
      const p = r.Properties as Record<string, unknown>;
      const integration = p.Integration as { Type: string; Uri: unknown };
      const uri = JSON.stringify(integration.Uri);
      // the function itself, or (a safe rollout) its alias, which names the function it shifts
      const aliased = [...uri.matchAll(/"Ref":"([^"]+)"/g)]
        .map(([, id]) => template.Resources[id as string])
        .find((r) => r?.Type === 'AWS::Lambda::Alias');
      const target = aliased
        ? (aliased.Properties?.FunctionName as { Ref?: string } | undefined)?.Ref
        : /"Fn::GetAtt":\["([^"]+)","Arn"\]/.exec(uri)?.[1];
      if (integration.Type !== 'AWS_PROXY' || !target) throw new Error('a method without a Lambda proxy integration');
      return {
        path: resourcePath(template.Resources, (p.ResourceId as { Ref: string }).Ref),
        method: String(p.HttpMethod),
        functionId: target,
      };
    });
}

export interface SynthesizedApp {
  readonly url: string;
  readonly aws: AwsStandIns;
  readonly functions: ReadonlyMap<string, RunningFunction>;
  /** The events the pipe stand-in delivered, by bus name. */
  readonly buses: Map<string, { source: string; detailType: string; detail: unknown }[]>;
  /** What pipes published to topics, by topic ARN. */
  readonly topics: Map<string, string[]>;
  /** Runs the template's pipes once: what each moves from its queue to its bus. */
  drainPipes(): number;
  /** The function a route's method invokes, by `<METHOD> <path>`. */
  readonly served: ReadonlyMap<string, RunningFunction>;
  close(): Promise<void>;
}

export async function startSynthesizedApp(options: {
  readonly dir: string;
  readonly stage: string;
  readonly place: StandInPlace;
  readonly extraEnv: Readonly<Record<string, string>>;
  /** Fills the stand-ins as a deployer would have (secrets, users, API keys); gets the resolver. */
  readonly provision: (aws: AwsStandIns, resolve: ReturnType<typeof resolver>, assembly: Assembly) => void;
}): Promise<SynthesizedApp> {
  const assembly = readAssembly(options.dir, options.stage);
  const resolve = resolver(assembly, options.place);
  const specs = functionSpecs(assembly, resolve);
  const roleOf = new Map(specs.map((s) => [s.logicalId, s.roleId]));
  const pipes = Object.entries(assembly.platform.Resources).filter(([, r]) => r.Type === 'AWS::Pipes::Pipe');
  for (const [id, pipe] of pipes)
    roleOf.set(
      `pipe:${id}`,
      ((pipe.Properties as { RoleArn: unknown }).RoleArn as { 'Fn::GetAtt': [string] })['Fn::GetAtt'][0],
    );
  const authorize = templateAuthorizer(assembly, resolve, (caller) => roleOf.get(caller));
  const aws = await startAwsStandIns({ region: options.place.region, account: options.place.account, authorize });
  // the stack's queues and parameters exist once it is deployed
  for (const [id, r] of Object.entries(assembly.platform.Resources)) {
    if (r.Type === 'AWS::SQS::Queue') aws.state.queues.set(String(resolve({ Ref: id })), []);
    if (r.Type === 'AWS::SSM::Parameter') {
      aws.state.parameters.set(String(resolve(r.Properties?.Name)), {
        value: String(resolve(r.Properties?.Value)),
        type: 'String',
      });
    }
  }
  options.provision(aws, resolve, assembly);
  const root = mkdtempSync(join(tmpdir(), 'rl-synthesized-'));
  const env = {
    ...options.extraEnv,
    ...aws.endpointEnv,
    AWS_REGION: options.place.region,
    AWS_DEFAULT_REGION: options.place.region,
  };
  const running = await Promise.all(specs.map((spec) => startFunction(spec, root, env)));
  const functions = new Map(running.map((f) => [f.spec.logicalId, f]));
  const methods = apiMethods(assembly.platform);
  const served = new Map(methods.map((m) => [`${m.method} ${m.path}`, functions.get(m.functionId) as RunningFunction]));
  const buses = new Map<string, { source: string; detailType: string; detail: unknown }[]>();
  const topics = new Map<string, string[]>();

  const { restEvent } = await import('../../scripts/gateway.ts');
  // as API Gateway: a path without a greedy {proxy+} is tried first
  const matchers = methods
    .map((m) => ({
      ...m,
      regex: new RegExp(`^${m.path.replace(/\{[A-Za-z0-9]+\+\}/g, '(.+)').replace(/\{([A-Za-z0-9]+)\}/g, '([^/]+)')}$`),
      names: [...m.path.matchAll(/\{([A-Za-z0-9]+)\+?\}/g)].map((n) => n[1] as string),
    }))
    .sort((a, b) => Number(a.path.includes('+}')) - Number(b.path.includes('+}')));
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', async () => {
      const url = new URL(`http://localhost${request.url ?? '/'}`);
      const byPath = matchers.filter((m) => m.regex.test(url.pathname));
      const match = byPath.find((m) => m.method === request.method);
      const send = (status: number, body: string, headers: Record<string, string> = {}) => {
        response.writeHead(status, { 'Content-Type': 'application/json', ...headers });
        response.end(body);
      };
      if (!match) return send(403, '{"message":"Missing Authentication Token"}');
      const values = match.regex.exec(url.pathname)?.slice(1) ?? [];
      const params = Object.fromEntries(match.names.map((name, i) => [name, decodeURIComponent(values[i] ?? '')]));
      // API Gateway's sourceIp: the TCP peer (the test's clients connect from their own loopback addresses)
      const peer = (request.socket.remoteAddress ?? '127.0.0.1').replace(/^::ffff:/, '');
      const event = restEvent(
        request,
        { id: match.functionId, path: match.path },
        url,
        params,
        Buffer.concat(chunks),
        peer,
      );
      const answer = await (functions.get(match.functionId) as RunningFunction).invoke(event);
      const result = answer.result as
        | { statusCode?: number; body?: string; headers?: Record<string, string> }
        | undefined;
      // API Gateway's answers to a failed or malformed invocation
      if (answer.error || typeof result?.statusCode !== 'number')
        return send(502, '{"message":"Internal server error"}');
      return send(result.statusCode, result.body ?? '', result.headers ?? {});
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));

  function drainPipes(): number {
    let moved = 0;
    for (const [id, pipe] of pipes) {
      const p = pipe.Properties as Record<string, unknown>;
      const sourceArn = String(resolve(p.Source));
      const targetArn = String(resolve(p.Target));
      const caller = `pipe:${id}`;
      if (!authorize(caller, 'sqs:ReceiveMessage', sourceArn) || !authorize(caller, 'sqs:DeleteMessage', sourceArn)) {
        throw new Error(`pipe ${id} may not consume ${sourceArn}`);
      }
      const queueUrl = [...aws.state.queues.keys()].find((url) => sourceArn.endsWith(`:${url.split('/').at(-1)}`));
      if (queueUrl && targetArn.startsWith('arn:aws:sns:')) {
        // a pipe to a topic (the operations notices): each message body published as it is
        if (!authorize(caller, 'sns:Publish', targetArn)) throw new Error(`pipe ${id} may not publish to ${targetArn}`);
        const published = topics.get(targetArn) ?? [];
        for (const message of aws.state.queues.get(queueUrl)?.splice(0) ?? []) {
          published.push(message.body);
          moved++;
        }
        topics.set(targetArn, published);
        continue;
      }
      if (!authorize(caller, 'events:PutEvents', targetArn))
        throw new Error(`pipe ${id} may not put events on ${targetArn}`);
      const bus = /:event-bus\/(.+)$/.exec(targetArn)?.[1];
      if (!queueUrl || !bus)
        throw new Error(`pipe ${id}: source ${sourceArn} or target ${targetArn} is no queue or bus`);
      const target = p.TargetParameters as {
        InputTemplate?: string;
        EventBridgeEventBusParameters: { Source: string; DetailType: string };
      };
      const messages = aws.state.queues.get(queueUrl)?.splice(0) ?? [];
      for (const message of messages) {
        // the one input template the app uses: the message body (JSON) as the event's detail
        if (target.InputTemplate !== '<$.body>') throw new Error(`pipe ${id}: input template ${target.InputTemplate}`);
        const events = buses.get(bus) ?? [];
        events.push({
          source: target.EventBridgeEventBusParameters.Source,
          detailType: target.EventBridgeEventBusParameters.DetailType,
          detail: JSON.parse(message.body),
        });
        buses.set(bus, events);
        moved++;
      }
    }
    return moved;
  }

  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    aws,
    functions,
    buses,
    topics,
    drainPipes,
    served,
    async close() {
      for (const f of running) f.stop();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await aws.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
