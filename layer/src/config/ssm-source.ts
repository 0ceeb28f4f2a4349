import { SSMProvider } from '@aws-lambda-powertools/parameters/ssm';
import { SSMClient } from '@aws-sdk/client-ssm';
import type { ParameterSource } from './parameter-source.ts';

/**
 * Parameters from SSM Parameter Store, fetched by path (recursive, every page,
 * SecureStrings decrypted) through Powertools Parameters. Powertools' own
 * cache is bypassed (`forceFetch`): PolicyStore decides when to fetch and
 * keeps the last good values when a fetch fails, which a plain expiring cache
 * would not.
 */
export class SsmParameterSource implements ParameterSource {
  readonly #provider: SSMProvider;

  constructor(client: SSMClient = new SSMClient({})) {
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
}
