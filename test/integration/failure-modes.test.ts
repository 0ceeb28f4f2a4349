/**
 * When Redis cannot decide: a closed port, a stalled server (SIGSTOP), a
 * restart, and a server at maxmemory under noeviction. Each deployment here is
 * private to this file, so stalling or filling it disturbs no other test.
 * Decision times are asserted against the policy's budget plus a margin for a
 * loaded 2-core CI machine; the figures themselves are reported as diagnostics.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Limiter, RedisClient } from '@platform/rate-limit';
import {
  compilePolicies,
  createLimiter,
  createRedisClient,
  type Decision,
  type RedisSettings,
  staticPolicies,
} from '@platform/rate-limit';
import { DeadlineError, guardedRedis } from '@platform/rate-limit/redis';
import { Cluster, type Command, Redis } from 'ioredis';
import { freePort, startRedis, startRedisCluster } from '../../scripts/redis-process.ts';

const BUDGET_MS = 100;
const MARGIN_MS = 150;

const catalogue = {
  closed: { strategy: 'slidingWindow', limit: 1000, window: '1 m', timeBudget: `${BUDGET_MS} ms` },
  open: { strategy: 'tokenBucket', capacity: 1000, refill: { tokens: 1000, every: '1 m' }, failureMode: 'open' },
};

interface Deployment {
  settings: RedisSettings;
  pause(): void;
  resume(): void;
  stopKeepingData(): Promise<void>;
  restart(): Promise<void>;
  stop(): Promise<void>;
  /** INFO memory figures of every master. */
  memory(client: RedisClient): Promise<{ used: number; max: number }[]>;
}

async function memoryOf(client: RedisClient): Promise<{ used: number; max: number }[]> {
  const nodes = 'nodes' in client ? client.nodes('master') : [client];
  return Promise.all(
    nodes.map(async (node) => {
      const info = await node.info('memory');
      const field = (name: string) => Number(new RegExp(`${name}:(\\d+)`).exec(info)?.[1]);
      return { used: field('used_memory'), max: field('maxmemory') };
    }),
  );
}

const deployments: { name: string; start(maxmemoryBytes?: number): Promise<Deployment> }[] = [
  {
    name: 'single node',
    async start(maxmemoryBytes = 0) {
      let server = await startRedis({ maxmemoryBytes });
      return {
        settings: { url: server.url },
        pause: () => server.pause(),
        resume: () => server.resume(),
        stopKeepingData: () => server.stop(true),
        restart: async () => {
          server = await server.restart();
        },
        stop: () => server.stop(),
        memory: memoryOf,
      };
    },
  },
  {
    name: 'cluster',
    async start(maxmemoryBytes = 0) {
      const cluster = await startRedisCluster(3, maxmemoryBytes);
      return {
        settings: { clusterNodes: cluster.nodeList.split(',') },
        pause: () => {
          for (const node of cluster.nodes) node.pause();
        },
        resume: () => {
          for (const node of cluster.nodes) node.resume();
        },
        stopKeepingData: () => cluster.stop(true),
        restart: () => cluster.restart(),
        stop: () => cluster.stop(),
        memory: memoryOf,
      };
    },
  },
];

async function timed(limiter: Limiter, policy: string, key = 'k'): Promise<{ decision: Decision; ms: number }> {
  const started = performance.now();
  const decision = await limiter.check({ policy, key });
  return { decision, ms: performance.now() - started };
}

function assertDegraded(result: { decision: Decision; ms: number }, allowed: boolean): void {
  assert.equal(result.decision.outcome, 'degraded');
  assert.equal(result.decision.allowed, allowed);
  assert.ok(result.ms < BUDGET_MS + MARGIN_MS, `decided in ${result.ms.toFixed(1)} ms`);
}

/** Checks until one is decided by Redis again; returns how long that took. */
async function untilRecovered(limiter: Limiter): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < 10_000) {
    const { decision } = await timed(limiter, 'closed', `recovery-${Math.random()}`);
    if (decision.outcome !== 'degraded') return performance.now() - started;
    await nextTurn(); // let ioredis' reconnect timers run between checks
  }
  throw new Error('checks did not recover within 10 s');
}

