/**
 * An LLM call's in-flight slot and its budget reservation taken in one
 * script (lua/reserve_in_flight.lua, Limiter.reserveInFlight), both or
 * neither: when the slot refuses nothing is reserved, when the budget refuses
 * no slot is taken, under concurrency the leases held always equal the holds
 * taken, and no code path of the LLM handler takes one without the other (a
 * crash between the two is impossible by construction: there is no between).
 * And its end in one script (lua/settle_in_flight.lua, Limiter.settleInFlight):
 * the settle and the slot given back together, idempotent, the release done
 * even at maxmemory. At maxmemory an admission takes neither (an in-flight
 * check's ZADD is its first write, and deny-OOM).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it, type TestContext } from 'node:test';
import {
  createLimiter,
  createRedisClient,
  InvalidCheckError,
  MisconfiguredCheckError,
  type RedisClient,
} from '@platform/rate-limit';
import { budgetKeys, counterKey } from '@platform/rate-limit/policy';
import { type RedisProcess, startRedis } from '../../scripts/redis-process.ts';
import { cutAfterRun, proxiedNode } from '../support/cut-after-run.ts';
import { connected, policies, targets, unique } from '../support/targets.ts';

/** The LLM's two policies; `timeBudget` (both) when a test stalls Redis past it. */
const catalogue = (slots: number, capacity: number, timeBudget?: string) =>
  policies({
    'llm-in-flight': {
      strategy: 'concurrency',
      limit: slots,
      leaseTtl: '95 s',
      group: 'llm',
      ...(timeBudget && { timeBudget }),
    },
    'llm-budget': {
      strategy: 'tokenBucket',
      capacity,
      refill: { tokens: 1, every: '1 h' },
      reservation: { hold: '2 m', remember: '5 m' },
      group: 'llm',
      ...(timeBudget && { timeBudget }),
    },
  });

/** Counts the commands a client sends. */
function counted(redis: RedisClient): () => string[] {
  const sent: string[] = [];
  const original = redis.sendCommand.bind(redis);
  redis.sendCommand = ((command: { name: string }) => {
    sent.push(command.name);
    return original(command as never);
  }) as typeof redis.sendCommand;
  return () => sent;
}

