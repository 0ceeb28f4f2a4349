import { SSMProvider } from '@aws-lambda-powertools/parameters/ssm';
import { PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { AWS_CLIENT_OPTIONS } from '../redis/aws-clients.ts';
import type { ParameterSource, ParameterWriter } from './parameter-source.ts';

/**
 * Parameters from SSM Parameter Store, fetched by path (recursive, every page,
 * SecureStrings decrypted) through Powertools Parameters. Powertools' own
 * cache is bypassed (`forceFetch`): PolicyStore decides when to fetch and
 * keeps the last good values when a fetch fails, which a plain expiring cache
 * would not.
 */
export class SsmParameterSource implements ParameterSource, ParameterWriter {
  readonly #provider: SSMProvider;
  readonly #client: SSMClient;

  constructor(client: SSMClient = new SSMClient(AWS_CLIENT_OPTIONS)) {
    this.#client = client;
    this.#provider = new SSMProvider({ awsSdkV3Client: client });
  }

  async fetchAll(path: string): Promise<Record<string, string>> {
    const values = await this.#provider.getMultiple(path, { recursive: true, decrypt: true, forceFetch: true });
    const parameters: Record<string, string> = {};
    for (const [relative, value] of Object.entries(values ?? {})) {
      if (typeof value === 'string') parameters[`${path}/${relative}`] = value;
    }
    return parameters;
  }

  /** Writes a policy override as a String parameter (SecureStrings are put by the secrets script, never here). */
  async put(name: string, value: string): Promise<void> {
    await this.#client.send(new PutParameterCommand({ Name: name, Value: value, Type: 'String', Overwrite: true }));
  }
}
