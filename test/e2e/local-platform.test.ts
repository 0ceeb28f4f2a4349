/**
 * `npm start` on this machine: it starts its own durable Redis, serves the
 * route table through the local gateway, its counters survive a restart, it
 * never passes off a Redis it did not start as its own, and it says how to
 * install redis-server when there is none.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { startRedis } from '../../scripts/redis-process.ts';
import { runRatelimit } from '../support/cli.ts';

const DEV = new URL('../../scripts/dev.ts', import.meta.url).pathname;

function launch(env: NodeJS.ProcessEnv, args: string[] = []): ChildProcess {
  // not the suite's cluster: npm start brings its own Redis
  return spawn(process.execPath, [DEV, ...args], {
    env: { ...process.env, REDIS_URL: '', REDIS_CLUSTER_NODES: '', REDIS_AUTH_SECRET_FILE: '', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Starts npm start and waits for its sample curls (the last thing it prints); keeps reading its output. */
async function start(
  env: NodeJS.ProcessEnv,
  args: string[] = [],
): Promise<{ child: ChildProcess; base: string; output: string }> {
  const child = launch(env, args);
  let output = '';
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (chunk) => {
      output += String(chunk);
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match && output.includes('valid for 5 minutes')) resolve({ child, base: match[1] as string, output });
    });
    child.once('exit', () => reject(new Error(`npm start ended before listening:\n${output}`)));
  });
}

async function stop(child: ChildProcess): Promise<number | null> {
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const [code] = await exited;
  return code as number | null;
}

/** `npx ratelimit` as a user runs it beside npm start: no Redis named in the environment. */
function cli(args: string[], dataDir: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = {
    ...process.env,
    REDIS_URL: '',
    REDIS_CLUSTER_NODES: '',
    REDIS_AUTH_SECRET_FILE: '',
    LOCAL_DATA_DIR: dataDir,
  };
  return runRatelimit(args, env);
}

const login = (base: string) =>
  fetch(`${base}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'x@example.com', password: 'nope' }),
  });

describe('The local platform (npm start)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'rl-dev-'));
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  it('runs on the production shape with --prod-shape: TLS cluster with replicas, the functions ACL user', async () => {
    const platform = await start({ LOCAL_DATA_DIR: dataDir, EVENT_SINK_FILE: join(dataDir, 'prod-events.jsonl') }, [
      '--prod-shape',
    ]);
    try {
      assert.match(platform.output, /production shape\): localhost:\d+,localhost:\d+,localhost:\d+ — TLS only/);
      const response = await login(platform.base);
      assert.equal(response.status, 401);
      assert.equal(response.headers.get('ratelimit'), '"login-ip";r=19;t=900, "login-ip48";r=199;t=900');
    } finally {
      assert.equal(await stop(platform.child), 0);
    }
  });

  it('serves the routes from its own durable Redis, whose counters survive a restart', async () => {
    const env = { LOCAL_DATA_DIR: dataDir, EVENT_SINK_FILE: join(dataDir, 'events.jsonl') };
    const first = await start(env);
    try {
      assert.match(first.output, /POST\s+\/webhooks\/slack/);
      const response = await login(first.base);
      assert.equal(response.status, 401);
      assert.equal(response.headers.get('ratelimit'), '"login-ip";r=19;t=900, "login-ip48";r=199;t=900');
      // the CLI, naming no Redis, acts on this platform's (not on 6379, where another may listen)
      const inspected = await cli(['inspect', 'login-ip', '127.0.0.1', '--scope', '127.0.0.1', '--json'], dataDir);
      assert.equal(inspected.code, 0, inspected.stderr);
      assert.equal((JSON.parse(inspected.stdout) as { remaining: number }).remaining, 19);
    } finally {
      assert.equal(await stop(first.child), 0);
    }
    const stopped = await cli(['inspect', 'login-ip', '127.0.0.1', '--scope', '127.0.0.1'], dataDir);
    assert.equal(stopped.code, 1);
    assert.match(stopped.stderr, /Redis at 127\.0\.0\.1:\d+, npm start's .*is it running\?/);
    const second = await start(env);
    try {
      const again = await login(second.base);
      assert.equal(
        again.headers.get('ratelimit'),
        '"login-ip";r=18;t=900, "login-ip48";r=198;t=900',
        'the first attempt survived the restart',
      );
    } finally {
      assert.equal(await stop(second.child), 0);
    }
  });

  it('never uses a Redis it did not start: a taken port is left alone and a free one remembered', async () => {
    const foreign = await startRedis();
    const dir = mkdtempSync(join(tmpdir(), 'rl-dev-'));
    try {
      mkdirSync(join(dir, 'redis'), { recursive: true });
      writeFileSync(join(dir, 'redis', 'port'), `${foreign.port}\n`);
      const platform = await start({ LOCAL_DATA_DIR: dir });
      try {
        const used = Number(/redis-durable: redis:\/\/127\.0\.0\.1:(\d+)/.exec(platform.output)?.[1]);
        assert.notEqual(used, foreign.port);
        assert.equal(Number(readFileSync(join(dir, 'redis', 'port'), 'utf8')), used);
      } finally {
        assert.equal(await stop(platform.child), 0);
      }
    } finally {
      await foreign.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says how to install redis-server when there is none', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-dev-'));
    try {
      const child = launch({ LOCAL_DATA_DIR: dir, REDIS_SERVER_BIN: join(dir, 'no-such-redis-server') });
      let errors = '';
      child.stderr?.on('data', (chunk) => {
        errors += String(chunk);
      });
      const [code] = await once(child, 'exit');
      assert.equal(code, 1);
      assert.match(errors, /is not installed: apt-get install redis-server/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
