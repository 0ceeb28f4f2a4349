/**
 * `npm run secrets:put -- <stage> <file.json>`: puts the platform's secrets as
 * SSM SecureStrings under /ratelimit/<stage>/secrets/<consumer>/ (config/secrets.ts), encrypted with the
 * data stack's key (alias/ratelimit-<stage>). CloudFormation cannot create
 * SecureStrings, so the stacks never hold these values: the functions read
 * them by path at runtime.
 *
 * The file maps each secret's name to its value:
 *   { "email-pepper": "…", "device-cookie-key": "…", "slack-signing-secret": "…", "telegram-bot-<bot>": "…", "mattermost-bot-token": "…", "api-key-pepper": "…" }
 * Each value must pass its rule (config/secrets.ts: 16+ characters; a
 * Telegram secret token 32–256 of A-Z a-z 0-9 _ -). Values are never
 * printed; the file is yours to delete afterwards.
 */
import { readFileSync } from 'node:fs';
import { PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { parameterPath, secretParameter } from '@platform/rate-limit/config';
import { secretFolder, secretValueProblem } from '../config/secrets.ts';

/** A secret's name: letters, digits, dashes; which ones the platform reads, and where, is config/secrets.ts. */
const SECRET_NAME = /^[a-z][a-z0-9_-]{0,80}$/i;

export class InvalidSecretsError extends Error {
  override readonly name = 'InvalidSecretsError';
}

export function parseSecrets(json: unknown): Record<string, string> {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new InvalidSecretsError('the file must be a JSON object of name → value');
  }
  const secrets: Record<string, string> = {};
  for (const [name, value] of Object.entries(json)) {
    if (!SECRET_NAME.test(name) || secretFolder(name) === undefined) {
      throw new InvalidSecretsError(`"${name}" is not a secret the platform reads`);
    }
    const problem = secretValueProblem(name, value);
    if (problem !== undefined) throw new InvalidSecretsError(`${name}: ${problem}`);
    secrets[name] = value as string;
  }
  if (Object.keys(secrets).length === 0) throw new InvalidSecretsError('the file names no secret');
  return secrets;
}

/** Puts each secret; returns the parameter names written (never the values). */
export async function putSecrets(client: SSMClient, stage: string, secrets: Record<string, string>): Promise<string[]> {
  const written: string[] = [];
  for (const [name, value] of Object.entries(secrets)) {
    // in the folder of the consumer that reads it: each function's role is granted its own folder only
    const parameter = secretParameter(parameterPath(stage), secretFolder(name) as string, name);
    await client.send(
      new PutParameterCommand({
        Name: parameter,
        Value: value,
        Type: 'SecureString',
        KeyId: `alias/ratelimit-${stage}`,
        Overwrite: true,
      }),
    );
    written.push(parameter);
  }
  return written;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [stage, file] = process.argv.slice(2);
  if (!stage || !/^[a-z][a-z0-9-]{0,19}$/.test(stage) || !file) {
    console.error('usage: npm run secrets:put -- <stage> <secrets.json>');
    process.exit(2);
  }
  try {
    const written = await putSecrets(new SSMClient({}), stage, parseSecrets(JSON.parse(readFileSync(file, 'utf8'))));
    for (const name of written) console.log(`put ${name} (SecureString, alias/ratelimit-${stage})`);
  } catch (error) {
    console.error(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
    process.exit(1);
  }
}
