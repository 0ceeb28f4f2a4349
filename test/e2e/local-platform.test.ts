/**
 * `npm start` on this machine: it starts its own durable Redis, serves checks,
 * answers bad input with a 400, and its counters survive a restart.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { freePort } from '../../scripts/redis-process.ts';

const DEV = new URL('../../scripts/dev.ts', import.meta.url).pathname;

async function start(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; base: string }> {
  const child = spawn(process.execPath, [DEV], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  for await (const chunk of child.stdout ?? []) {
    output += String(chunk);
    const match = /listening on (http:\/\/\S+)/.exec(output);
    if (match) return { child, base: match[1] as string };
  }
  throw new Error(`npm start ended before listening:\n${output}`);
}

async function stop(child: ChildProcess): Promise<number | null> {
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const [code] = await exited;
  return code as number | null;
}

describe('The local platform (npm start)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'rl-dev-'));
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  it('serves checks from its own durable Redis, whose counters survive a restart', async () => {
    const env = { PORT: '0', LOCAL_DATA_DIR: dataDir, REDIS_PORT: String(await freePort()), REDIS_URL: '' };
    const first = await start(env);
    const check = async (base: string, query: string) => {
      const response = await fetch(`${base}/check?${query}`);
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    try {
      const one = await check(first.base, 'policy=login-ip&key=192.0.2.1');
      assert.equal(one.status, 200);
      assert.equal((one.body.binding as { remaining: number }).remaining, 19);
      const bad = await check(first.base, 'policy=login-ip&key=someone@example.com');
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error, 'invalid_check');
    } finally {
      assert.equal(await stop(first.child), 0);
    }

    const second = await start(env);
    try {
      const again = await check(second.base, 'policy=login-ip&key=192.0.2.1');
      assert.equal((again.body.binding as { remaining: number }).remaining, 18, 'the first check survived the restart');
    } finally {
      assert.equal(await stop(second.child), 0);
    }
  });
});
