/**
 * The once-only admission (functions/shared/admission.ts) against a real
 * Redis, its claim decided in the same script as the event's limits (the
 * layer's enforceOnce): which way out keeps the claim (an admission, a kept
 * refusal) and which does not (a refusal, a sink failure), one round trip per
 * event, a Redis that cannot decide refused fail-closed and observed, and a
 * retry after a Redis restart (graceful, and a crash of a server whose writes
 * are durable when acknowledged) still a duplicate.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createLimiter, enforceOnce, type RedisClient, type Verdict } from '@platform/rate-limit';
import {
  type Admission,
  admitOnce,
  claimStuck,
  pendingMsOf,
  SinkTimeoutError,
  verdictMayRunLate,
} from '../../functions/shared/admission.ts';
import { AcceptedOnce } from '../../functions/shared/once.ts';
import type { AcceptedEvent } from '../../functions/shared/sink.ts';
import { type RedisProcess, rawCommand, startRedis } from '../../scripts/redis-process.ts';
import { agedPastPending, stampedAhead } from '../support/claims.ts';
import { cutAfterRun, proxiedNode } from '../support/cut-after-run.ts';
import { connected, policies, targets, unique } from '../support/targets.ts';

const catalogue = (limit: number, timeBudget?: string) =>
  policies({
    'slack-workspace': {
      strategy: 'slidingWindow',
      limit,
      window: '1 h',
      group: 'slack',
      failureMode: 'closed',
      ...(timeBudget ? { timeBudget } : {}),
    },
    'slack-channel': {
      strategy: 'slidingWindow',
      limit: 1000,
      window: '1 h',
      group: 'slack',
      failureMode: 'closed',
      ...(timeBudget ? { timeBudget } : {}),
    },
  });

/** Counts the commands a client sends (the round trips an event costs). */
function counted(redis: RedisClient): { commands: () => string[] } {
  const sent: string[] = [];
  const original = redis.sendCommand.bind(redis);
  redis.sendCommand = ((command: { name: string }) => {
    sent.push(command.name);
    return original(command as never);
  }) as typeof redis.sendCommand;
  return { commands: () => sent };
}

interface HarnessOptions {
  readonly sinkFails?: () => boolean;
  /** The sink's put, instead of one that takes the event at once. */
  readonly put?: (event: AcceptedEvent, signal?: AbortSignal) => Promise<void>;
  readonly sinkBudgetMs?: number;
  readonly keepsClaim?: boolean;
  readonly scope?: string;
  /** The policies' time budget. */
  readonly timeBudget?: string;
}

function harness(redis: RedisClient, limit: number, options: HarnessOptions = {}) {
  const { sinkFails = () => false, keepsClaim = false, scope = unique('T') } = options;
  const limiter = createLimiter({ redis, policies: catalogue(limit, options.timeBudget), onDegraded: () => {} });
  const sunk: AcceptedEvent[] = [];
  const observed: Verdict[] = [];
  const event = (id: string): AcceptedEvent => ({ source: 'slack', id, scope, payload: { id } });
  const limits = [
    { policy: 'slack-workspace', key: scope },
    { policy: 'slack-channel', key: 'C1' },
  ];
  const admission: Admission<Verdict> = {
    once: new AcceptedOnce(redis),
    sink: {
      put: async (e, signal) => {
        if (sinkFails()) throw new Error('queue down');
        await options.put?.(e, signal);
        sunk.push(e);
      },
    },
    budgetMs: 1000,
    ...(options.sinkBudgetMs === undefined ? {} : { sinkBudgetMs: options.sinkBudgetMs }),
    check: async (claim) => {
      const once = await enforceOnce(limiter, limits, claim, {
        scope,
        observer: { observe: (v) => observed.push(v) },
      });
      return once.kind === 'decided' ? once.verdict : once.kind;
    },
    admits: (verdict) => verdict.proceed,
    mayRunLate: verdictMayRunLate, // the webhooks' own
    keepsClaim,
  };
  /** What the workspace window has counted (a peek debits nothing). */
  const counted = async () => {
    const decision = await limiter.peek(limits, { scope });
    return decision.outcome === 'degraded' ? Number.NaN : limit - (decision.limits[0]?.remaining ?? 0);
  };
  return { admission, event, sunk, observed, counted, scope };
}

