/**
 * The platform's secrets (SSM SecureStrings) and where each lives: under
 * `<parameter path>/secrets/<consumer>/<name>`, in the folder of the consumer
 * that reads it, so each function's role is granted its own folder and no
 * other (login never holds the Slack signing secret). The policies are read
 * apart, from `defaults/` and `overrides/`. The CDK app, `npm run
 * secrets:put` and the local parameters file follow this one list, and
 * `secrets:put` the rule each value must pass (`secretValueProblem`).
 */
import { PARAMETER_FOLDERS, secretsFolder } from '@platform/rate-limit/config';
import * as v from 'valibot';

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

/**
 * A Telegram bot's secret token (`telegram-bot-<bot>`, setWebhook's
 * `secret_token`): Telegram takes 1–256 characters of A-Z a-z 0-9 _ -, and
 * we ask for 32 or more. It is a static bearer token, and an address past
 * `telegram-ip` still has each guess compared (a wrong one answered 429, not
 * 401), so its length is what stands against guessing.
 */
const TelegramSecretToken = v.pipe(
  v.string('the value must be a string'),
  v.regex(/^[A-Za-z0-9_-]*$/, "a Telegram secret token takes only Telegram's alphabet, A-Z a-z 0-9 _ -"),
  v.minLength(32, 'a Telegram secret token must be at least 32 characters'),
  v.maxLength(256, 'a Telegram secret token must be at most 256 characters (Telegram refuses longer)'),
);

/** Every other secret: a string of at least 16 characters. */
const SecretValue = v.pipe(
  v.string('the value must be a string'),
  v.minLength(16, 'the value must be at least 16 characters'),
);

/**
 * The rule a secret's value breaks, or undefined when it may be stored. The
 * reason names the rule, never the value.
 */
export function secretValueProblem(name: string, value: unknown): string | undefined {
  const schema = name.startsWith('telegram-bot-') ? TelegramSecretToken : SecretValue;
  const result = v.safeParse(schema, value, { abortEarly: true });
  return result.success ? undefined : result.issues[0].message;
}

/** What a consumer reading these secrets fetches, relative to the parameter path: the policies, and its secrets' folders. */
export function readPaths(secrets: readonly SecretName[]): string[] {
  return [
    PARAMETER_FOLDERS.defaults,
    PARAMETER_FOLDERS.overrides,
    ...new Set(secrets.map((name) => secretsFolder(SECRETS[name]))),
  ];
}
