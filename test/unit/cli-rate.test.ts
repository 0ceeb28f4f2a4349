/**
 * `npx ratelimit rate … --set N`: N is a rate per second written as plain
 * decimal digits with an optional fraction (2, 0.5), greater than zero.
 * Anything else is a usage error (exit 2) before the limiter is asked:
 * Number() read `0x10` as 16 (2/s became 16/s) and `1e3` as 1000.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Limiter, RateChange } from '@platform/rate-limit';
import { CliError, EXIT } from '../../cli/command.ts';
import { rate, rateFlag } from '../../cli/commands/rate.ts';
import type { Context } from '../../cli/context.ts';

const BAD = [
  '0x10',
  '0X10',
  '1e3',
  '1E3',
  '0b11',
  '0o17',
  '+5',
  '-5',
  '0',
  '0.0',
  '00',
  '',
  ' ',
  ' 5',
  '5 ',
  '5.',
  '.5',
  '1_000',
  '1,5',
  'Infinity',
  'NaN',
  '٣',
  '5/s',
];

/** A context whose limiter records what it is asked (the command's parsing is under test, not Redis). */
function stubbed() {
  const asked: { method: string; change?: RateChange }[] = [];
  const limiter = {
    async currentRate() {
      asked.push({ method: 'currentRate' });
      return { decided: true, ratePerSecond: 2 };
    },
    async changeRate(_policy: string, _key: string, change: RateChange) {
      asked.push({ method: 'changeRate', change });
      return { decided: true, ratePerSecond: 'set' in change ? change.set : 2 };
    },
  } as unknown as Limiter;
  const written = { stdout: '', stderr: '' };
  const io = {
    stdout: (text: string) => {
      written.stdout += text;
    },
    stderr: (text: string) => {
      written.stderr += text;
    },
    who: 'test',
  };
  // the store knows the policy by name (the command checks the name before anything else)
  const store = { policyNames: () => ['harvester-source'] };
  const context = { io, json: true, prefix: '/ratelimit/local', limiter, store } as unknown as Context;
  return { context, asked, written };
}

describe('rate --set (cli/commands/rate.ts)', () => {
  it('reads a plain positive decimal, digits with an optional fraction', () => {
    for (const [text, value] of [
      ['2', 2],
      ['16', 16],
      ['0.5', 0.5],
      ['2.25', 2.25],
      ['007', 7],
      ['0.05', 0.05],
    ] as const) {
      assert.equal(rateFlag(text), value, text);
    }
  });

  it('reads nothing else: hex, exponents, signs, spaces, zero', () => {
    for (const text of BAD) assert.equal(rateFlag(text), undefined, JSON.stringify(text));
  });

  it('refuses a bad --set with a usage error (exit 2) before asking the limiter anything', async () => {
    for (const set of BAD) {
      const { context, asked } = stubbed();
      await assert.rejects(
        rate.run(context, ['harvester-source', 'site-1'], { set }),
        (error: unknown) =>
          error instanceof CliError && error.code === EXIT.usage && /--set takes a rate per second/.test(error.message),
        JSON.stringify(set),
      );
      assert.deepEqual(asked, [], `${JSON.stringify(set)}: the limiter was not asked`);
    }
  });

  it('sets the rate it was given: --set 16 is 16/s, --set 0.5 is 0.5/s', async () => {
    for (const [set, value] of [
      ['16', 16],
      ['0.5', 0.5],
    ] as const) {
      const { context, asked, written } = stubbed();
      assert.equal(await rate.run(context, ['harvester-source', 'site-1'], { set }), EXIT.ok);
      assert.deepEqual(asked.at(-1), { method: 'changeRate', change: { set: value } });
      assert.deepEqual(JSON.parse(written.stdout), { before: 2, after: value });
    }
  });
});
