/**
 * The platform's AWS SDK clients give up on an endpoint that accepts a
 * connection and never answers (a cold start must not hang on a broken SSM or
 * Secrets Manager endpoint): a timeout error, not a wait for the Lambda's end.
 */
import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetParametersByPathCommand, SSMClient } from '@aws-sdk/client-ssm';
import { AWS_CLIENT_OPTIONS } from '@platform/rate-limit/redis';

describe('AWS SDK clients (AWS_CLIENT_OPTIONS)', () => {
  it('time out against an endpoint that never answers, after their two attempts', { timeout: 30_000 }, async (t) => {
    const sockets: Socket[] = [];
    let connections = 0;
    const silent = createServer((socket) => {
      connections++;
      sockets.push(socket); // accepted, never answered
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    const endpoint = `http://127.0.0.1:${port}`;
    const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
    try {
      const started = performance.now();
      const ssm = new SSMClient({ ...AWS_CLIENT_OPTIONS, endpoint, region: 'eu-west-1', credentials });
      await assert.rejects(ssm.send(new GetParametersByPathCommand({ Path: '/ratelimit/prod' })), (error: Error) =>
        /timeout/i.test(`${error.name} ${error.message}`),
      );
      const secrets = new SecretsManagerClient({ ...AWS_CLIENT_OPTIONS, endpoint, region: 'eu-west-1', credentials });
      await assert.rejects(secrets.send(new GetSecretValueCommand({ SecretId: 'redis' })), (error: Error) =>
        /timeout/i.test(`${error.name} ${error.message}`),
      );
      t.diagnostic(
        `both gave up after ${Math.round(performance.now() - started)} ms in all (${connections} connections)`,
      );
      assert.equal(connections, 4, 'two attempts each');
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });
});