for (const target of targets) {
  describe(`admitOnce, the claim in the check's script (${target.name})`, () => {
    it('admits once in one round trip: the event is sunk, and a redelivery is a duplicate, not counted again', async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      await connected(redis);
      const h = harness(redis, 10);
      const e = h.event('Ev1');
      assert.equal(await h.counted(), 0); // the same script as the claimed check: loaded, no NOSCRIPT below
      const trips = counted(redis);
      assert.equal((await admitOnce(e, h.admission)).kind, 'admitted');
      assert.deepEqual(trips.commands(), ['evalsha'], 'the claim and both windows: one script');
      assert.equal((await admitOnce(e, h.admission)).kind, 'duplicate');
      assert.deepEqual(trips.commands(), ['evalsha', 'evalsha'], 'a duplicate: one script too');
      assert.deepEqual(h.sunk, [e]);
      assert.equal(await h.counted(), 1, 'counted once');
      assert.equal(h.observed.length, 1, 'a duplicate is no verdict');
    });

    it('marks the claim delivered after the put, the second round trip with a pending time: a late redelivery stays a duplicate', async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      await connected(redis);
      const h = harness(redis, 10, { sinkBudgetMs: 1000 }); // the webhooks' shape
      const e = h.event('marked');
      assert.equal(await h.counted(), 0); // the scripts loaded: no NOSCRIPT below
      await admitOnce(h.event('warm'), h.admission);
      const trips = counted(redis);
      const admitted = await admitOnce(e, h.admission);
      assert.equal(admitted.kind === 'admitted' && admitted.marked, 'marked');
      assert.deepEqual(trips.commands(), ['evalsha', 'evalsha'], 'the claimed check, then the mark');
      const key = h.admission.once.claimOf(e.source, e.scope, e.id).key;
      assert.match(String(await redis.get(key)), /^[\w-]+:\d+:d$/);
      await agedPastPending(redis, key);
      assert.equal((await admitOnce(e, h.admission)).kind, 'duplicate', 'past its pending time, still a duplicate');
      assert.deepEqual(h.sunk, [h.event('warm'), e]);
    });

    it("hands on an event whose first attempt died mid-put: past the claim's pending time, the retry takes it over", async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      await connected(redis);
      const h = harness(redis, 10, { sinkBudgetMs: 1000 });
      const e = h.event('orphaned');
      // the attempt that dies: its check takes the claim, then the process is gone before its put
      const dying = h.admission.once.claimOf(e.source, e.scope, e.id, { pendingMs: pendingMsOf(h.admission) });
      const decided = await h.admission.check(dying);
      assert.equal(typeof decided === 'object' && decided.proceed, true, 'admitted and claimed');
      // real Redis time: held ahead, so the next check finds it pending however slow the host
      await stampedAhead(redis, dying.key, pendingMsOf(h.admission) - 100);
      assert.equal((await admitOnce(e, h.admission)).kind, 'pending', 'within its pending time: maybe still put');
      await agedPastPending(redis, dying.key);
      const retried = await admitOnce(e, h.admission);
      assert.equal(retried.kind === 'admitted' && retried.marked, 'marked', 'taken over, handed on, marked');
      assert.deepEqual(h.sunk, [e], 'handed on, not lost');
      assert.equal(await h.counted(), 2, 'the dead attempt counted, and so did its retry: no refund');
      assert.equal((await admitOnce(e, h.admission)).kind, 'duplicate');
      assert.equal(h.sunk.length, 1);
    });

    it('keeps no claim when refused (a redelivery counts again) unless the caller keeps it', async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      await connected(redis);
      const released = harness(redis, 1);
      assert.equal((await admitOnce(released.event('first'), released.admission)).kind, 'admitted');
      const e = released.event('over');
      assert.equal((await admitOnce(e, released.admission)).kind, 'refused');
      assert.equal((await admitOnce(e, released.admission)).kind, 'refused', 'checked again: nothing was claimed');
      assert.equal(released.observed.filter((v) => v.outcome === 'limited').length, 2);

      const kept = harness(redis, 1, { keepsClaim: true });
      assert.equal((await admitOnce(kept.event('first'), kept.admission)).kind, 'admitted');
      const k = kept.event('over');
      assert.equal((await admitOnce(k, kept.admission)).kind, 'refused');
      assert.equal((await admitOnce(k, kept.admission)).kind, 'duplicate', 'the refusal kept its claim');
      assert.equal(kept.observed.length, 2, 'the duplicate was not checked');
    });

    it('gives the claim back when the sink fails, so the retry is admitted', async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      await connected(redis);
      let down = true;
      const h = harness(redis, 10, { sinkFails: () => down });
      const e = h.event('sunk-later');
      const first = await admitOnce(e, h.admission);
      assert.equal(first.kind, 'unsunk');
      assert.match(String(first.kind === 'unsunk' && first.error), /queue down/);
      down = false;
      assert.equal((await admitOnce(e, h.admission)).kind, 'admitted');
      assert.equal((await admitOnce(e, h.admission)).kind, 'duplicate');
      assert.equal(h.sunk.length, 1);
    });

    it('gives the claim back when the sink takes longer than its budget (also a sink deaf to the abort), so the retry is admitted', async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      await connected(redis);
      for (const deaf of [false, true]) {
        let calls = 0;
        let aborted = false;
        const h = harness(redis, 10, {
          sinkBudgetMs: 20,
          // the first put hangs until it is aborted (and then rejects, unless deaf): an SQS call past Slack's ack time
          put: (_e, signal) =>
            calls++ > 0
              ? Promise.resolve()
              : new Promise((_, reject) =>
                  signal?.addEventListener('abort', () => {
                    aborted = true;
                    if (!deaf) reject(signal.reason);
                  }),
                ),
        });
        const e = h.event(`slow-${deaf}`);
        const first = await admitOnce(e, h.admission);
        assert.equal(first.kind, 'unsunk');
        assert.ok(first.kind === 'unsunk' && first.error instanceof SinkTimeoutError, String(first.kind));
        assert.equal(aborted, true, 'the put was told to stop');
        assert.equal((await admitOnce(e, h.admission)).kind, 'admitted', 'the claim was given back');
        assert.deepEqual(h.sunk, [e]);
      }
    });

    it('answers pending, not duplicate, to a delivery that comes while the first one is still being put, and admits the try after that put failed', async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      await connected(redis);
      let putStarted!: () => void;
      const started = new Promise<void>((resolve) => {
        putStarted = resolve;
      });
      let failPut!: (error: Error) => void;
      let puts = 0;
      const h = harness(redis, 10, {
        sinkBudgetMs: 10_000,
        // the first put hangs until the test fails it (an SQS call that ends in an error); later ones succeed
        put: () =>
          puts++ > 0
            ? Promise.resolve()
            : new Promise<void>((_, reject) => {
                failPut = reject;
                putStarted();
              }),
      });
      const e = h.event('in-flight');
      const first = admitOnce(e, h.admission);
      await started; // the first delivery holds the claim and is in its put
      assert.equal(
        (await admitOnce(e, h.admission)).kind,
        'pending',
        'a 200 duplicate now would drop the event when the put fails',
      );
      failPut(new Error('queue down'));
      assert.equal((await first).kind, 'unsunk');
      assert.equal((await admitOnce(e, h.admission)).kind, 'admitted', 'the claim was given back');
      assert.deepEqual(h.sunk, [e]);
    });

    it('says when the give-back did not reach Redis (the claim stays: the outcome carries why), and when it found nothing to give', async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      await connected(redis);
      let cut = false;
      const h = harness(redis, 10, {
        put: async () => {
          if (!cut) return;
          redis.disconnect(); // the connection goes while the put fails: the give-back cannot be sent
          throw new Error('queue down');
        },
        sinkFails: () => false,
      });
      const given = await admitOnce(h.event('fine'), {
        ...h.admission,
        sink: { put: async () => Promise.reject(new Error('queue down')) },
      });
      assert.equal(given.kind === 'unsunk' && given.givenBack, 'given');
      assert.equal(claimStuck(given.kind === 'unsunk' ? given.givenBack : undefined), false);
      cut = true;
      const stuck = await admitOnce(h.event('stuck'), h.admission);
      assert.equal(stuck.kind, 'unsunk');
      assert.ok(
        stuck.kind === 'unsunk' && claimStuck(stuck.givenBack),
        `given back: ${String(stuck.kind === 'unsunk' && stuck.givenBack)}`,
      );
    });

    it("leaves another delivery's claim alone when Redis answered an error (its script did not run): no give-back", async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      await connected(redis);
      const h = harness(redis, 10);
      const e = h.event('taken');
      assert.equal((await admitOnce(e, h.admission)).kind, 'admitted');
      // a redelivery whose check Redis refused with an error (a script error, OOM): undecided, but not late
      const answeredAnError = {
        outcome: 'degraded-closed',
        proceed: false,
        decision: { outcome: 'degraded', reason: 'redis-error' },
      } as unknown as Verdict;
      const refused = await admitOnce(e, { ...h.admission, check: async () => answeredAnError });
      assert.equal(refused.kind, 'refused');
      assert.equal((await admitOnce(e, h.admission)).kind, 'duplicate', 'the first delivery keeps its claim');
      assert.equal(h.sunk.length, 1);
    });

    it('decides 40 concurrent deliveries of one event once: one admitted, 39 duplicates, counted once', async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      await connected(redis);
      const h = harness(redis, 100);
      const e = h.event('raced');
      const outcomes = await Promise.all(Array.from({ length: 40 }, () => admitOnce(e, h.admission)));
      assert.equal(outcomes.filter((o) => o.kind === 'admitted').length, 1);
      assert.equal(outcomes.filter((o) => o.kind === 'duplicate').length, 39);
      assert.equal(await h.counted(), 1);
    });

    it("decides 40 concurrent deliveries of one webhook event once (a claim's pending time): one admitted and marked, none taken over", async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      await connected(redis);
      const h = harness(redis, 100, { sinkBudgetMs: 1000 }); // the webhooks' shape
      const e = h.event('raced-webhook');
      const outcomes = await Promise.all(Array.from({ length: 40 }, () => admitOnce(e, h.admission)));
      const admitted = outcomes.filter((o) => o.kind === 'admitted');
      assert.equal(admitted.length, 1);
      assert.equal(admitted[0]?.kind === 'admitted' && admitted[0].marked, 'marked');
      // before the mark landed a delivery finds the claim pending, after it a duplicate: never a second admission
      assert.deepEqual(
        outcomes.filter((o) => o.kind !== 'pending' && o.kind !== 'duplicate' && o.kind !== 'admitted'),
        [],
      );
      assert.deepEqual(h.sunk, [e]);
      assert.equal(await h.counted(), 1);
      assert.equal((await admitOnce(e, h.admission)).kind, 'duplicate');
    });

    it('keeps a refusal final with a pending time: the kept claim is marked, so no later delivery takes it over', async (t) => {
      const redis = target.client();
      t.after(() => redis.disconnect());
      await connected(redis);
      const h = harness(redis, 1, { keepsClaim: true, sinkBudgetMs: 1000 });
      assert.equal((await admitOnce(h.event('first'), h.admission)).kind, 'admitted');
      const e = h.event('over');
      const refused = await admitOnce(e, h.admission);
      assert.equal(refused.kind === 'refused' && refused.marked, 'marked', 'the second round trip of a kept refusal');
      const key = h.admission.once.claimOf(e.source, e.scope, e.id).key;
      await agedPastPending(redis, key);
      assert.equal((await admitOnce(e, h.admission)).kind, 'duplicate', 'past its pending time, still decided');
      assert.equal(h.observed.length, 2, 'the duplicate was not checked');
      assert.deepEqual(h.sunk, [h.event('first')]);
    });
  });
}

