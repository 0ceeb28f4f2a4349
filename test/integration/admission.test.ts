/**
 * The once-only admission (functions/shared/admission.ts) against a real
 * Redis: which way out keeps the claim (an admission, a kept refusal) and
 * which gives it back (a refusal, a sink failure), and an untaken claim
 * refused fail-closed and observed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createRedisClient, type Verdict } from '@platform/rate-limit';
import { type Admission, admitOnce } from '../../functions/shared/admission.ts';
import { AcceptedOnce } from '../../functions/shared/once.ts';
import type { AcceptedEvent } from '../../functions/shared/sink.ts';

const event = (id: string): AcceptedEvent => ({ source: 'slack', id, scope: `adm-${process.pid}`, payload: { id } });

function harness(once: AcceptedOnce, decide: () => 'yes' | 'no', sinkFails = () => false) {
  const sunk: AcceptedEvent[] = [];
  const observed: Verdict[] = [];
  let checks = 0;
  const admission: Admission<'yes' | 'no'> = {
    once,
    sink: {
      put: async (e) => {
        if (sinkFails()) throw new Error('queue down');
        sunk.push(e);
      },
    },
    budgetMs: 1000,
    policy: 'slack-workspace',
    observer: { observe: (v) => observed.push(v) },
    check: async () => {
      checks++;
      return decide();
    },
    admits: (d) => d === 'yes',
  };
  return { admission, sunk, observed, checks: () => checks };
}

describe('admitOnce', () => {
  it('admits once: the event is sunk without its limits, and a redelivery is a duplicate, not checked again', async (t) => {
    const redis = createRedisClient({ url: process.env.REDIS_URL as string });
    t.after(() => redis.disconnect());
    const h = harness(new AcceptedOnce(redis), () => 'yes');
    const e = event(`a-${Date.now()}`);
    assert.equal((await admitOnce(e, h.admission)).kind, 'admitted');
    assert.deepEqual((await admitOnce(e, h.admission)).kind, 'duplicate');
    assert.deepEqual(h.sunk, [e]);
    assert.equal(h.checks(), 1);
  });

  it('gives the claim back when refused (a redelivery counts again) unless the caller keeps it', async (t) => {
    const redis = createRedisClient({ url: process.env.REDIS_URL as string });
    t.after(() => redis.disconnect());
    const once = new AcceptedOnce(redis);
    const released = harness(once, () => 'no');
    const e = event(`r-${Date.now()}`);
    assert.equal((await admitOnce(e, released.admission)).kind, 'refused');
    assert.equal((await admitOnce(e, released.admission)).kind, 'refused');
    assert.equal(released.checks(), 2, 'checked again: the claim was given back');

    const kept = harness(once, () => 'no');
    const k = event(`k-${Date.now()}`);
    const keeping = { ...kept.admission, keepsClaim: (d: 'yes' | 'no') => d === 'no' };
    assert.equal((await admitOnce(k, keeping)).kind, 'refused');
    assert.equal((await admitOnce(k, keeping)).kind, 'duplicate');
    assert.equal(kept.checks(), 1);
  });

  it('gives the claim back when the sink fails, so the retry is admitted', async (t) => {
    const redis = createRedisClient({ url: process.env.REDIS_URL as string });
    t.after(() => redis.disconnect());
    let down = true;
    const h = harness(
      new AcceptedOnce(redis),
      () => 'yes',
      () => down,
    );
    const e = event(`s-${Date.now()}`);
    const first = await admitOnce(e, h.admission);
    assert.equal(first.kind, 'unsunk');
    assert.match(String(first.kind === 'unsunk' && first.error), /queue down/);
    down = false;
    assert.equal((await admitOnce(e, h.admission)).kind, 'admitted');
    assert.equal(h.sunk.length, 1);
  });

  it('refuses fail-closed when Redis cannot take the claim, observed as the policy degraded, never checked', async (t) => {
    const redis = createRedisClient({ url: 'redis://127.0.0.1:1' }); // nothing listens there
    t.after(() => redis.disconnect());
    const h = harness(new AcceptedOnce(redis), () => 'yes');
    const outcome = await admitOnce(event('u'), { ...h.admission, budgetMs: 200 });
    assert.equal(outcome.kind, 'unclaimed');
    assert.equal(h.checks(), 0);
    assert.equal(h.sunk.length, 0);
    assert.equal(h.observed.length, 1);
    assert.equal(h.observed[0]?.outcome, 'degraded-closed');
    assert.equal(h.observed[0]?.policy, 'slack-workspace');
    assert.equal(h.observed[0]?.proceed, false);
  });
});
