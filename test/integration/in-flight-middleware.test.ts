/**
 * The middleware and an in-flight limit in a real Middy stack against real
 * Redis: the lease is taken before the handler and given back after it, on
 * success, on a thrown error, and, for a handler that outlives its
 * invocation, shortly before the Lambda's timeout (the remaining-time
 * signal), so the slot is free again without waiting for the lease's TTL.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import middy from '@middy/core';
import httpErrorHandler from '@middy/http-error-handler';
import { createLimiter } from '@platform/rate-limit';
import { clientIp, type HttpEvent, rateLimit } from '@platform/rate-limit/middleware';
import type { Context } from 'aws-lambda';
import { restEvent } from '../support/events.ts';
import { policies, targets, unique } from '../support/targets.ts';

type Response = { statusCode: number; headers: Record<string, string>; body: string };

for (const target of targets) {
  describe(`An in-flight limit in the middleware on a ${target.name}`, () => {
    const redis = target.client();
    after(() => redis.disconnect());

    function stackWith(handler: () => Promise<Response>) {
      const policy = unique('inflight');
      // one slot, and a lease TTL far longer than the test: only a release can free it
      const catalogue = policies({ [policy]: { strategy: 'concurrency', limit: 1, leaseTtl: '10 m' } });
      const limiter = createLimiter({ redis, policies: catalogue });
      const invoke = middy<HttpEvent, Response>(handler)
        .use(httpErrorHandler({ logger: false }))
        .use(rateLimit({ limiter, limits: [{ policy, key: clientIp }] }));
      const slotFree = async () => (await limiter.peek([{ policy, key: clientIp(restEvent()) }])).outcome === 'allowed';
      return { invoke, slotFree };
    }

    it('holds the slot while the handler runs and gives it back after it', async () => {
      let during: boolean | undefined;
      const api = stackWith(async () => {
        during = await api.slotFree();
        return { statusCode: 200, headers: {}, body: 'ok' };
      });
      const answer = (await api.invoke(restEvent(), {} as Context)) as Response;
      assert.equal(answer.statusCode, 200);
      assert.equal(during, false, 'the running request holds the only slot');
      assert.equal(await api.slotFree(), true, 'released after the handler');
    });

    it('refuses a second request while the first holds the slot (429), and admits it after', async () => {
      let release: () => void = () => {};
      const api = stackWith(
        () =>
          new Promise((resolve) => {
            release = () => resolve({ statusCode: 200, headers: {}, body: 'ok' });
          }),
      );
      const first = api.invoke(restEvent(), {} as Context);
      while (await api.slotFree()) await new Promise((resolve) => setImmediate(resolve));
      const second = (await api.invoke(restEvent(), {} as Context)) as Response;
      assert.equal(second.statusCode, 429);
      release();
      assert.equal(((await first) as Response).statusCode, 200);
      assert.equal(await api.slotFree(), true);
    });

    it('gives the slot back when the handler throws', async () => {
      const api = stackWith(async () => {
        throw new Error('provider failed');
      });
      const answer = (await api.invoke(restEvent(), {} as Context)) as Response;
      assert.equal(answer.statusCode, 500);
      assert.equal(await api.slotFree(), true, 'released on error');
    });

    it('gives the slot back before the invocation times out, while the handler still runs', async () => {
      let finish: () => void = () => {};
      const api = stackWith(
        () =>
          new Promise((resolve) => {
            finish = () => resolve({ statusCode: 200, headers: {}, body: 'late' });
          }),
      );
      const deadline = Date.now() + 800; // the Lambda is killed then; the middleware releases 500 ms before
      const context = { getRemainingTimeInMillis: () => deadline - Date.now() } as Context;
      const running = api.invoke(restEvent(), context);
      while (await api.slotFree()) await new Promise((resolve) => setImmediate(resolve));
      // the handler never returns before the deadline: the release must come from the remaining-time signal
      while (!(await api.slotFree())) {
        assert.ok(Date.now() < deadline + 2000, 'released by the remaining-time signal');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.ok(Date.now() < deadline, 'before the invocation would have been killed');
      finish();
      await running;
    });
  });
}