for (const target of targets) {
  describe(`an in-flight slot and a reservation in one script (${target.name})`, () => {
    /** `setup` on a client of its own; both closed after the test. */
    function opened(t: TestContext, slots: number, capacity: number) {
      const redis = target.client();
      const s = setup(redis, slots, capacity);
      t.after(() => {
        redis.disconnect();
        s.admin.disconnect();
      });
      return { redis, s };
    }

    function setup(redis: RedisClient, slots: number, capacity: number) {
      const catalogued = catalogue(slots, capacity);
      const limiter = createLimiter({ redis, policies: catalogued });
      const tenant = unique('tenant');
      const compiled = (name: string) => catalogued.resolve(name) as NonNullable<ReturnType<typeof catalogued.resolve>>;
      const leasesKey = counterKey(compiled('llm-in-flight'), tenant, tenant);
      const [, holdsKey] = budgetKeys(counterKey(compiled('llm-budget'), tenant, tenant));
      const admin = target.admin();
      const state = async () => {
        await connected(admin); // its first use may come before its connection (no offline queue)
        const [leases, holds] = await Promise.all([admin.zcard(leasesKey), admin.zcard(holdsKey)]);
        return { leases, holds };
      };
      const take = (units: number, id = unique('call')) =>
        limiter.reserveInFlight(
          { policy: 'llm-in-flight', key: tenant },
          { policy: 'llm-budget', key: tenant, units, id },
          { scope: tenant },
        );
      const end = (id: string, actualUnits: number, lease: string | undefined) =>
        limiter.settleInFlight(
          { policy: 'llm-budget', key: tenant, id, actualUnits },
          { policy: 'llm-in-flight', key: tenant, lease },
          { scope: tenant },
        );
      return { limiter, tenant, take, end, state, admin, leasesKey };
    }

    it('takes both in one round trip, and names the lease to give back', async (t) => {
      const { redis, s } = opened(t, 2, 1000);
      await connected(redis);
      await s.take(1); // the script loaded: no NOSCRIPT below
      const sent = counted(redis);
      const decision = await s.take(300);
      assert.deepEqual(sent(), ['evalsha']);
      assert.equal(decision.outcome, 'allowed');
      const lease = decision.outcome === 'allowed' ? decision.limits[0]?.lease : undefined;
      assert.ok(lease, 'the slot names its lease');
      assert.equal(decision.limits[1]?.remaining, 1000 - 1 - 300);
      assert.deepEqual(await s.state(), { leases: 2, holds: 2 });
      const released = await s.limiter.release('llm-in-flight', s.tenant, lease, { scope: s.tenant });
      assert.equal(released.decided && released.released, true);
    });

    it('reserves nothing when the slot refuses (no slot free)', async (t) => {
      const { s } = opened(t, 1, 1000);
      assert.equal((await s.take(100)).outcome, 'allowed');
      const refused = await s.take(100);
      assert.equal(refused.outcome, 'limited');
      assert.equal(refused.outcome === 'limited' && refused.binding.policy, 'llm-in-flight');
      assert.ok(refused.retryAfterMs > 90_000, 'when the held lease lapses at the latest');
      assert.deepEqual(await s.state(), { leases: 1, holds: 1 }, 'the refused call holds nothing');
      assert.equal(refused.limits[1]?.remaining, 900, 'the budget as it stands: not charged');
    });

    it('takes no slot when the budget refuses (not enough left)', async (t) => {
      const { s } = opened(t, 4, 1000);
      assert.equal((await s.take(900)).outcome, 'allowed');
      const refused = await s.take(200);
      assert.equal(refused.outcome, 'limited');
      assert.equal(refused.outcome === 'limited' && refused.binding.policy, 'llm-budget');
      assert.deepEqual(await s.state(), { leases: 1, holds: 1 }, 'no slot taken by the refused call');
      assert.equal(refused.limits[0]?.remaining, 3, 'the slots as they stand');
    });

    it('takes neither for an id already settled (an InvalidCheckError), nor twice for a retried one', async (t) => {
      const { s } = opened(t, 4, 1000);
      const id = unique('call');
      assert.equal((await s.take(100, id)).outcome, 'allowed');
      await s.limiter.settle('llm-budget', s.tenant, id, 50, { scope: s.tenant });
      await assert.rejects(s.take(100, id), InvalidCheckError);
      assert.deepEqual(await s.state(), { leases: 1, holds: 0 });
      // a retry of a call whose hold is live (its first answer lost): one hold, and one slot, its own
      const retried = unique('call');
      const first = await s.take(100, retried);
      const again = await s.take(100, retried);
      assert.equal(again.outcome, 'allowed');
      const leaseOf = (d: typeof first) => (d.outcome === 'allowed' ? d.limits[0]?.lease : undefined);
      assert.equal(leaseOf(again), leaseOf(first), 'the retry names the lease it holds');
      assert.deepEqual(await s.state(), { leases: 2, holds: 1 }, 'the retry took no second slot');
      await s.end(retried, 0, leaseOf(again));
      assert.deepEqual(await s.state(), { leases: 1, holds: 0 }, 'its end gave its one slot back');
    });

    it('ends a stopped call in one round trip: the settle as lua/settle.lua answers it, and the lease given back in the same script', async (t) => {
      const { redis, s } = opened(t, 2, 1000);
      await connected(redis);
      const other = await s.take(100); // a second call's slot, which must stay taken
      const id = unique('call');
      const decision = await s.take(300, id);
      const lease = decision.outcome === 'allowed' ? decision.limits[0]?.lease : undefined;
      assert.ok(lease);
      assert.equal(other.outcome, 'allowed');
      await s.end(unique('warm'), 0, 'no-such-lease'); // the script loaded: no NOSCRIPT below
      const sent = counted(redis);
      const ended = await s.end(id, 120, lease);
      assert.deepEqual(sent(), ['evalsha']);
      assert.ok(ended.decided);
      assert.equal(ended.result, 'settled');
      assert.equal(ended.released, true);
      assert.equal(ended.status.remaining, 1000 - 100 - 120, '300 reserved, 120 spent: 180 refunded');
      assert.equal(await s.admin.zscore(s.leasesKey, lease), null, 'the lease is gone from the leases');
      assert.deepEqual(await s.state(), { leases: 1, holds: 1 }, "only the other call's slot and hold remain");
    });

    it('is idempotent: ending the call again answers duplicate and gives nothing back twice', async (t) => {
      const { s } = opened(t, 2, 1000);
      const id = unique('call');
      const decision = await s.take(300, id);
      const lease = decision.outcome === 'allowed' ? decision.limits[0]?.lease : undefined;
      assert.ok(lease);
      const first = await s.end(id, 120, lease);
      const later = await s.take(100); // a slot taken after the first end: a repeated release must not free it
      assert.equal(later.outcome, 'allowed');
      const again = await s.end(id, 120, lease);
      assert.ok(first.decided && again.decided);
      assert.equal(again.result, 'duplicate');
      assert.equal(again.released, false);
      assert.equal(
        again.status.remaining,
        first.status.remaining - 100,
        'no second refund: only the later call charged',
      );
      assert.deepEqual(await s.state(), { leases: 1, holds: 1 }, "the later call's slot and hold are untouched");
      const settledAlone = await s.limiter.settle('llm-budget', s.tenant, id, 0, { scope: s.tenant });
      assert.equal(settledAlone.decided && settledAlone.result, 'duplicate', 'settle.lua sees it settled once');
    });

    it('without a lease (an admission the failure mode let through took none) it is the settle alone', async (t) => {
      const { s } = opened(t, 2, 1000);
      const id = unique('call');
      assert.equal((await s.take(300, id)).outcome, 'allowed');
      const ended = await s.end(id, 300, undefined);
      assert.ok(ended.decided);
      assert.equal(ended.result, 'settled');
      assert.equal(ended.released, false);
      assert.deepEqual(await s.state(), { leases: 1, holds: 0 }, 'the slot it did not name is not touched');
    });

    it('refuses a lease or a budget of another group before anything is sent', async (t) => {
      const { s } = opened(t, 2, 1000);
      await assert.rejects(
        s.limiter.settleInFlight(
          { policy: 'llm-budget', key: s.tenant, id: unique('call'), actualUnits: 1 },
          { policy: 'llm-budget', key: s.tenant, lease: 'l' },
          { scope: s.tenant },
        ),
        MisconfiguredCheckError,
      );
      await assert.rejects(s.end(unique('call'), -1, 'l'), InvalidCheckError);
    });

    it('under 40 concurrent calls, every slot taken has its hold and every hold its slot', async (t) => {
      const { s } = opened(t, 4, 1000);
      // 4 slots, budget for 3 calls of 300: the budget binds first, then the slots
      const decisions = await Promise.all(Array.from({ length: 40 }, () => s.take(300)));
      const admitted = decisions.filter((d) => d.outcome === 'allowed').length;
      assert.equal(admitted, 3);
      assert.deepEqual(await s.state(), { leases: 3, holds: 3 });
    });
  });
}

