/**
 * A harvesting worker's pages against real Redis, on a single node and on the
 * production-shaped cluster (as the functions' ACL user): every page taken is
 * handed on, given up and reported, or put back in the scope's retry set for
 * the next taker; never lost (a worker that crashes holding one leaves a
 * lease that lapses), and never fetched by two workers at once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createLimiter, createRedisClient, type RedisClient } from '@platform/rate-limit';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { AdaptivePacer } from '../../functions/harvester/pacer.ts';
import type { SourceAnswer } from '../../functions/harvester/source.ts';
import {
  type HarvestReport,
  harvest,
  harvestInRounds,
  LEASE_GRACE_MS,
  PAGE_RETRIES,
  putBack,
  takePage,
} from '../../functions/harvester/worker.ts';
import { AcceptedOnce } from '../../functions/shared/once.ts';
import type { AcceptedEvent, EventSink } from '../../functions/shared/sink.ts';
import { HARVESTER_POLICY } from '../../functions/workers.ts';
import { freePort } from '../../scripts/redis-process.ts';
import { connected, policies, targets, unique } from '../support/targets.ts';

const shipped = PLATFORM_POLICIES[HARVESTER_POLICY] as { adaptive: object };
/** The shipped policy, roomy: these tests are about pages, not pace. */
const roomy = {
  ...shipped,
  capacity: 100,
  refill: { tokens: 1000, every: '1 s' },
  adaptive: { ...shipped.adaptive, min: 1, max: 1000 },
  timeBudget: '5 s',
};

const PAGE: SourceAnswer = { kind: 'page', bytes: 1 };

/** Resolves once `condition` holds, asking again on the next turn of the event loop (no fixed sleeps). */
async function until(condition: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const started = Date.now();
  while (!(await condition())) {
    if (Date.now() - started > timeoutMs) throw new Error('condition not met in time');
    await new Promise((resolve) => setImmediate(resolve));
  }
}
const pageOf = (url: string) => Number(url.split('/').at(-1));

/** What the sink took, by page. */
function memorySink(refuse: (event: AcceptedEvent) => boolean = () => false): EventSink & { pages: number[] } {
  const pages: number[] = [];
  return {
    pages,
    async put(event) {
      if (refuse(event)) throw new Error('SQS: ThrottlingException');
      pages.push(Number(event.id));
    },
  };
}