describe('admitOnce when Redis cannot decide', () => {
  it('refuses fail-closed, observed as the policy degraded, nothing sunk', async (t) => {
    const { createRedisClient } = await import('@platform/rate-limit');
    const redis = createRedisClient({ url: 'redis://127.0.0.1:1' }); // nothing listens there
    t.after(() => redis.disconnect());
    const h = harness(redis, 10);
    const outcome = await admitOnce(h.event('u'), h.admission);
    assert.equal(outcome.kind, 'refused');
    assert.equal(outcome.kind === 'refused' && outcome.decided.outcome, 'degraded-closed');
    assert.equal(h.sunk.length, 0);
    assert.equal(h.observed.length, 1);
    assert.equal(h.observed[0]?.policy, 'slack-workspace');
    assert.equal(h.observed[0]?.proceed, false);
  });
});

/** A server of its own (SIGSTOP stalls it), its client, and a harness whose checks have 50 ms. */
async function stallable(t: { after: (fn: () => unknown) => void }) {
  const server = await startRedis();
  t.after(() => server.stop());
  const { createRedisClient } = await import('@platform/rate-limit');
  const redis = createRedisClient({ url: server.url });
  t.after(() => redis.disconnect());
  await connected(redis);
  const h = harness(redis, 10, { timeBudget: '50 ms' });
  /** One admission while Redis is stalled (SIGSTOP: a failover, a fork or a slow command), resumed after. */
  const stalled = async (id: string) => {
    server.pause();
    try {
      return await admitOnce(h.event(id), h.admission);
    } finally {
      server.resume();
    }
  };
  return { redis, h, stalled };
}

