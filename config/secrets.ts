/**
 * The platform's secrets (SSM SecureStrings) and where each lives: under
 * `<parameter path>/secrets/<consumer>/<name>`, in the folder of the consumer
 * that reads it, so each function's role is granted its own folder and no
 * other (login never holds the Slack signing secret). The policies are read
 * apart, from `defaults/` and `overrides/`. The CDK app, `npm run
 * secrets:put` and the local parameters file follow this one list.
 */
import { PARAMETER_FOLDERS, secretsFolder } from '@platform/rate-limit/config';

/** Each secret's name (or, ending in `*`, its prefix: one per Telegram bot) and the consumer folder it lives in. */
export const SECRETS = {
  'email-pepper': 'login',
  'slack-signing-secret': 'slack',
  'telegram-bot-*': 'telegram',
  'mattermost-bot-token': 'mattermost-listener',
  'device-cookie-key': 'login',
  'api-key-pepper': 'api',
} as const;

export type SecretName = keyof typeof SECRETS;

/** The folder of a secret by its name (`telegram-bot-demo` → `telegram`), or undefined for a name the platform does not read. */
export function secretFolder(name: string): string | undefined {
  for (const [pattern, folder] of Object.entries(SECRETS)) {
    if (
      pattern.endsWith('*')
        ? name.startsWith(pattern.slice(0, -1)) && name.length > pattern.length - 1
        : name === pattern
    ) {
      return folder;
    }
  }
  return undefined;
}

/** What a consumer reading these secrets fetches, relative to the parameter path: the policies, and its secrets' folders. */
export function readPaths(secrets: readonly SecretName[]): string[] {
  return [
    PARAMETER_FOLDERS.defaults,
    PARAMETER_FOLDERS.overrides,
    ...new Set(secrets.map((name) => secretsFolder(SECRETS[name]))),
  ];
}