for (const target of targets) {
  describe(`A harvesting worker's pages, on a ${target.name}`, () => {
    let redis: RedisClient;
    before(async () => {
      redis = target.client();
      await connected(redis);
    });
    after(() => redis.disconnect());

    const limiter = () => createLimiter({ redis, policies: policies({ [HARVESTER_POLICY]: roomy }) });
    const pacer = () => new AdaptivePacer({ limiter: limiter(), once: new AcceptedOnce(redis) });
    /** The pages waiting in a scope's retry set, as `<page>:<failures>`. */
    const waiting = (scope: string) => redis.zrangebyscore(`hv:{${scope}}:retry`, '-inf', '+inf');
    /** The pages a worker holds, as `<page>:<failures>`. */
    const leased = (scope: string) => redis.zrangebyscore(`hv:{${scope}}:leased`, '-inf', '+inf');

    /**
     * One run on `scope` until `stop` is aborted (by the test's source or sink). The waits after a failure
     * are recorded in `waits` and not waited (the source's answers are the test's, not a clock's).
     */
    function run(
      scope: string,
      stop: AbortController,
      fetch: (url: string) => Promise<SourceAnswer>,
      sink: EventSink,
      until = Number.POSITIVE_INFINITY,
      waits: number[] = [],
    ): Promise<HarvestReport> {
      return harvest(
        { scope, pageUrl: (page) => `/sites/${scope}/pages/${page}`, until, stop: stop.signal },
        { pacer: pacer(), redis, sink, fetch, sleep: async (ms) => void waits.push(ms) },
      );
    }

    /** A source that serves every page and stops the run once the sink holds `pages` of them. */
    const servesUntil = (sink: { pages: number[] }, pages: number, stop: AbortController) => async () => {
      if (sink.pages.length >= pages - 1) stop.abort();
      return PAGE;
    };

    it('puts back a page throttled as the run ends; the next run fetches it first', { timeout: 30_000 }, async () => {
      const scope = unique('hv-throttled');
      const sink = memorySink();
      const first = new AbortController();
      const report = await run(
        scope,
        first,
        async () => {
          first.abort(); // the run ends while the source pushes back
          return { kind: 'throttled', status: 429, retryAfterMs: 0 };
        },
        sink,
      );
      assert.equal(report.throttled, 1);
      assert.deepEqual(await waiting(scope), ['1:1'], 'page 1 waits for the next taker, its throttled run counted');
      const second = new AbortController();
      await run(scope, second, servesUntil(sink, 3, second), sink);
      assert.deepEqual(sink.pages, [1, 2, 3], 'a throttled page is never skipped');
      assert.deepEqual(await waiting(scope), []);
    });

    it(`gives a page up that every run ends throttled on, after ${PAGE_RETRIES} more runs`, async () => {
      const scope = unique('hv-always-throttled');
      const sink = memorySink();
      const reports: HarvestReport[] = [];
      for (let i = 0; i <= PAGE_RETRIES; i++) {
        const stop = new AbortController();
        reports.push(
          await run(
            scope,
            stop,
            async () => {
              stop.abort(); // the run ends while the source throttles page 1, as it always does
              return { kind: 'throttled', status: 503, retryAfterMs: 0 };
            },
            sink,
          ),
        );
      }
      assert.deepEqual(reports.at(-1)?.givenUpPages, [1], 'given up, not taken first by every run forever');
      assert.deepEqual(await waiting(scope), []);
    });

    it('ends the run at once when the pause outlasts it, its page put back', { timeout: 20_000 }, async () => {
      const scope = unique('hv-long-pause');
      const stop = new AbortController();
      const paced = pacer();
      const report = await harvest(
        { scope, pageUrl: (page) => `/p/${page}`, until: Date.now() + 30_000, stop: stop.signal },
        {
          pacer: paced,
          redis,
          sink: memorySink(),
          fetch: async () => ({ kind: 'throttled', status: 503, retryAfterMs: 60_000 }),
        },
      );
      assert.equal(report.throttled, 1);
      assert.equal(paced.stats.waits, 0, 'no wait the run could not finish');
      assert.deepEqual(await waiting(scope), ['1:1'], 'put back, its throttled run counted');
    });

    it('fetches a page whose fetch failed again: a passing failure loses nothing', { timeout: 30_000 }, async () => {
      const scope = unique('hv-transient');
      const sink = memorySink();
      const stop = new AbortController();
      const serve = servesUntil(sink, 3, stop);
      let failedOnce = false;
      const report = await run(
        scope,
        stop,
        async (url) => {
          if (pageOf(url) === 1 && !failedOnce) {
            failedOnce = true;
            return { kind: 'failed', status: 500 };
          }
          return serve();
        },
        sink,
      );
      assert.deepEqual(sink.pages, [1, 2, 3]);
      assert.deepEqual({ failed: report.failed, givenUp: report.givenUp }, { failed: 1, givenUp: 0 });
    });

    it(`sets a page the source keeps failing aside and goes on; gives it up after ${PAGE_RETRIES + 1} runs failed it`, {
      timeout: 30_000,
    }, async () => {
      const scope = unique('hv-given-up');
      const sink = memorySink();
      let fetchesOfPage1 = 0;
      const reports: HarvestReport[] = [];
      for (let r = 0; r <= PAGE_RETRIES; r++) {
        const stop = new AbortController();
        const served = sink.pages.length;
        const waits: number[] = [];
        const report = await run(
          scope,
          stop,
          async (url) => {
            if (pageOf(url) === 1) {
              fetchesOfPage1++;
              return { kind: 'failed', status: 'network' };
            }
            if (sink.pages.length >= served + 1) stop.abort();
            return PAGE;
          },
          sink,
          Number.POSITIVE_INFINITY,
          waits,
        );
        reports.push(report);
        assert.deepEqual(waits, [1000, 2000, 4000, 8000], `run ${r}: a wait before each fetch again, doubling`);
        assert.equal(report.pages, 2, `run ${r}: the scope goes on past the page set aside`);
        if (r < PAGE_RETRIES) assert.deepEqual(await waiting(scope), [`1:${r + 1}`], `run ${r}: one failure counted`);
      }
      assert.equal(fetchesOfPage1, (PAGE_RETRIES + 1) ** 2, 'each run fetched it once and retried it');
      assert.deepEqual(
        reports.map((r) => r.givenUpPages),
        [[], [], [], [1]],
      );
      assert.deepEqual(sink.pages, [2, 3, 4, 5, 6, 7, 8, 9]);
      assert.deepEqual(await waiting(scope), []);
      assert.deepEqual(await leased(scope), []);
    });

    it('outwaits a source that fails every page for a while: no page is given up, none skipped', {
      timeout: 30_000,
    }, async () => {
      // Prepare: the source's CDN answers 502 to its first 8 requests, whatever the page, then serves
      const scope = unique('hv-outage');
      const sink = memorySink();
      let requests = 0;
      const outage = (serve: () => Promise<SourceAnswer>) => async (): Promise<SourceAnswer> =>
        ++requests <= 8 ? { kind: 'failed', status: 502 } : serve();

      // Act: a run during the outage, then one after it
      const waits: number[] = [];
      const during = await run(
        scope,
        new AbortController(),
        outage(async () => PAGE),
        sink,
        Infinity,
        waits,
      );
      const afterStop = new AbortController();
      const afterwards = await run(scope, afterStop, outage(servesUntil(sink, 4, afterStop)), sink);

      // Assess: the run during it waited longer after each failure and ended once a second page failed too
      assert.deepEqual(waits, [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]);
      assert.deepEqual(
        { failed: during.failed, givenUp: during.givenUp, pages: during.pages },
        { failed: 8, givenUp: 0, pages: 0 },
      );
      assert.equal(afterwards.givenUp, 0);
      assert.deepEqual(sink.pages, [1, 2, 3, 4], 'every page handed on, in order, none skipped');
      assert.deepEqual(await waiting(scope), []);
    });

    it("ends the run rather than wait past its end after a failure; the page counts its run's failure", async () => {
      const scope = unique('hv-failed-at-end');
      const report = await run(
        scope,
        new AbortController(),
        async () => ({ kind: 'failed', status: 503 + 1 }),
        memorySink(),
        Date.now() + 500,
      );
      assert.equal(report.failed, 1, 'fetched once: the wait after it would outlast the run');
      assert.deepEqual(await waiting(scope), ['1:1']);
    });

    it('gives a page up at once for an answer a retry would not change (404)', async () => {
      const scope = unique('hv-missing');
      const sink = memorySink();
      const stop = new AbortController();
      const serve = servesUntil(sink, 2, stop);
      const fetched: number[] = [];
      const report = await run(
        scope,
        stop,
        async (url) => {
          fetched.push(pageOf(url));
          return pageOf(url) === 1 ? { kind: 'failed', status: 404 } : serve();
        },
        sink,
      );
      assert.deepEqual(fetched, [1, 2, 3]);
      assert.deepEqual(report.givenUpPages, [1]);
    });

    it('keeps a page the sink refused for a retry, and goes on: the run does not reject', async () => {
      const scope = unique('hv-sink');
      let refusals = 2;
      const sink = memorySink(() => refusals-- > 0);
      const stop = new AbortController();
      const report = await run(scope, stop, servesUntil(sink, 3, stop), sink);
      assert.equal(report.notHandedOn, 2);
      assert.deepEqual(sink.pages, [1, 2, 3], 'page 1 handed on at its third fetch, once');
      assert.equal(report.pages, 3);
    });

    it('puts back a page the sink still refuses when the run ends', async () => {
      const scope = unique('hv-sink-down');
      const stop = new AbortController();
      let fetches = 0;
      const report = await run(
        scope,
        stop,
        async () => {
          if (++fetches === 3) stop.abort();
          return PAGE;
        },
        memorySink(() => true),
      );
      assert.deepEqual({ pages: report.pages, notHandedOn: report.notHandedOn }, { pages: 0, notHandedOn: 3 });
      assert.deepEqual(await waiting(scope), ['1:0']);
    });

    it('shares the pages between two workers: none fetched by both at once, none lost', {
      timeout: 60_000,
    }, async () => {
      const scope = unique('hv-shared');
      const sink = memorySink();
      const stop = new AbortController();
      const inFlight = new Set<number>();
      const overlaps: number[] = [];
      let fetches = 0;
      const fetch = async (url: string): Promise<SourceAnswer> => {
        const page = pageOf(url);
        if (inFlight.has(page)) overlaps.push(page);
        inFlight.add(page);
        // let the other worker take its turn while this page is in flight
        await new Promise((resolve) => setImmediate(resolve));
        inFlight.delete(page);
        if (sink.pages.length >= 30) stop.abort();
        const n = ++fetches;
        if (n % 7 === 0) return { kind: 'throttled', status: 429, retryAfterMs: 0 };
        if (n % 5 === 0) return { kind: 'failed', status: 502 };
        if (n % 11 === 0) return { kind: 'failed', status: 404 };
        return PAGE;
      };
      const reports = await Promise.all([run(scope, stop, fetch, sink), run(scope, stop, fetch, sink)]);
      assert.ok(
        reports.every((r) => r.pages > 0),
        'both workers harvested',
      );
      assert.deepEqual(overlaps, [], 'no page fetched by two workers at once');
      assert.equal(new Set(sink.pages).size, sink.pages.length, 'no page handed on twice');
      const cursor = Number(await redis.get(`hv:{${scope}}:cursor`));
      const putBack = (await waiting(scope)).map((member) => Number(member.split(':')[0]));
      const givenUp = reports.flatMap((r) => r.givenUpPages);
      const accounted = [...sink.pages, ...putBack, ...givenUp].sort((a, b) => a - b);
      assert.deepEqual(
        accounted,
        Array.from({ length: cursor }, (_, i) => i + 1),
        'every page taken is handed on, given up or put back, once',
      );
      assert.deepEqual(await leased(scope), [], 'every lease ended with its run');
    });

    /** Resolves once Redis's clock is past when the lease `lease` of `scope` lapses. */
    async function lapsed(scope: string, lease: string | undefined): Promise<void> {
      const lapses = Number(await redis.zscore(`hv:{${scope}}:leased`, lease ?? ''));
      await until(async () => {
        const [seconds, micros] = (await redis.call('TIME')) as [string, string];
        return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) > lapses;
      });
    }

    /** A worker that took a page, leased for 1 ms, and crashed. */
    async function crashedHolding(scope: string): Promise<number> {
      const taken = await takePage(redis, scope, 1, 5000);
      assert.ok(taken, 'taken');
      await lapsed(scope, taken.lease);
      return taken.page;
    }

    /** A run on `scope` whose source serves every page until the sink holds `pages`: what it fetched, in order. */
    async function servedRun(scope: string, pages: number) {
      const sink = memorySink();
      const stop = new AbortController();
      const fetched: number[] = [];
      const serve = servesUntil(sink, pages, stop);
      const report = await run(
        scope,
        stop,
        async (url) => {
          fetched.push(pageOf(url));
          return serve();
        },
        sink,
      );
      return { report, fetched, sink };
    }

    it('takes first the page of a worker that crashed holding it, one failure counted', {
      timeout: 30_000,
    }, async () => {
      const scope = unique('hv-crashed');
      const lost = await crashedHolding(scope);
      const { report, fetched, sink } = await servedRun(scope, 3);
      assert.equal(fetched[0], lost, 'the lapsed page first');
      assert.deepEqual(sink.pages, [1, 2, 3]);
      assert.equal(report.givenUp, 0);
      assert.deepEqual(await leased(scope), []);
    });

    it(`gives up a page whose holders crashed ${PAGE_RETRIES + 1} times, without fetching it again`, {
      timeout: 30_000,
    }, async () => {
      const scope = unique('hv-poison');
      for (let crash = 0; crash <= PAGE_RETRIES; crash++) assert.equal(await crashedHolding(scope), 1);
      const { report, fetched } = await servedRun(scope, 1);
      assert.deepEqual(report.givenUpPages, [1]);
      assert.ok(!fetched.includes(1), 'not fetched a fifth time');
      assert.deepEqual(await leased(scope), []);
    });

    it('puts nothing back for a worker whose lease lapsed and was taken over: the page is held once', async () => {
      const scope = unique('hv-overtaken');
      const slow = await takePage(redis, scope, 1, 5000);
      assert.ok(slow);
      await lapsed(scope, slow.lease);
      const other = await takePage(redis, scope, 60_000, 5000);
      assert.deepEqual({ page: other?.page, failures: other?.failures }, { page: slow.page, failures: 1 });
      assert.ok(await putBack(redis, scope, slow, 5000));
      assert.deepEqual(await waiting(scope), [], 'not in the retry set while another worker holds it');
      assert.deepEqual(await leased(scope), [`${slow.page}:1`]);
    });

    it("goes in rounds past a lease's reach: no lease beyond its round, no page fetched twice", {
      timeout: 30_000,
    }, async () => {
      const scope = unique('hv-rounds');
      const roundMs = 400;
      const sink = memorySink();
      const fetched: number[] = [];
      /** How far past its fetch each held page's lease reached (ms). */
      const reach: number[] = [];
      const report = await harvestInRounds(
        { scope, pageUrl: (page) => `/p/${page}`, until: Date.now() + 4 * roundMs },
        {
          pacer: pacer(),
          redis,
          sink,
          fetch: async (url) => {
            fetched.push(pageOf(url));
            const [, score] = await redis.zrangebyscore(`hv:{${scope}}:leased`, '-inf', '+inf', 'WITHSCORES');
            reach.push(Number(score) - Date.now());
            return PAGE;
          },
        },
        roundMs,
      );
      assert.ok(fetched.length > 0);
      assert.ok(
        reach.every((ms) => ms <= roundMs + LEASE_GRACE_MS),
        `a lease reached ${Math.max(...reach)} ms past its fetch; a round is ${roundMs} ms and the grace ${LEASE_GRACE_MS}`,
      );
      assert.equal(new Set(fetched).size, fetched.length, 'no page fetched twice across rounds');
      assert.deepEqual(
        sink.pages,
        fetched.map((_, i) => i + 1),
        'pages in order, none skipped',
      );
      assert.equal(report.pages, sink.pages.length, "the rounds' reports summed");
      assert.deepEqual(await leased(scope), []);
    });

    it('waits out a round a long pause ended, instead of asking again in a loop', { timeout: 30_000 }, async () => {
      const scope = unique('hv-rounds-pause');
      const roundMs = 300;
      let turns = 0;
      const paced = pacer();
      const turn = paced.turn.bind(paced);
      paced.turn = (...args) => {
        turns++;
        return turn(...args);
      };
      const report = await harvestInRounds(
        { scope, pageUrl: (page) => `/p/${page}`, until: Date.now() + 5 * roundMs },
        {
          pacer: paced,
          redis,
          sink: memorySink(),
          fetch: async () => ({ kind: 'throttled', status: 503, retryAfterMs: 60_000 }),
        },
        roundMs,
      );
      // each round: one turn that fetches, or one the pause refuses at once; five rounds at most, and the first two turns of the first
      assert.ok(turns <= 7, `${turns} turns in 5 rounds of a pause`);
      assert.ok(report.throttled >= 1);
      assert.deepEqual(await leased(scope), []);
    });

    it('returns when a pause outlasts its last round (a Lambda run is one round), its page put back', {
      timeout: 20_000,
    }, async () => {
      const scope = unique('hv-rounds-last');
      const report = await harvestInRounds(
        { scope, pageUrl: (page) => `/p/${page}`, until: Date.now() + 60_000 },
        {
          pacer: pacer(),
          redis,
          sink: memorySink(),
          fetch: async () => ({ kind: 'throttled', status: 503, retryAfterMs: 120_000 }),
        },
      );
      assert.equal(report.throttled, 1);
      assert.deepEqual(await waiting(scope), ['1:1'], 'put back, its throttled run counted');
    });

    it("keeps a page throttled across rounds, taken first by each, its failure counted at the run's end only", {
      timeout: 30_000,
    }, async () => {
      const scope = unique('hv-rounds-throttled');
      const roundMs = 300;
      const fetched: number[] = [];
      const report = await harvestInRounds(
        { scope, pageUrl: (page) => `/p/${page}`, until: Date.now() + 8 * roundMs },
        {
          pacer: pacer(),
          redis,
          sink: memorySink(),
          fetch: async (url) => {
            fetched.push(pageOf(url));
            return { kind: 'throttled', status: 429, retryAfterMs: 200 };
          },
        },
        roundMs,
      );
      assert.ok(fetched.length >= 2 && fetched.every((page) => page === 1), `fetched ${fetched}`);
      assert.equal(report.givenUp, 0, 'not given up for the rounds it spans');
      assert.deepEqual(await waiting(scope), ['1:1'], 'one failure: the run ended once');
    });

    it("counts a throttled page's failure at the run's end when its last round gets no turn (the retry-after outlasts it)", {
      timeout: 20_000,
    }, async () => {
      // Prepare: a round throttled for 2 minutes, its page put back; the run's last round, 300 ms, gets no turn
      const scope = unique('hv-rounds-no-turn');
      const parts = {
        pacer: pacer(),
        redis,
        sink: memorySink(),
        fetch: async (): Promise<SourceAnswer> => ({ kind: 'throttled', status: 429, retryAfterMs: 120_000 }),
      };
      const carry = { last: 0, heldUnserved: false };
      const job = (ms: number) => ({ scope, pageUrl: (page: number) => `/p/${page}`, until: Date.now() + ms });
      await harvest(job(300), parts, { final: false, carry });
      assert.deepEqual(await waiting(scope), ['1:0'], 'put back between rounds, no failure yet');

      // Act
      await harvest(job(300), parts, { final: true, carry });

      // Assess
      assert.deepEqual(await waiting(scope), ['1:1'], "the run's end counted it");
    });

    it('refuses a round too short to be one (it would spin)', async () => {
      const job = { scope: unique('hv-rounds-bad'), pageUrl: (page: number) => `/p/${page}`, until: Date.now() + 1000 };
      const parts = { pacer: pacer(), redis, sink: memorySink() };
      for (const roundMs of [0, -1, Number.NaN, 5])
        await assert.rejects(harvestInRounds(job, parts, roundMs), RangeError, String(roundMs));
    });

    it("counts a throttled page's failure when a stop ends the run mid-round", { timeout: 20_000 }, async () => {
      const scope = unique('hv-rounds-stopped');
      const stop = new AbortController();
      const report = await harvestInRounds(
        { scope, pageUrl: (page) => `/p/${page}`, until: Number.POSITIVE_INFINITY, stop: stop.signal },
        {
          pacer: pacer(),
          redis,
          sink: memorySink(),
          fetch: async () => {
            stop.abort(); // SIGTERM while the source pushes back: the run, not only its round, ends
            return { kind: 'throttled', status: 429, retryAfterMs: 0 };
          },
        },
      );
      assert.equal(report.throttled, 1);
      assert.deepEqual(await waiting(scope), ['1:1'], 'put back, its throttled run counted');
    });
  });
}

