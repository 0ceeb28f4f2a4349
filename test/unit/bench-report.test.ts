/** The benchmark report's bars: each route of bench:load against issue 30's round-trip target, the cold start's, and how a ratio pairs rounds. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { COLD_ROWS, coldStartSplit } from '../../bench/lambda-figures.ts';
import type { RunFigures } from '../../bench/measure.ts';
import { type BenchResults, coldStartBars, ROUND_TRIP_TARGETS, ratioOf, roundTripBars } from '../../bench/report.ts';

const route = (name: string, roundTrips: number) => ({
  route: name,
  roundTrips,
  redisCpuUsPerRequest: 10,
  byCommand: { evalsha: roundTrips },
  statuses: { '2xx': 1 },
});

describe('The round-trip bars of bench/results/latest.md', () => {
  it('marks a route met at its target and not met above it, and a route without a target never met', () => {
    const rows = roundTripBars({
      date: 'd',
      connections: 64,
      routes: [route('slack', 2), route('llm', 3), route('api-standard', 1.004), route('unknown', 1)],
    }).filter((l) => l.startsWith('| ') && !l.startsWith('| bar'));
    assert.deepEqual(
      rows.map((r) => r.split(' | ').at(-1)),
      ['yes |', '**no** |', 'yes |', '**no** |'],
    );
    assert.match(rows[1] as string, /llm: round trips per request ≤ 2 \| 3\.00/);
  });

  it('has a target for every route bench:load drives, and none is above 2', () => {
    assert.deepEqual(Object.keys(ROUND_TRIP_TARGETS).sort(), [
      'api-partner',
      'api-standard',
      'llm',
      'login',
      'slack',
      'telegram',
    ]);
    assert.ok(Object.values(ROUND_TRIP_TARGETS).every((n) => n <= 2));
  });

  it('says nothing without a load result', () => {
    assert.deepEqual(roundTripBars(undefined), []);
  });
});

describe('The cold-start bars', () => {
  const row = (name: string, coldImportMs: number) => ({ name, bytes: 1, coldImportMs });
  // the default-flags row first, where a prefix match of the judged row's name would take it
  const figures = [
    row(COLD_ROWS.layerDefaultFlags, 35),
    row(COLD_ROWS.layerWithCache, 30),
    row(COLD_ROWS.layerAsDeployed, 47),
    row(COLD_ROWS.layerAfterRuntimeHttp, 39),
    row(COLD_ROWS.redisClient, 20),
    row(COLD_ROWS.layerOwn, 12),
    row(`${COLD_ROWS.functionPrefix}api (+ layer, as deployed: no code cache)`, 70),
    row(`${COLD_ROWS.functionPrefix}admin (+ layer, as deployed: no code cache)`, 121),
  ];

  it("judges the layer's part on its figure under Lambda's V8 flags without its code cache, not the default-flags one", () => {
    const split = coldStartSplit(figures);
    assert.equal(split.layerWithoutCacheMs, 47);
    assert.equal(split.layerDefaultFlagsMs, 35);
    assert.equal(split.layerAfterRuntimeHttpMs, 39);
    const [layer, slowest] = coldStartBars(split);
    assert.equal(layer?.met, false);
    assert.match(layer?.bar ?? '', /under Lambda's V8 flags/);
    assert.match(
      layer?.figure ?? '',
      /^47\.0 ms under Lambda's V8 flags without its code cache \(39\.0 ms after node:http, which Lambda's runtime client loads before the init; 35\.0 ms under default V8 flags/,
    );
    assert.equal(coldStartBars({ ...split, layerWithoutCacheMs: 40 })[0]?.met, true);
    // just over the bar: not met, and the figure says why rather than reading "40.0 ms"
    for (const over of [40.04, 40.001]) {
      const justOver = coldStartBars({ ...split, layerWithoutCacheMs: over })[0];
      assert.deepEqual([justOver?.met, justOver?.figure.split(' ')[0]], [false, '40.1'], String(over));
    }
    assert.equal(coldStartBars({ ...split, layerWithoutCacheMs: 39.96 })[0]?.figure.split(' ')[0], '40.0');
    assert.deepEqual(
      { met: slowest?.met, figure: slowest?.figure },
      { met: false, figure: 'slowest admin (+ layer, as deployed: no code cache) 121.0 ms' },
    );
  });

  it('has no figure for a row it cannot find (the bar is then not met)', () => {
    const split = coldStartSplit(figures.filter((f) => f.name !== COLD_ROWS.layerAsDeployed));
    assert.ok(Number.isNaN(split.layerWithoutCacheMs));
    assert.equal(coldStartBars(split)[0]?.met, false);
  });
});

describe('Function: ratioOf (a limiter against its base in one run)', () => {
  const figures = (clientCpuUsPerCheck: number) => ({ clientCpuUsPerCheck }) as RunFigures;
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
  const run = (limiter: string, rounds: number[], withRounds: boolean) => ({
    limiter,
    scenario: 'hot key',
    shape: '64×1',
    concurrency: 64,
    figures: figures(median(rounds)), // the run's figure: the median of its rounds, as run.ts stores it
    ...(withRounds ? { perRound: rounds.map(figures) } : {}),
  });
  const results = (ours: number[], ref: number[], withRounds = true) =>
    ({ runs: [run('ours', ours, withRounds), run('ref', ref, withRounds)] }) as unknown as BenchResults;
  const ratio = (r: BenchResults) => ratioOf(r, 'ours', 'ref', 'hot key', '64×1', 'clientCpuUsPerCheck');

  it("is the median of the rounds' own ratios: a drifting host moves both of a round alike", () => {
    // the host slowed round by round; each round ours cost 1.05 × the reference
    const drifting = results([10.5, 15.75, 21], [10, 15, 20]);
    assert.ok(Math.abs(ratio(drifting) - 1.05) < 1e-9, String(ratio(drifting)));
    // a round that drifted within itself is outvoted, where a ratio of medians takes whatever the medians are
    const oneBad = results([10.5, 30, 21], [10, 15, 20]);
    assert.ok(Math.abs(ratio(oneBad) - 1.05) < 1e-9, String(ratio(oneBad)));
  });

  it('takes the middle two of an even count, and the ratio of medians for results without rounds', () => {
    assert.ok(Math.abs(ratio(results([11, 12, 13, 16], [10, 10, 10, 10])) - 1.25) < 1e-9);
    const old = results([10.5, 30, 21], [10, 15, 20], false);
    assert.ok(Math.abs(ratio(old) - 21 / 15) < 1e-9, String(ratio(old)));
  });
});