/** A tenant's LLM admission of 10 units under `id` (the slot and the reservation in one script). */
function reservingTen(limiter: ReturnType<typeof createLimiter>, tenant: string) {
  return (id: string) =>
    limiter.reserveInFlight(
      { policy: 'llm-in-flight', key: tenant },
      { policy: 'llm-budget', key: tenant, units: 10, id },
      { scope: tenant },
    );
}

/** A fresh tenant of the LLM's two policies: its reserve of 300 units under an id, and the keys it writes. */
function llmTenant(limiter: ReturnType<typeof createLimiter>, catalogued: ReturnType<typeof catalogue>) {
  const tenant = unique('tenant');
  const compiled = (name: string) => catalogued.resolve(name) as NonNullable<ReturnType<typeof catalogued.resolve>>;
  const leasesKey = counterKey(compiled('llm-in-flight'), tenant, tenant);
  const [, holdsKey] = budgetKeys(counterKey(compiled('llm-budget'), tenant, tenant));
  const take = (id: string) =>
    limiter.reserveInFlight(
      { policy: 'llm-in-flight', key: tenant },
      { policy: 'llm-budget', key: tenant, units: 300, id },
      { scope: tenant },
    );
  return { tenant, take, leasesKey, holdsKey };
}

/** A private single node (these tests set its maxmemory, or stall it): the limiter's client and an admin one, stopped after the test. */
async function privateNode(t: TestContext): Promise<{ redis: RedisClient; admin: RedisClient; server: RedisProcess }> {
  const server = await startRedis();
  const redis = createRedisClient({ url: server.url });
  const admin = createRedisClient({ url: server.url });
  t.after(async () => {
    server.resume(); // a stalled one too
    redis.disconnect();
    admin.disconnect();
    await server.stop();
  });
  await Promise.all([connected(redis), connected(admin)]);
  return { redis, admin, server };
}

