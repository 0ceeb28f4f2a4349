/**
 * What a deploy may not change under a policy's name (config/policy-shapes.json):
 * its strategy (the live counters would be read as another shape: a window's
 * header as a full bucket, every lockout lifted), its group (the counters
 * would move to another hash tag: reset), where it is decided (regions), and
 * a `shares` policy's window (gifts out would outlive it). An override is
 * refused all four (layer/src/config/policy-layers.ts); this holds the
 * shipped defaults to them, so a change is made knowingly: under a new name,
 * or with this file edited in the same review, saying the counters reset.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';

type Shape = { strategy: unknown; group?: unknown; regions?: unknown; window?: unknown };
const locked = JSON.parse(readFileSync(new URL('../../config/policy-shapes.json', import.meta.url), 'utf8')) as Record<
  string,
  Shape
>;

function shapeOf(config: Record<string, unknown>): Shape {
  return {
    strategy: config.strategy,
    ...(config.group === undefined ? {} : { group: config.group }),
    ...(config.regions === undefined ? {} : { regions: config.regions }),
    ...(config.regions === 'shares' ? { window: config.window } : {}),
  };
}

describe('Policy shapes (config/policy-shapes.json)', () => {
  it("keeps every shipped policy's strategy, group, regions and shares window as locked: a change resets live counters", () => {
    const changed = Object.entries(PLATFORM_POLICIES).flatMap(([name, config]) => {
      const was = locked[name];
      const now = shapeOf(config as Record<string, unknown>);
      return was === undefined || JSON.stringify(was) === JSON.stringify(now) ? [] : [{ name, was, now }];
    });
    assert.deepEqual(
      changed,
      [],
      'deployed, these read or move the live counters of the same name: give the policy a new name, or edit config/policy-shapes.json in the same change and say in its review that the counters reset',
    );
  });

  it('locks every shipped policy, and only those', () => {
    assert.deepEqual(Object.keys(locked).sort(), Object.keys(PLATFORM_POLICIES).sort());
  });
});