describe('A harvesting worker while Redis cannot answer, over rounds', () => {
  /** Runs `test` with a client of a port nobody listens on and a pacer on it going at 100 pages a second alone. */
  async function whileUnreachable(test: (parts: { down: RedisClient; pacer: AdaptivePacer }) => Promise<void>) {
    const down = createRedisClient({ url: `redis://127.0.0.1:${await freePort()}` });
    const limiter = createLimiter({
      redis: down,
      policies: policies({ [HARVESTER_POLICY]: { ...roomy, timeBudget: '50 ms' } }),
      onDegraded: () => {},
    });
    try {
      await test({
        down,
        pacer: new AdaptivePacer({ limiter, once: new AcceptedOnce(down), localRatePerSecond: 100 }),
      });
    } finally {
      down.disconnect();
    }
  }

  it(
    'goes on from its own last page in each round, and fetches on the page it holds: none twice, none given up',
    {
      timeout: 20_000,
    },
    () =>
      whileUnreachable(async ({ down, pacer }) => {
        const sink = memorySink();
        const roundMs = 200;
        const started = Date.now();
        const report = await harvestInRounds(
          { scope: unique('hv-rounds-down'), pageUrl: (page) => `/p/${page}`, until: started + 3 * roundMs },
          {
            pacer,
            redis: down,
            sink,
            // page 3 is throttled until the first round has surely ended: the worker holds it across that end
            fetch: async (url) =>
              pageOf(url) === 3 && Date.now() < started + roundMs + 100
                ? { kind: 'throttled', status: 429, retryAfterMs: 0 }
                : PAGE,
          },
          roundMs,
        );
        assert.ok(sink.pages.length > 3, `handed on ${sink.pages}`);
        assert.deepEqual(
          sink.pages,
          sink.pages.map((_, i) => i + 1),
          'each round goes on from the last page taken, the held page included',
        );
        assert.equal(report.givenUp, 0, 'a page held across a round boundary is fetched on, not given up');
        assert.ok(report.throttled > 0);
      }),
  );

  it(
    'reports a page it held at the end of a round no other round followed (the run ended meanwhile)',
    {
      timeout: 20_000,
    },
    () =>
      whileUnreachable(async ({ down, pacer }) => {
        const sink = memorySink();
        const roundMs = 200;
        const until = Date.now() + roundMs + 50;
        const report = await harvestInRounds(
          // a first round that is not the last, whose fetch of page 3 ends past the run's end: no round follows it
          { scope: unique('hv-rounds-down-end'), pageUrl: (page) => `/p/${page}`, until },
          {
            pacer,
            redis: down,
            sink,
            fetch: async (url) => {
              if (pageOf(url) !== 3) return PAGE;
              await new Promise((resolve) => setTimeout(resolve, until + 20 - Date.now())); // a source that hangs
              return { kind: 'throttled', status: 429, retryAfterMs: 0 };
            },
          },
          roundMs,
        );
        assert.ok(!sink.pages.includes(3));
        assert.deepEqual(report.givenUpPages, [3], 'held, never put back (Redis down): reported, not silently dropped');
      }),
  );
});
