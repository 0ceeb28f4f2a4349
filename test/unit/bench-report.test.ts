/** The benchmark report's round-trip bars: each route of bench:load against issue 30's target. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ROUND_TRIP_TARGETS, roundTripBars } from '../../bench/report.ts';

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