describe('admitOnce when Redis stalls past the budget and then runs the check', () => {
  it("gives back the claim the late script takes, so the sender's retry is admitted, not answered duplicate", async (t) => {
    const { redis, h, stalled } = await stallable(t);
    assert.equal((await admitOnce(h.event('warm'), h.admission)).kind, 'admitted'); // the script is loaded
    const first = await stalled('Ev1');
    assert.equal(first.kind === 'refused' && first.decided.outcome, 'degraded-closed');
    // answered after the late script and the give-back, both sent before it on this connection
    await redis.ping();
    assert.equal(await redis.exists(`wh:{slack:${h.scope}}:seen:Ev1`), 0, 'no claim left by the late script');
    assert.equal((await admitOnce(h.event('Ev1'), h.admission)).kind, 'admitted');
    assert.deepEqual(
      h.sunk.map((e) => e.id),
      ['warm', 'Ev1'],
    );
  });
});

describe("admitOnce when a redelivery's check stalls past the budget and then runs late", () => {
  it('leaves the claim of the delivery that was handed on: the late script answers duplicate, and its give-back deletes nothing', async (t) => {
    const { redis, h, stalled } = await stallable(t);
    assert.equal((await admitOnce(h.event('Ev2'), h.admission)).kind, 'admitted'); // handed on, its claim held
    const redelivery = await stalled('Ev2'); // the sender's redelivery finds Redis stalled
    assert.equal(redelivery.kind === 'refused' && redelivery.decided.outcome, 'degraded-closed');
    await redis.ping(); // after the late script (a duplicate: no write) and the redelivery's give-back
    assert.equal(await redis.exists(`wh:{slack:${h.scope}}:seen:Ev2`), 1, 'the first delivery keeps its claim');
    assert.equal((await admitOnce(h.event('Ev2'), h.admission)).kind, 'duplicate', 'not handed on a second time');
    assert.deepEqual(
      h.sunk.map((e) => e.id),
      ['Ev2'],
    );
  });
});

