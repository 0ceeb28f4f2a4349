/**
 * `npx ratelimit` against a deployed stage: with `RATE_LIMIT_ADMIN_URL` set
 * to the stage's admin function URL (the stack output `AdminUrl`), the
 * command line is sent there SigV4-signed with your AWS credentials (the
 * SDK's chain: AWS_PROFILE, SSO, environment), and the function runs it
 * inside the VPC; the audit lines name your IAM identity. Unset, the CLI runs
 * locally as before (cli/commands.ts).
 */
import { createHash, createHmac } from 'node:crypto';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider, SourceData } from '@smithy/types';
import type { CliOutput } from './commands.ts';

/** A function URL: `https://<url-id>.lambda-url.<region>.on.aws/`. */
const FUNCTION_URL = /^https:\/\/[a-z0-9]+\.lambda-url\.([a-z]{2}(?:-[a-z]+)+-\d)\.on\.aws\/?$/;

const bytes = (data: SourceData): string | Uint8Array =>
  typeof data === 'string'
    ? data
    : ArrayBuffer.isView(data)
      ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
      : new Uint8Array(data);

/** SHA-256 (and its HMAC) as the signer wants it, from node:crypto. */
class Sha256 {
  readonly #hash;
  constructor(secret?: SourceData) {
    this.#hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: SourceData): void {
    this.#hash.update(bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.#hash.digest());
  }
}

export interface RemoteOptions {
  /** @default the SDK's default credential chain */
  readonly credentials?: AwsCredentialIdentity | AwsCredentialIdentityProvider;
  /** The request itself (tests point it at a stand-in). @default fetch */
  readonly fetch?: typeof fetch;
  /** Where a test sends it instead of the URL's host (the signature still names the URL's). */
  readonly endpoint?: string;
}

/** Runs the command line on the admin function behind `url`; the exit code is the function's. */
export async function runRemote(
  url: string,
  argv: readonly string[],
  io: CliOutput,
  options: RemoteOptions = {},
): Promise<number> {
  const match = FUNCTION_URL.exec(url);
  if (!match) {
    io.stderr(`ratelimit: RATE_LIMIT_ADMIN_URL must be a function URL (https://<id>.lambda-url.<region>.on.aws/)\n`);
    return 2;
  }
  const target = new URL(url);
  const body = JSON.stringify({ argv });
  const signer = new SignatureV4({
    service: 'lambda',
    region: match[1] as string,
    credentials: options.credentials ?? defaultProvider(),
    sha256: Sha256,
  });
  let signed: { headers: Record<string, string> };
  try {
    signed = await signer.sign({
      method: 'POST',
      protocol: 'https:',
      hostname: target.hostname,
      path: '/',
      headers: { host: target.hostname, 'content-type': 'application/json' },
      body,
    });
  } catch (error) {
    io.stderr(`ratelimit: no AWS credentials to sign with (${(error as Error).message})\n`);
    return 1;
  }
  const send = options.fetch ?? fetch;
  let response: Response;
  try {
    response = await send(options.endpoint ?? url, { method: 'POST', headers: signed.headers, body });
  } catch (error) {
    io.stderr(`ratelimit: the admin function could not be reached (${(error as Error).message})\n`);
    return 1;
  }
  const text = await response.text();
  if (response.status !== 200) {
    // 403: the signature or the identity was refused (no lambda:InvokeFunctionUrl for you), or no IAM caller
    io.stderr(`ratelimit: the admin function answered ${response.status}: ${text.slice(0, 500)}\n`);
    return response.status === 400 ? 2 : 1;
  }
  let answer: { exitCode?: unknown; stdout?: unknown; stderr?: unknown };
  try {
    answer = JSON.parse(text) as typeof answer;
  } catch {
    io.stderr('ratelimit: the admin function answered something other than JSON\n');
    return 1;
  }
  if (typeof answer.stdout === 'string') io.stdout(answer.stdout);
  if (typeof answer.stderr === 'string') io.stderr(answer.stderr);
  return typeof answer.exitCode === 'number' ? answer.exitCode : 1;
}