for (const deployment of deployments) {
  describe(`Failure modes on a ${deployment.name}`, () => {
    const quiet = { onDegraded: () => {} };

    it('answers within the budget from the failure mode when nothing listens on the port', async (t) => {
      const ports = await Promise.all([freePort(), freePort(), freePort()]);
      const settings: RedisSettings =
        deployment.name === 'cluster'
          ? { clusterNodes: ports.map((p) => `127.0.0.1:${p}`) }
          : { url: `redis://127.0.0.1:${ports[0]}` };
      const redis = createRedisClient(settings);
      const limiter = createLimiter({ redis, policies: staticPolicies(compilePolicies(catalogue)), ...quiet });
      try {
        for (let i = 0; i < 3; i++) {
          const closed = await timed(limiter, 'closed');
          const open = await timed(limiter, 'open');
          assertDegraded(closed, false);
          assertDegraded(open, true);
          assert.ok(closed.decision.outcome === 'degraded' && closed.decision.retryAfterMs > 0);
          t.diagnostic(`port closed: fail-closed in ${closed.ms.toFixed(1)} ms, fail-open in ${open.ms.toFixed(1)} ms`);
        }
      } finally {
        redis.disconnect();
      }
    });

    describe('with a running deployment', () => {
      let d: Deployment;
      let redis: RedisClient;
      let limiter: Limiter;
      before(async () => {
        d = await deployment.start();
        redis = createRedisClient(d.settings);
        limiter = createLimiter({ redis, policies: staticPolicies(compilePolicies(catalogue)), ...quiet });
      });
      after(async () => {
        redis.disconnect();
        await d.stop();
      });

      it('answers within the budget when Redis stalls, and decides again once it resumes', async (t) => {
        assert.equal((await timed(limiter, 'closed')).decision.outcome, 'allowed');
        d.pause();
        try {
          const closed = await timed(limiter, 'closed');
          const open = await timed(limiter, 'open');
          assertDegraded(closed, false);
          assertDegraded(open, true);
          assert.ok(closed.decision.outcome === 'degraded' && closed.decision.reason === 'timeout');
          t.diagnostic(`stalled: fail-closed in ${closed.ms.toFixed(1)} ms, fail-open in ${open.ms.toFixed(1)} ms`);
        } finally {
          d.resume();
        }
        assert.equal((await timed(limiter, 'closed', 'after-stall')).decision.outcome, 'allowed');
      });

      it('answers from the reply that came while the process itself stalled past the deadline, not "timeout"', async () => {
        // a Lambda throttled to its CPU share, a long GC: the deadline passes with Redis' answer already in the socket
        const key = `stalled-process-${Math.random()}`;
        assert.equal((await timed(limiter, 'closed', key)).decision.outcome, 'allowed');
        const access = guardedRedis(redis);
        const abandonedBefore = access.abandoned;
        const outcomes: string[] = [];
        for (let attempt = 0; attempt < 3; attempt++) {
          // from the check phase: the event loop's next phase is its timers (the deadline), then I/O (the reply)
          await nextTurn();
          const decision = limiter.check({ policy: 'closed', key });
          const stalledUntil = performance.now() + BUDGET_MS * 3; // Redis' answer is in well before the stall ends
          while (performance.now() < stalledUntil); // the process stalls; Redis answers meanwhile
          outcomes.push((await decision).outcome);
        }
        assert.deepEqual(outcomes, ['allowed', 'allowed', 'allowed']);
        assert.equal(access.abandoned, abandonedBefore, 'nothing given up');
      });

      it('never sends a check given up while its client was still connecting (a cold start against a stalled Redis)', async () => {
        // a new container's first check: its client connects lazily, and Redis does not answer the handshake in time
        const key = `cold-${Math.random()}`;
        // one check decided first (its script in the server's cache: sent late, the check would not need a repair)
        assert.equal((await timed(limiter, 'closed', key)).decision.outcome, 'allowed');
        const fresh = createRedisClient(d.settings);
        const coldLimiter = createLimiter({
          redis: fresh,
          policies: staticPolicies(compilePolicies(catalogue)),
          ...quiet,
        });
        try {
          d.pause();
          let given: { decision: Decision; ms: number };
          try {
            given = await timed(coldLimiter, 'closed', key);
          } finally {
            d.resume();
          }
          assertDegraded(given, false);
          await untilRecovered(coldLimiter);
          // sent once the connection was up, it would have debited a check its caller was refused for
          const peek = await coldLimiter.peek([{ policy: 'closed', key }]);
          assert.ok(peek.outcome === 'allowed', peek.outcome);
          assert.equal(peek.binding.remaining, 1000 - 1, 'nothing was counted for the check given up');
          assert.equal(guardedRedis(fresh).abandoned, 0);
        } finally {
          fresh.disconnect();
        }
      });

      it('counts checks abandoned at their deadline once a stalled Redis resumes (documented: the requests did happen)', async () => {
        // Prepare
        const key = `late-${Math.random()}`;
        assert.equal((await timed(limiter, 'closed', key)).decision.outcome, 'allowed');
        const access = guardedRedis(redis);
        const abandonedBefore = access.abandoned;
        // the commands the checks send, as ioredis gets them
        const sent: Promise<unknown>[] = [];
        const send = redis.sendCommand.bind(redis) as (command: Command) => unknown;
        redis.sendCommand = ((command: Command) => {
          sent.push(command.promise.then(String, (error: unknown) => error));
          return send(command);
        }) as typeof redis.sendCommand;
        d.pause();
        let late: Decision[];
        let abandoned: number;
        try {
          // Act: 20 checks answered "degraded" while their commands wait in the socket
          late = await Promise.all(Array.from({ length: 20 }, () => limiter.check({ policy: 'closed', key })));
          abandoned = access.abandoned;
        } finally {
          d.resume();
          redis.sendCommand = send as typeof redis.sendCommand;
        }
        const given = await Promise.all(sent);
        assert.equal(given.length, 20);
        assert.ok(
          given.every((error) => error instanceof DeadlineError),
          'each check gave up its own command at its deadline',
        );
        // Assess: each was refused (fail-closed), and each was debited when Redis ran it
        assert.ok(late.every((decision) => decision.outcome === 'degraded' && !decision.allowed));
        const peek = await limiter.peek([{ policy: 'closed', key }]);
        assert.ok(peek.outcome === 'allowed', peek.outcome);
        assert.equal(peek.binding.remaining, 1000 - 1 - 20, 'a peek reports what is left');
        // ioredis' own commands were given up (the guard's count), and their late answers counted back
        assert.equal(abandoned - abandonedBefore, 20);
        assert.equal(access.abandoned, 0, 'the late answers reached the given-up commands');
      });

      it("decides on a caller's client that auto-pipelines (sent through its methods), and keeps the deadline there", async () => {
        const pipelining = d.settings.clusterNodes
          ? new Cluster(
              d.settings.clusterNodes.map((node) => ({ host: '127.0.0.1', port: Number(node.split(':').at(-1)) })),
              { enableAutoPipelining: true, enableOfflineQueue: false },
            )
          : new Redis(d.settings.url as string, {
              enableAutoPipelining: true,
              enableOfflineQueue: false,
              maxRetriesPerRequest: 0,
            });
        pipelining.on('error', () => {});
        try {
          const piped = createLimiter({
            redis: pipelining,
            policies: staticPolicies(compilePolicies(catalogue)),
            ...quiet,
          });
          const key = `piped-${Math.random()}`;
          assert.equal((await timed(piped, 'open', key)).decision.outcome, 'allowed'); // connected, scripts loaded
          const checks = Array.from({ length: 5 }, () => piped.check({ policy: 'open', key }));
          assert.equal(pipelining.autoPipelineQueueSize, 5, "the checks wait in ioredis' auto-pipeline");
          const remaining = (await Promise.all(checks)).map((decision) =>
            decision.outcome === 'allowed' ? decision.binding.remaining : -1,
          );
          assert.deepEqual(remaining, [998, 997, 996, 995, 994]);
          d.pause();
          try {
            assertDegraded(await timed(piped, 'closed', key), false);
          } finally {
            d.resume();
          }
        } finally {
          pipelining.disconnect();
        }
      });

      it('resets the connection once too many commands wait on a stalled Redis, and recovers', {
        timeout: 10_000,
      }, async () => {
        const client = createRedisClient(d.settings);
        const bounded = createLimiter({
          redis: client,
          policies: staticPolicies(compilePolicies(catalogue)),
          maxAbandonedCommands: 5,
          ...quiet,
        });
        try {
          assert.equal((await timed(bounded, 'closed')).decision.outcome, 'allowed');
          const closed = once(client, 'close');
          d.pause();
          let decisions: Decision[];
          try {
            decisions = await Promise.all(
              Array.from({ length: 8 }, (_, i) => bounded.check({ policy: 'closed', key: `s${i}` })),
            );
            // the sixth abandoned command reset the connection: nothing is left queued on it
            await closed;
          } finally {
            d.resume();
          }
          assert.ok(decisions.every((decision) => decision.outcome === 'degraded' && !decision.allowed));
          await untilRecovered(bounded);
        } finally {
          client.disconnect();
        }
      });

      it('answers within the budget while Redis is down, and recovers after a restart without a new client', async (t) => {
        assert.equal((await timed(limiter, 'closed')).decision.outcome, 'allowed');
        await d.stopKeepingData();
        for (let i = 0; i < 3; i++) {
          const closed = await timed(limiter, 'closed');
          const open = await timed(limiter, 'open');
          assertDegraded(closed, false);
          assertDegraded(open, true);
          t.diagnostic(`down: fail-closed in ${closed.ms.toFixed(1)} ms, fail-open in ${open.ms.toFixed(1)} ms`);
        }
        await d.restart();
        const recoveryMs = await untilRecovered(limiter);
        t.diagnostic(`checks decided by Redis again ${recoveryMs.toFixed(0)} ms after it answered PING`);
        assert.ok(recoveryMs < 1000, `recovered after ${recoveryMs.toFixed(0)} ms`);
      });
    });

    describe('at maxmemory under noeviction', () => {
      let d: Deployment;
      let redis: RedisClient;
      before(async () => {
        d = await deployment.start();
        redis = createRedisClient(d.settings);
      });
      after(async () => {
        redis.disconnect();
        await d.stop();
      });

      it('still refuses an exhausted key, fails admits by the failure mode, and never evicts', async (t) => {
        // Prepare: one group and one scope, so every key shares a slot (one node fills up)
        const policies = staticPolicies(
          // a generous budget: this is about maxmemory, and a loaded CI machine can take past 100 ms
          compilePolicies({
            window: { strategy: 'slidingWindow', limit: 2, window: '1 h', group: 'oom', timeBudget: '5 s' },
            bucket: {
              strategy: 'tokenBucket',
              capacity: 2,
              refill: { tokens: 1, every: '1 h' },
              group: 'oom',
              timeBudget: '5 s',
            },
            'bucket-open': {
              strategy: 'tokenBucket',
              capacity: 2,
              refill: { tokens: 1, every: '1 h' },
              group: 'oom',
              failureMode: 'open',
              timeBudget: '5 s',
            },
          }),
        );
        const full = createLimiter({ redis, policies, ...quiet });
        const oneSlot = { scope: 'oom' };
        const limiter = {
          check: (request: { policy: string; key: string; cost?: number }) => full.check(request, oneSlot),
        };
        for (const policy of ['window', 'bucket']) {
          for (let i = 0; i < 2; i++)
            assert.equal((await limiter.check({ policy, key: 'exhausted' })).outcome, 'allowed');
        }
        const before = await d.memory(redis);
        const limitBytes = Math.max(...before.map((m) => m.used)) + 256 * 1024;
        const nodes = 'nodes' in redis ? redis.nodes('master') : [redis];
        await Promise.all(nodes.map((n) => n.config('SET', 'maxmemory', String(limitBytes))));

        // Act: admit fresh keys until Redis refuses to write
        let admitted = 0;
        let refusal: Decision | undefined;
        for (let i = 0; i < 100_000 && !refusal; i++) {
          const decision = await limiter.check({ policy: 'window', key: `fill-${i}` });
          if (decision.outcome === 'allowed') admitted++;
          else refusal = decision;
        }
        t.diagnostic(`${admitted} windows admitted before maxmemory`);

        // Assess
        assert.ok(refusal?.outcome === 'degraded', 'an admit at maxmemory is degraded');
        assert.equal(refusal.reason, 'out-of-memory');
        assert.equal(refusal.allowed, false);
        // As buffers are freed, used_memory can dip below maxmemory again and a
        // small write fit: hold every node over it for the checks that follow.
        const usedNow = await d.memory(redis);
        await Promise.all(
          nodes.map((n, i) => n.config('SET', 'maxmemory', String((usedNow[i]?.used ?? 0) - 64 * 1024))),
        );
        const open = await limiter.check({ policy: 'bucket-open', key: 'fresh' });
        assert.ok(open.outcome === 'degraded' && open.reason === 'out-of-memory' && open.allowed);
        for (const policy of ['window', 'bucket']) {
          assert.equal((await limiter.check({ policy, key: 'exhausted' })).outcome, 'limited', `${policy} deny path`);
        }
        // Under maxmemory again, a few later admits can fit: each of them must be kept too.
        await Promise.all(nodes.map((n) => n.config('SET', 'maxmemory', String(limitBytes))));
        for (let i = 0; i < 500; i++) {
          if ((await limiter.check({ policy: 'window', key: `more-${i}` })).outcome === 'allowed') admitted++;
        }
        const afterFill = await d.memory(redis);
        for (const m of afterFill)
          assert.ok(m.used <= limitBytes + 64 * 1024, `used_memory ${m.used} vs max ${limitBytes}`);
        const keys = (await Promise.all(nodes.map((n) => n.dbsize()))).reduce((a, b) => a + b, 0);
        assert.equal(keys, admitted + 2, 'every admitted window and both exhausted keys are still there');
        const stats = await Promise.all(nodes.map((n) => n.info('stats')));
        for (const s of stats) assert.match(s, /evicted_keys:0\r?\n/);
      });

      it('bounds what one admit writes past maxmemory: a sliding window takes at most 1024 events per request', async (t) => {
        // Prepare: a wide window; fresh headroom of 256 KiB on the node that holds its scope
        const full = createLimiter({
          redis,
          policies: staticPolicies(
            compilePolicies({
              wide: { strategy: 'slidingWindow', limit: 100_000, window: '1 h', group: 'oom', timeBudget: '5 s' },
            }),
          ),
          ...quiet,
        });
        const check = (key: string, cost: number) => full.check({ policy: 'wide', key, cost }, { scope: 'oom' });
        await assert.rejects(check('too-dear', 50_000), /cost must be a whole number from 1 to 1024/);
        const nodes = 'nodes' in redis ? redis.nodes('master') : [redis];
        const used = Math.max(...(await d.memory(redis)).map((m) => m.used));
        const limitBytes = used + 256 * 1024;
        await Promise.all(nodes.map((n) => n.config('SET', 'maxmemory', String(limitBytes))));
        // Act: admits of the largest cost on fresh keys until Redis refuses
        let admitted = 0;
        for (let i = 0; i < 1000; i++) {
          const decision = await check(`wide-${i}`, 1024);
          if (decision.outcome !== 'allowed') break;
          admitted++;
        }
        // Assess: the last admit started below maxmemory and wrote at most ~8 KiB past it
        const overshoot = Math.max(...(await d.memory(redis)).map((m) => m.used)) - limitBytes;
        t.diagnostic(`${admitted} admits of 1024 events; used_memory ends ${overshoot} bytes past maxmemory`);
        assert.ok(admitted > 0);
        assert.ok(overshoot <= 16 * 1024, `overshoot ${overshoot} bytes`);
      });
    });
  });
}
