/**
 * The optional nginx front (npm run nginx:conf): rendered from the same
 * config/outer-line.json and route table as the gateway and the CDK app, accepted by
 * `nginx -t`, and, run for real in front of the gateway, it throttles a burst
 * with 429 and passes the client's address so per-IP limits still hold.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as wait } from 'node:timers/promises';
import { routes } from '../../functions/routes.ts';
import { NGINX_PROXY_ADDRESS, renderNginxConf } from '../../scripts/nginx-conf.ts';
import { freePort } from '../../scripts/redis-process.ts';
import { consumers, type TestPlatform } from '../support/consumers.ts';
import { call, loopbackAddress } from '../support/http.ts';

function nginxVersion(): string | undefined {
  try {
    return execFileSync('nginx', ['-v'], { stdio: ['ignore', 'ignore', 'pipe'] }).toString() || 'nginx';
  } catch (error) {
    return (error as { code?: string }).code === 'ENOENT' ? undefined : 'nginx';
  }
}
// .ci/run installs nginx-light; a developer machine without it skips the runs below, saying so
const SKIP = nginxVersion() === undefined ? 'nginx is not installed (apt-get install nginx-light)' : false;

let platform: TestPlatform;
before(async () => {
  process.env.GATEWAY_TRUSTED_PROXY = NGINX_PROXY_ADDRESS; // nginx's own address (proxy_bind), not every local client's
  platform = await consumers();
});
after(() => platform.close());

describe('The nginx outer line (npm run nginx:conf)', () => {
  it('gives every route of the table its throttle: its own location and zone', () => {
    const conf = renderNginxConf();
    for (const route of routes) assert.match(conf, new RegExp(`zone=route_${route.id}[: ]`), route.id);
  });

  it('is accepted by nginx -t', { skip: SKIP }, () => {
    const prefix = mkdtempSync(join(tmpdir(), 'rl-nginx-'));
    const conf = join(prefix, 'nginx.conf');
    writeFileSync(conf, renderNginxConf());
    try {
      execFileSync('nginx', ['-t', '-q', '-p', prefix, '-c', conf], { stdio: 'pipe' });
    } finally {
      rmSync(prefix, { recursive: true, force: true });
    }
  });

  it('in front of the gateway: throttles a burst with 429 and keys limits on the client address', {
    skip: SKIP,
  }, async () => {
    const prefix = mkdtempSync(join(tmpdir(), 'rl-nginx-'));
    const listen = await freePort();
    const gatewayPort = Number(new URL(platform.base).port);
    const conf = join(prefix, 'nginx.conf');
    const line = {
      stageThrottle: { rateLimit: 1, burstLimit: 10 },
      ipRateRule: { limit: 1000, evaluationWindowSeconds: 60 },
    };
    writeFileSync(conf, renderNginxConf(line, { listen, gateway: gatewayPort }));
    const nginx: ChildProcess = spawn('nginx', ['-p', prefix, '-c', conf], { stdio: 'ignore' });
    try {
      const base = `http://127.0.0.1:${listen}`;
      for (let i = 0; i < 100; i++) {
        if (
          await call(base, { path: '/' }).then(
            () => true,
            () => false,
          )
        )
          break;
        await wait(20); // polling nginx's start, bounded
      }
      const login = (from: string) =>
        call(base, {
          method: 'POST',
          path: '/auth/login',
          from,
          body: JSON.stringify({ email: 'a@example.com', password: 'x' }),
        });
      const [a, b] = [await login(loopbackAddress()), await login(loopbackAddress())];
      assert.equal(
        a.headers.ratelimit,
        '"login-ip";r=19;t=900, "login-ip48";r=199;t=900',
        'each client counted under its own address',
      );
      assert.equal(b.headers.ratelimit, '"login-ip";r=19;t=900, "login-ip48";r=199;t=900');
      // past nginx, straight to the gateway from the default local address: X-Real-IP is not believed
      const victim = loopbackAddress();
      await call(platform.base, {
        method: 'POST',
        path: '/auth/login',
        from: '127.0.0.1',
        headers: { 'X-Real-IP': victim },
        body: '{}',
      });
      assert.equal(
        (await login(victim)).headers.ratelimit,
        '"login-ip";r=19;t=900, "login-ip48";r=199;t=900',
        'the spoofed IP was never counted',
      );
      const burst = await Promise.all(
        Array.from({ length: 30 }, () => call(base, { path: '/v1/items', from: loopbackAddress() })),
      );
      assert.ok(
        burst.filter((r) => r.status === 429).length >= 15,
        `nginx refused ${burst.filter((r) => r.status === 429).length} of 30`,
      );
    } finally {
      nginx.kill('SIGQUIT');
      rmSync(prefix, { recursive: true, force: true });
    }
  });
});