describe('admitOnce when the connection is cut after Redis ran the check, before its reply', () => {
  it("gives back the claim the lost check took, once connected again: a kept claim (the listener's) is not left to answer duplicate", async (t) => {
    // Prepare: the client through a proxy whose replies can be held back, an admin client direct; the Mattermost
    // listener's shape: the claim kept on a refusal, no pending time (nothing would ever take it over)
    const node = await proxiedNode(t);
    const { redis, admin } = node;
    const h = harness(redis, 10, { timeBudget: '3 s', keepsClaim: true });
    assert.equal((await admitOnce(h.event('warm'), h.admission)).kind, 'admitted'); // the script is loaded
    const claimKey = `wh:{slack:${h.scope}}:seen:Ev1`;

    // Act: the check goes out with the replies held back; once Redis ran it (the claim is there) the connection
    // is cut, then taken again
    const first = await cutAfterRun(
      node,
      () => admitOnce(h.event('Ev1'), h.admission),
      async () => (await admin.exists(claimKey)) === 1,
    );

    // Assess: refused undecided, its claim given back; the retry is admitted and handed on, not a duplicate
    assert.equal(first.kind === 'refused' && first.decided.outcome, 'degraded-closed');
    assert.equal(first.kind === 'refused' && first.givenBack, 'given');
    assert.equal(await admin.exists(claimKey), 0, 'no claim left by the lost check');
    assert.equal((await admitOnce(h.event('Ev1'), h.admission)).kind, 'admitted');
    assert.deepEqual(
      h.sunk.map((e) => e.id),
      ['warm', 'Ev1'],
    );
  });
});