describe('an LLM admission answered degraded at its deadline (a private single node, stalled)', () => {
  it('takes nothing once Redis answers again: the late reserve is settled at nothing and its slot released', async (t) => {
    const { redis, admin, server } = await privateNode(t);
    const catalogued = catalogue(4, 1000, '100 ms');
    const limiter = createLimiter({ redis, policies: catalogued, onDegraded: () => {} });
    const { take, leasesKey, holdsKey, tenant } = llmTenant(limiter, catalogued);
    // the reserve's script loaded first (one EVALSHA on the wire); the settle that undoes it is not (a failover)
    await admin.script('FLUSH'); // as after a failover: no script cached
    const warm = await take(unique('call')); // caches the reserve's script (its EVAL after NOSCRIPT), and only it
    assert.equal(warm.outcome, 'allowed');
    server.pause();
    let stalled: Awaited<ReturnType<typeof take>>;
    try {
      stalled = await take('stalled');
    } finally {
      server.resume();
    }
    assert.equal(stalled.outcome, 'degraded');
    assert.equal(stalled.allowed, false, 'the LLM policies fail closed');
    // Redis runs one connection's commands in order: once this answers, the late reserve and its undoing have run
    await redis.ping();
    assert.equal(await admin.zscore(leasesKey, 'stalled'), null, 'no slot kept for the lease TTL');
    assert.equal(await admin.zscore(holdsKey, 'stalled'), null, 'no hold left to lapse charged');
    assert.deepEqual(
      [await admin.zcard(leasesKey), await admin.zcard(holdsKey)],
      [1, 1],
      'only the warm-up call holds anything',
    );
    const standing = await limiter.peek([{ policy: 'llm-budget', key: tenant }], { scope: tenant });
    assert.ok(standing.decided);
    assert.equal(
      standing.limits[0]?.remaining,
      700,
      'the stalled estimate was given back: only the warm-up is charged',
    );
  });
});

