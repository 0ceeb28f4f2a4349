/**
 * Lua against the reference model: random sequences of checks, peeks, failures
 * and policy changes at pinned times must get identical decisions from both.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { PolicyConfig } from '@platform/rate-limit';
import { type CompiledPolicy, compilePolicy, InvalidCheckError } from '@platform/rate-limit';
import { checkReplyLayout, parseCheckReply } from '@platform/rate-limit/lua';
import { toUs } from '@platform/rate-limit/policy';
import fc from 'fast-check';
import { type ModelLimit, modelInterval, ReferenceModel } from '../model/reference-model.ts';
import { pinnedLimiter, recordingReplies, targets, unique } from '../support/targets.ts';

const group = unique('prop');
// a generous budget: this compares decisions, not latency (a loaded CI machine)
const timeBudget = '5 s';
const VARIANTS: Record<'tb' | 'sw' | 'bo', PolicyConfig[]> = {
  tb: [
    { strategy: 'tokenBucket', capacity: 3, refill: { tokens: 1, every: '1 s' }, group, timeBudget },
    { strategy: 'tokenBucket', capacity: 5, refill: { tokens: 3, every: '1 s' }, group, timeBudget },
    { strategy: 'tokenBucket', capacity: 1, refill: { tokens: 2, every: '250 ms' }, group, timeBudget },
    // refill intervals that are not whole µs (the rounding is part of the definition)
    { strategy: 'tokenBucket', capacity: 7, refill: { tokens: 3, every: '1 s' }, group, timeBudget },
    { strategy: 'tokenBucket', capacity: 1, refill: { tokens: 6, every: '1 s' }, group, timeBudget },
    { strategy: 'tokenBucket', capacity: 10, refill: { tokens: 9, every: '4 s' }, group, timeBudget },
  ],
  sw: [
    { strategy: 'slidingWindow', limit: 3, window: '1 s', group, timeBudget },
    { strategy: 'slidingWindow', limit: 5, window: '2 s', group, timeBudget },
    { strategy: 'slidingWindow', limit: 2, window: '1 s', group, timeBudget },
    // large enough for the ring's k-ary search and wrap-around to run
    { strategy: 'slidingWindow', limit: 40, window: '1 s', group, timeBudget },
  ],
  bo: [{ strategy: 'failureBackoff', freeFailures: 1, base: '100 ms', max: '1 s', memory: '5 s', group, timeBudget }],
};
type Kind = keyof typeof VARIANTS;

function modelLimit(config: PolicyConfig, key: string, cost: number): ModelLimit {
  switch (config.strategy) {
    case 'tokenBucket':
      return {
        kind: 'tb',
        key,
        capacity: config.capacity,
        intervalUs: modelInterval(toUs(config.refill.every), config.refill.tokens),
        cost,
      };
    case 'slidingWindow':
      return { kind: 'sw', key, limit: config.limit, windowUs: toUs(config.window), cost };
    case 'failureBackoff':
      return {
        kind: 'bo',
        key,
        baseUs: toUs(config.base),
        maxUs: toUs(config.max),
        free: config.freeFailures,
        memoryUs: toUs(config.memory),
      };
    case 'quota':
      return { kind: 'qt', key, limit: config.limit, period: config.period, offsetUs: 0, cost };
    case 'concurrency':
      throw new TypeError('in-flight limits have their own model test (concurrency.property.test.ts)');
  }
}

const kind = fc.constantFrom<Kind>('tb', 'sw', 'bo');
const keyName = fc.constantFrom('a', 'b');
const command = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('advance' as const),
      us: fc.oneof(
        fc.constant(0),
        fc.integer({ min: 1, max: 999 }),
        fc.integer({ min: 1000, max: 999_999 }),
        fc.integer({ min: 1_000_000, max: 6_000_000 }),
      ),
    }),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.constantFrom('check' as const, 'peek' as const),
      limits: fc.uniqueArray(
        fc.record({ kind, key: keyName, cost: fc.oneof(fc.integer({ min: 1, max: 3 }), fc.constantFrom(5, 7, 10)) }),
        {
          minLength: 1,
          maxLength: 3,
          selector: (l) => `${l.kind}:${l.key}`,
        },
      ),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('fail' as const), key: keyName }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('clear' as const), key: keyName }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('reconfigure' as const), kind, variant: fc.nat({ max: 5 }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('burst' as const),
      key: keyName,
      count: fc.integer({ min: 1, max: 45 }),
      spacingUs: fc.integer({ min: 0, max: 50_000 }),
    }),
  },
);

for (const target of targets) {
  describe(`Lua and the reference model on a ${target.name}`, () => {
    const redis = target.client();
    const recorded = recordingReplies(redis);
    after(() => redis.disconnect());

    it('give identical decisions for random sequences at pinned times', async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 50 }), async (commands) => {
          // Prepare: one fresh key space per run
          const run = unique('run');
          const clock = { nowUs: 1_800_000_000_000_000 };
          const current: Record<Kind, { config: PolicyConfig; compiled: CompiledPolicy }> = {
            tb: { config: VARIANTS.tb[0] as PolicyConfig, compiled: compilePolicy('p-tb', VARIANTS.tb[0]) },
            sw: { config: VARIANTS.sw[0] as PolicyConfig, compiled: compilePolicy('p-sw', VARIANTS.sw[0]) },
            bo: { config: VARIANTS.bo[0] as PolicyConfig, compiled: compilePolicy('p-bo', VARIANTS.bo[0]) },
          };
          const byName = new Map(Object.entries(current).map(([k, v]) => [v.compiled.name, k as Kind]));
          const limiter = pinnedLimiter(
            {
              redis: recorded.client,
              policies: { resolve: (name) => current[byName.get(name) as Kind]?.compiled },
              onDegraded: (e) => assert.fail(`degraded: ${e.detail}`),
            },
            clock,
          );
          const model = new ReferenceModel();
          const boLimit = (key: string) =>
            modelLimit(current.bo.config, `${run}-${key}`, 1) as ModelLimit & { kind: 'bo' };

          for (const c of commands) {
            switch (c.op) {
              case 'advance':
                clock.nowUs += c.us;
                break;
              case 'reconfigure': {
                const variants = VARIANTS[c.kind];
                const config = variants[c.variant % variants.length] as PolicyConfig;
                current[c.kind] = { config, compiled: compilePolicy(`p-${c.kind}`, config) };
                break;
              }
              case 'fail': {
                const outcome = await limiter.recordFailure('p-bo', `${run}-${c.key}`, { scope: run });
                const expected = model.recordFailure(boLimit(c.key), clock.nowUs);
                assert.equal(recorded.last(), expected);
                assert.deepEqual(outcome, { decided: true, nextWaitMs: Math.ceil(expected / 1000) });
                break;
              }
              case 'burst':
                for (let i = 0; i < c.count; i++) {
                  const decision = await limiter.check({ policy: 'p-sw', key: `${run}-${c.key}` }, { scope: run });
                  const reply = model.check([modelLimit(current.sw.config, `${run}-${c.key}`, 1)], clock.nowUs);
                  assert.deepEqual(
                    checkReplyLayout([current.sw.compiled], recorded.last()),
                    reply,
                    'replies (µs) differ',
                  );
                  assert.deepEqual(decision, parseCheckReply([current.sw.compiled], reply));
                  clock.nowUs += c.spacingUs;
                }
                break;
              case 'clear':
                assert.deepEqual(await limiter.clearFailures('p-bo', `${run}-${c.key}`, { scope: run }), {
                  decided: true,
                });
                model.clearFailures(`${run}-${c.key}`);
                break;
              case 'check':
              case 'peek': {
                const requests = c.limits.map((l) => ({ policy: `p-${l.kind}`, key: `${run}-${l.key}`, cost: l.cost }));
                const compiled = c.limits.map((l) => current[l.kind].compiled);
                const tooDear = c.limits.some(
                  (l, i) => l.kind !== 'bo' && l.cost > (compiled[i] as CompiledPolicy).maxCost,
                );
                // a backoff takes no cost: the check uses 1
                const effective = c.limits.map((l) => (l.kind === 'bo' ? { ...l, cost: 1 } : l));
                const act = () =>
                  c.op === 'check'
                    ? limiter.checkAll(
                        requests.map((r, i) => ({ ...r, cost: (effective[i] as { cost: number }).cost })),
                        { scope: run },
                      )
                    : limiter.peek(
                        requests.map((r, i) => ({ ...r, cost: (effective[i] as { cost: number }).cost })),
                        { scope: run },
                      );
                if (tooDear) {
                  await assert.rejects(act(), InvalidCheckError);
                  break;
                }
                const decision = await act();
                const reply = model.check(
                  effective.map((l) => modelLimit(current[l.kind].config, `${run}-${l.key}`, l.cost)),
                  clock.nowUs,
                  c.op === 'check',
                );
                assert.deepEqual(checkReplyLayout(compiled, recorded.last()), reply, 'replies (µs) differ');
                assert.deepEqual(decision, parseCheckReply(compiled, reply));
                break;
              }
            }
          }
        }),
        { numRuns: 100 },
      );
    });
  });
}
