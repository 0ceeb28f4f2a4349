/**
 * A deployed API without its key registry's path (API_KEYS_PARAMETER_PATH
 * unset in Lambda) answers 503 not_configured and logs the setting: it never
 * falls back to the repository's demo keys.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { HttpEvent } from '@platform/rate-limit/middleware';
import { apiKeyAuth, useRegistry } from '../../functions/api/auth.ts';
import { platform } from '../../functions/shared/platform.ts';
import { restEvent } from '../support/events.ts';

describe('The API in Lambda without its key registry', () => {
  const saved = { name: process.env.AWS_LAMBDA_FUNCTION_NAME, path: process.env.API_KEYS_PARAMETER_PATH };
  // the local parameters (the pepper among them), as a local run reads them
  process.env.RATE_LIMIT_PARAMETERS_FILE ||= new URL('../../config/local-parameters.json', import.meta.url).pathname;
  after(() => {
    for (const [name, value] of [
      ['AWS_LAMBDA_FUNCTION_NAME', saved.name],
      ['API_KEYS_PARAMETER_PATH', saved.path],
    ] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    platform().redis.disconnect();
  });

  it('answers a demo key 503 not_configured, and logs which setting is missing', async () => {
    await platform().policies.ready(); // the pepper is there: only the registry is missing
    process.env.AWS_LAMBDA_FUNCTION_NAME = 'ratelimit-prod-api';
    delete process.env.API_KEYS_PARAMETER_PATH;
    useRegistry(undefined as never); // as a fresh container: the registry is chosen from the settings
    const logged: unknown[] = [];
    const logger = platform().logger;
    const original = logger.error.bind(logger);
    logger.error = ((...args: unknown[]) => void logged.push(args)) as typeof logger.error;
    try {
      const event = restEvent({ headers: { 'x-api-key': 'rk_localDemoPartnerKeyNotASecret000' } }) as HttpEvent;
      await assert.rejects(
        (apiKeyAuth.before as (request: unknown) => Promise<void>)({ event, context: {}, internal: {} }),
        (error: { statusCode?: number; message?: string }) => {
          assert.equal(error.statusCode, 503);
          assert.match(String(error.message), /not_configured/);
          return true;
        },
      );
    } finally {
      logger.error = original;
    }
    assert.match(JSON.stringify(logged), /API_KEYS_PARAMETER_PATH/);
  });
});
