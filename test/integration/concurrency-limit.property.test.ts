/**
 * The in-flight limit (lua/lib/concurrency.lua, lua/release.lua) against its
 * reference model at pinned times: acquires, releases (twice: idempotent),
 * holders that crash between acquire and release (their lease lapses at its
 * TTL, never sooner), and time that runs past TTLs. Then 8 OS processes with
 * the Redis clock: at no instant do they hold more than `limit` leases.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { type CompiledPolicy, compilePolicy } from '@platform/rate-limit';
import { checkReplyLayout, parseCheckReply } from '@platform/rate-limit/lua';
import fc from 'fast-check';
import { ReferenceModel } from '../model/reference-model.ts';
import { pinnedLimiter, recordingReplies, targets, unique } from '../support/targets.ts';

const WORKER = new URL('../support/lease-worker.ts', import.meta.url).pathname;

const command = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ op: 'acquire' as const }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('release' as const), which: fc.nat() }) },
  // a holder killed between acquire and release: its lease is simply never released
  { weight: 1, arbitrary: fc.record({ op: fc.constant('crash' as const), which: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ op: 'peek' as const }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('advance' as const),
      us: fc.oneof(fc.integer({ min: 0, max: 300_000 }), fc.constantFrom(999_999, 1_000_000, 1_000_001)),
    }),
  },
);

for (const target of targets) {
  describe(`The in-flight limit and its model on a ${target.name}`, () => {
    const redis = target.client();
    const recorded = recordingReplies(redis);
    after(() => redis.disconnect());

    it('give identical replies for acquires, releases, crashes and lapsed leases', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 4 }),
          fc.array(command, { minLength: 1, maxLength: 50 }),
          async (limit, commands) => {
            const name = unique('inflight');
            const policy: CompiledPolicy = compilePolicy(name, {
              strategy: 'concurrency',
              limit,
              leaseTtl: '1 s',
              timeBudget: '5 s',
            });
            const clock = { nowUs: 1_800_000_000_000_000 };
            const limiter = pinnedLimiter(
              { redis: recorded.client, policies: { resolve: () => policy }, onDegraded: (e) => assert.fail(e.detail) },
              clock,
            );
            const model = new ReferenceModel();
            const held: string[] = [];
            const gone: string[] = [];
            for (const c of commands) {
              if (c.op === 'advance') clock.nowUs += c.us;
              else if (c.op === 'acquire' || c.op === 'peek') {
                const decision =
                  c.op === 'acquire'
                    ? await limiter.check({ policy: name, key: 'k' })
                    : await limiter.peek([{ policy: name, key: 'k' }]);
                const lease = decision.outcome === 'allowed' ? (decision.limits[0]?.lease ?? 'peek') : 'refused';
                const reply = model.check(
                  [{ kind: 'cc', key: 'k', limit, ttlUs: 1_000_000, lease }],
                  clock.nowUs,
                  c.op === 'acquire',
                );
                assert.deepEqual(checkReplyLayout([policy], recorded.last()), reply, 'replies (µs) differ');
                const { lease: _lease, ...status } = decision.outcome === 'allowed' ? decision.binding : { lease: '' };
                if (decision.outcome === 'allowed' && c.op === 'acquire') {
                  assert.ok(decision.binding.lease, 'an admitted acquire names its lease');
                  held.push(decision.binding.lease as string);
                }
                const expected = parseCheckReply([policy], reply);
                if (decision.outcome === 'allowed' && expected.outcome === 'allowed')
                  assert.deepEqual(status, expected.binding);
                else assert.deepEqual(decision, expected);
              } else if (held.length + gone.length > 0) {
                const pool = c.op === 'release' ? [...held, ...gone] : held;
                if (pool.length === 0) continue;
                const lease = pool[c.which % pool.length] as string;
                held.splice(held.indexOf(lease), held.includes(lease) ? 1 : 0);
                if (c.op === 'crash') continue; // never released: it must lapse on its own
                gone.push(lease);
                const answer = await limiter.release(name, 'k', lease);
                assert.deepEqual(answer, { decided: true, released: model.release('k', lease, clock.nowUs) === 1 });
              }
            }
          },
        ),
        { numRuns: 80 },
      );
    });
  });
}

describe('8 processes sharing an in-flight limit of 3 (Redis clock)', () => {
  it('never hold more than 3 leases at once, and do hold 3', async (t) => {
    const name = unique('inflight8');
    const catalogue = { [name]: { strategy: 'concurrency', limit: 3, leaseTtl: '5 s', timeBudget: '5 s' } };
    const target = targets[0] as (typeof targets)[number];
    const input = { redis: target.settings(), catalogue, policy: name, key: 'tenant', ms: 1500 };
    const runs = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const { stdout } = await promisify(execFile)(process.execPath, [WORKER, JSON.stringify(input)]);
        return JSON.parse(stdout) as { held: [number, number][]; refused: number; degraded: number };
      }),
    );
    // every hold, from the acquire's answer to the release's sending: inside Redis's own interval
    const events = runs.flatMap((r) => r.held.flatMap(([from, to]) => [[from, 1] as const, [to, -1] as const]));
    events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let now = 0;
    let most = 0;
    for (const [, delta] of events) {
      now += delta;
      most = Math.max(most, now);
    }
    const holds = runs.reduce((n, r) => n + r.held.length, 0);
    t.diagnostic(
      `${holds} leases held by 8 processes, at most ${most} at once; ${runs.reduce((n, r) => n + r.refused, 0)} refused`,
    );
    assert.equal(
      runs.reduce((n, r) => n + r.degraded, 0),
      0,
    );
    assert.ok(most <= 3, `at most the limit at once: ${most}`);
    assert.equal(most, 3, 'the limit is reached');
  });
});
