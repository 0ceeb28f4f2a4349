/**
 * The assembler keeps of the fragments only what an entry script reaches
 * (Redis builds every function a script defines on each call), and puts the
 * fragments where the entry asks.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assembleEntry, productionScripts } from '@platform/rate-limit/lua';

const clock = ['-- the clock', 'local function now_us()', "  return redis.call('TIME')", 'end', ''].join('\n');
const fragment = [
  '-- a library',
  'local LIMIT = 10',
  "local FIRST = redis.call('GET', 'x') -- a call: kept whatever is reached",
  '',
  '-- used by b',
  'local function a(x)',
  '  return x + LIMIT',
  'end',
  '',
  'local function b(x)',
  '',
  '  return a(x) -- b_unused in a comment reaches nothing',
  'end',
  '',
  '-- nobody calls it',
  'local function b_unused()',
  "  return 'a(1)'",
  'end',
].join('\n');

const definesOf = (script: string) => [...script.matchAll(/^local (?:function )?(\w+)/gm)].map((m) => m[1]);

describe('Script assembly', () => {
  it('keeps the definitions the entry reaches, directly or through another, and drops the rest with their comments', () => {
    const script = assembleEntry(clock, [fragment], 'local now = now_us()\nreturn b(now)');
    assert.deepEqual(definesOf(script), ['now_us', 'LIMIT', 'FIRST', 'a', 'b', 'now']);
    assert.doesNotMatch(script, /nobody calls it|b_unused\(\)/);
    assert.match(script, /-- used by b\nlocal function a/);
    const withLimit = assembleEntry(clock, [fragment], 'return b(LIMIT)');
    assert.deepEqual(definesOf(withLimit), ['LIMIT', 'FIRST', 'a', 'b'], 'an unreached clock goes too');
    const none = assembleEntry(clock, [fragment], 'return 1');
    assert.deepEqual(definesOf(none), ['FIRST'], 'a local whose initializer calls Redis stays');
  });

  it("drops the clock's values, TIME read included, when nothing reaches them: the clock only reads", () => {
    const valueClock = ["local clock_time = redis.call('TIME')", 'local clock_us = tonumber(clock_time[1])', ''].join(
      '\n',
    );
    assert.deepEqual(definesOf(assembleEntry(valueClock, [fragment], 'return b(1)')), ['LIMIT', 'FIRST', 'a', 'b']);
    assert.deepEqual(definesOf(assembleEntry(valueClock, [fragment], 'return b(clock_us)')), [
      'clock_time',
      'clock_us',
      'LIMIT',
      'FIRST',
      'a',
      'b',
    ]);
    const settle = productionScripts().entries.settle_claim?.source ?? assert.fail('settle_claim');
    assert.doesNotMatch(settle, /redis.call\('TIME'\)/, 'a script that needs no time reads none');
  });

  it('puts the fragments after a "-- <fragments>" line, the clock still first', () => {
    const entry = [
      'local now = now_us()',
      'if now > 0 then return 1 end',
      '-- <fragments>: here',
      'return b(now)',
    ].join('\n');
    const script = assembleEntry(clock, [fragment], entry);
    const at = (text: string) => script.indexOf(text);
    assert.ok(at('local function now_us') < at('local now = now_us()'));
    assert.ok(
      at('if now > 0 then return 1 end') < at('-- <fragments>') && at('-- <fragments>') < at('local function a'),
    );
    assert.ok(at('local function b') < at('return b(now)'));
  });

  it('keeps a "-- <fragments>" comment of several lines whole, the fragments after it', () => {
    const entry = ['-- <fragments>: the fragments follow here, for', '-- every other case', 'return b(1)'].join('\n');
    const script = assembleEntry(clock, [fragment], entry);
    assert.ok(
      script.includes('-- <fragments>: the fragments follow here, for\n-- every other case\n'),
      'the comment is not split by the fragments',
    );
    assert.ok(script.indexOf('-- every other case') < script.indexOf('local function a'));
  });

  it('leaves the production bucket and window scripts with no function before their flat path', () => {
    for (const name of ['check_token_bucket', 'check_sliding_window']) {
      const source = productionScripts().entries[name]?.source ?? assert.fail(name);
      const flat = source.slice(0, source.indexOf('-- <fragments>'));
      assert.deepEqual(
        [...flat.matchAll(/^local function (\w+)/gm)].map((m) => m[1]),
        [],
        name,
      );
      assert.match(flat, /^local clock_us = /m, `${name}: the clock is a value read once`);
    }
  });
});
