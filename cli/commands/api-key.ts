/**
 * `api-key new`: a fresh key and the registry entry it is known by (its keyed
 * hash), for a new caller or for re-keying one (docs/configuration.md, "API
 * keys"). The key is printed once, here only; nothing is written.
 */
import { newApiKey } from '../../config/api-key.ts';
import { CliError, defineCommand, EXIT } from '../command.ts';
import { out } from '../context.ts';
import { apiKeyHashOf } from '../keys.ts';

export const apiKey = defineCommand({
  name: 'api-key',
  usage: 'api-key new',
  summary: ['a new API key and its registry entry (its keyed hash)'],
  options: {},
  async run(context, rest) {
    if (rest[0] !== 'new') throw new CliError(EXIT.usage, 'api-key new');
    const key = newApiKey();
    const keyHash = apiKeyHashOf(context, key);
    out(
      context,
      `api key (give it to its owner; it is shown once): ${key}\nits registry entry: ${keyHash}  (SSM <API_KEYS_PARAMETER_PATH>/${keyHash}, or a key of config/local-api-keys.json)`,
      { apiKey: key, keyHash },
    );
    return EXIT.ok;
  },
});