describe('an LLM call at maxmemory under noeviction (a private single node)', () => {
  it("gives the slot back and settles (the lease's ZREM, not deny-OOM, is the first write); a settle alone whose first write is deny-OOM is refused, its hold kept", async (t) => {
    const { redis, admin } = await privateNode(t);
    const catalogued = catalogue(2, 1000);
    const limiter = createLimiter({ redis, policies: catalogued, onDegraded: () => {} });
    const tenant = unique('tenant');
    const scope = { scope: tenant };
    const compiled = (name: string) => catalogued.resolve(name) as NonNullable<ReturnType<typeof catalogued.resolve>>;
    const leasesKey = counterKey(compiled('llm-in-flight'), tenant, tenant);
    const [, holdsKey] = budgetKeys(counterKey(compiled('llm-budget'), tenant, tenant));
    const take = async (id: string) => {
      const decision = await limiter.reserveInFlight(
        { policy: 'llm-in-flight', key: tenant },
        { policy: 'llm-budget', key: tenant, units: 300, id },
        scope,
      );
      const lease = decision.outcome === 'allowed' ? decision.limits[0]?.lease : undefined;
      assert.ok(lease);
      return lease;
    };
    const [stopped, running] = [unique('call'), unique('call')];
    const lease = await take(stopped);
    await take(running);
    // Act: used memory is far above one byte: every deny-OOM command is refused while a script has written nothing
    await admin.config('SET', 'maxmemory', '1');
    const ended = await limiter.settleInFlight(
      { policy: 'llm-budget', key: tenant, id: stopped, actualUnits: 120 },
      { policy: 'llm-in-flight', key: tenant, lease },
      scope,
    );
    const alone = await limiter.settle('llm-budget', tenant, running, 120, scope);
    await admin.config('SET', 'maxmemory', '0');
    // Assess
    assert.ok(ended.decided, JSON.stringify(ended));
    assert.equal(ended.result, 'settled');
    assert.equal(ended.released, true);
    assert.equal(await admin.zscore(leasesKey, lease), null, 'the slot was given back at maxmemory');
    assert.deepEqual(
      alone,
      { decided: false, reason: 'out-of-memory' },
      "settle.lua's first write is the bucket's SET",
    );
    assert.ok(await admin.zscore(holdsKey, running), 'the refused settle left its hold: charged its estimate');
    assert.equal(await admin.zscore(holdsKey, stopped), null);
    const later = await limiter.settle('llm-budget', tenant, running, 120, scope);
    assert.equal(later.decided && later.result, 'settled', 'settled once memory is free');
    assert.equal(later.decided && later.status.remaining, 1000 - 120 - 120);
  });

  it("takes neither a slot nor a hold at maxmemory: the slot's ZADD, deny-OOM, is the first write", async (t) => {
    const { redis, admin } = await privateNode(t);
    const catalogued = policies({
      'llm-in-flight': { strategy: 'concurrency', limit: 4, leaseTtl: '95 s', group: 'llm' },
      'llm-budget': {
        strategy: 'tokenBucket',
        capacity: 1000,
        refill: { tokens: 1, every: '1 h' },
        reservation: { hold: '2 m', remember: '5 m' },
        group: 'llm',
      },
      slots: { strategy: 'concurrency', limit: 4, leaseTtl: '95 s' },
    });
    const limiter = createLimiter({ redis, policies: catalogued, onDegraded: () => {} });
    const tenant = unique('tenant');
    const take = reservingTen(limiter, tenant);
    assert.equal((await take(unique('call'))).outcome, 'allowed');
    assert.equal((await limiter.check({ policy: 'slots', key: tenant })).outcome, 'allowed');
    const keys = async () => {
      const all = await admin.keys('*');
      const sizes = await Promise.all(
        all.map((k) => admin.type(k).then((type) => (type === 'zset' ? admin.zcard(k) : 1))),
      );
      return Object.fromEntries(all.map((k, i) => [k, sizes[i]]));
    };
    const before = await keys();
    // Act
    await admin.config('SET', 'maxmemory', '1');
    const reserved = await take(unique('call'));
    const checked = await limiter.check({ policy: 'slots', key: tenant });
    await admin.config('SET', 'maxmemory', '0');
    // Assess
    assert.deepEqual(
      [reserved.outcome, reserved.outcome === 'degraded' && reserved.reason],
      ['degraded', 'out-of-memory'],
    );
    assert.deepEqual(
      [checked.outcome, checked.outcome === 'degraded' && checked.reason],
      ['degraded', 'out-of-memory'],
    );
    assert.deepEqual(await keys(), before, 'no lease, no hold written');
  });

  it('takes nothing at maxmemory even when the call forgets lapsed ids first (their ZREM would be a write before the deny-OOM ZADD)', async (t) => {
    const { redis, admin } = await privateNode(t);
    const catalogued = catalogue(4, 1000);
    const limiter = createLimiter({ redis, policies: catalogued, onDegraded: () => {} });
    const tenant = unique('tenant');
    const compiled = (name: string) => catalogued.resolve(name) as NonNullable<ReturnType<typeof catalogued.resolve>>;
    const [budgetKey, holdsKey, , settledKey] = budgetKeys(counterKey(compiled('llm-budget'), tenant, tenant));
    const take = reservingTen(limiter, tenant);
    assert.equal((await take(unique('call'))).outcome, 'allowed');
    // an id settled long ago (score 0 µs): past the retention, so the next call forgets it
    await admin.zadd(settledKey as string, 0, 'settled-long-ago');
    const before = await admin.zrange(holdsKey as string, '0', '-1');
    // Act
    await admin.config('SET', 'maxmemory', '1');
    const reserved = await take(unique('call'));
    const alone = await limiter.reserve('llm-budget', tenant, 10, { scope: tenant, id: unique('call') });
    await admin.config('SET', 'maxmemory', '0');
    // Assess
    assert.deepEqual(
      [reserved.outcome, reserved.outcome === 'degraded' && reserved.reason],
      ['degraded', 'out-of-memory'],
    );
    assert.deepEqual([alone.outcome, alone.outcome === 'degraded' && alone.reason], ['degraded', 'out-of-memory']);
    assert.deepEqual(await admin.zrange(holdsKey as string, '0', '-1'), before, 'no hold taken');
    assert.equal(await admin.zscore(settledKey as string, 'settled-long-ago'), '0', 'nothing forgotten either');
    assert.ok(await admin.exists(budgetKey as string), "the empty SETRANGE left the budget's bucket as it was");
    // once memory is free the same call is admitted and forgets the old id
    assert.equal((await take(unique('call'))).outcome, 'allowed');
    assert.equal(await admin.zscore(settledKey as string, 'settled-long-ago'), null);
  });
});