describe('a webhook retry after a Redis restart, the claim folded into the check', () => {
  let server: RedisProcess;
  before(async () => {
    server = await startRedis({ durable: true }); // append-only file on, as the production shape
  });
  after(() => server.stop());

  const client = async () => {
    const { createRedisClient } = await import('@platform/rate-limit');
    const redis = createRedisClient({ url: server.url });
    await connected(redis);
    return redis;
  };

  it('is still a duplicate after a graceful restart (the claim and the count persisted together)', async () => {
    const before = await client();
    const h = harness(before, 10);
    const e = h.event('Ev-restart');
    assert.equal((await admitOnce(e, h.admission)).kind, 'admitted');
    before.disconnect();

    server = await server.restart();
    const afterRestart = await client();
    try {
      const again = harness(afterRestart, 10, { scope: h.scope });
      const outcome = await admitOnce(again.event('Ev-restart'), again.admission); // the same event, delivered again
      assert.equal(outcome.kind, 'duplicate');
      assert.equal(again.sunk.length, 0, 'not forwarded again');
      assert.equal(await again.counted(), 1, 'counted once, before the restart');
    } finally {
      afterRestart.disconnect();
    }
  });

  it('is still a duplicate after a crash (SIGKILL) when every acknowledged write is durable (appendfsync always, as Valkey durability sync)', async () => {
    // the production store acknowledges a write only once it is in the Multi-AZ log; locally: fsync per write
    assert.match(await rawCommand(server.port, 'CONFIG SET appendfsync always'), /OK/);
    const redis = await client();
    const scope = unique('T');
    const limiter = createLimiter({ redis, policies: catalogue(10), onDegraded: () => {} });
    const once = new AcceptedOnce(redis);
    const limits = [{ policy: 'slack-workspace', key: scope }];
    const first = await enforceOnce(limiter, limits, once.claimOf('slack', scope, 'Ev-crash'), { scope });
    assert.equal(first.kind === 'decided' && first.verdict.outcome, 'allowed');
    redis.disconnect();

    await server.kill();
    server = await server.restart();
    const revived = await client();
    try {
      const limiterAfter = createLimiter({ redis: revived, policies: catalogue(10), onDegraded: () => {} });
      const onceAfter = new AcceptedOnce(revived);
      const retry = await enforceOnce(limiterAfter, limits, onceAfter.claimOf('slack', scope, 'Ev-crash'), { scope });
      assert.equal(retry.kind, 'duplicate');
      const peek = await limiterAfter.peek(limits, { scope });
      assert.equal(peek.outcome === 'allowed' && peek.limits[0]?.remaining, 9, 'counted once, before the crash');
    } finally {
      revived.disconnect();
    }
  });
});