describe('the LLM handler takes its slot and its reservation only together', () => {
  it('has no path that takes one without the other: no separate enforce of the slot, no separate reserve', () => {
    const source = readFileSync(new URL('../../functions/llm/handler.ts', import.meta.url), 'utf8');
    assert.match(source, /limiter\.reserveInFlight\(/);
    assert.doesNotMatch(source, /limiter\.reserve\(/, 'a reserve on its own would hold budget without a slot');
    assert.doesNotMatch(source, /\benforce\(/, 'a check of the slot on its own would hold a slot without budget');
    assert.doesNotMatch(source, /limiter\.check(All)?\(/);
  });
});

describe('an LLM admission whose connection is cut after Redis ran it, before its reply (a private single node, behind a proxy)', () => {
  it('gives back the slot and the estimate the reserve took once the client is connected again', async (t) => {
    // Prepare: the limiter's client through a proxy, whose replies can be held back; an admin client direct
    const node = await proxiedNode(t);
    const { redis, admin } = node;
    const catalogued = catalogue(4, 1000, '3 s');
    const limiter = createLimiter({ redis, policies: catalogued, onDegraded: () => {} });
    const { take, leasesKey, holdsKey, tenant } = llmTenant(limiter, catalogued);
    assert.equal((await take(unique('warm'))).outcome, 'allowed'); // its scripts cached

    // Act: the reserve goes out with the replies held back; once Redis has run it (its slot is there), the
    // connection is cut, then taken again
    const answered = await cutAfterRun(
      node,
      () => take('cut'),
      async () => (await admin.zscore(leasesKey, 'cut')) !== null,
    );

    // Assess: undecided, with the reason that says it may have run; once the client answers again, the give-back
    // sent after it has run: no slot kept for the lease's 95 s, no estimate charged
    assert.equal(answered.outcome, 'degraded');
    assert.equal(answered.outcome === 'degraded' && answered.reason, 'lost');
    assert.equal(answered.allowed, false, 'the LLM policies fail closed');
    assert.equal(await admin.zscore(leasesKey, 'cut'), null, 'no slot kept');
    assert.equal(await admin.zscore(holdsKey, 'cut'), null, 'no hold kept');
    const standing = await limiter.peek([{ policy: 'llm-budget', key: tenant }], { scope: tenant });
    assert.equal(standing.decided && standing.limits[0]?.remaining, 700, 'only the warm-up is charged');
  });
});
