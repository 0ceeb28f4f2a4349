/**
 * The webhooks' body bounds (functions/shared/http.ts): the nesting scan
 * agrees with the parsed structure whatever the strings hold, and a body is
 * measured in bytes, base64 or not, before it is parsed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { nestsDeeperThan, outOfBounds, type RestEvent } from '../../functions/shared/http.ts';

/** The nesting depth of a parsed JSON value (objects and arrays), the reference the scan must agree with. */
function depthOf(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + Math.max(0, ...children.map(depthOf));
}

const eventOf = (body: string, isBase64Encoded = false) => ({ body, isBase64Encoded }) as RestEvent;

describe('JSON bounds (nestsDeeperThan, outOfBounds)', () => {
  it('counts the depth of any JSON text as its parsed value has it, brackets and escapes in strings ignored', () => {
    fc.assert(
      fc.property(fc.json({ depthSize: 'large' }), fc.integer({ min: 0, max: 12 }), (text, max) => {
        assert.equal(nestsDeeperThan(text, max), depthOf(JSON.parse(text)) > max, text);
      }),
      { numRuns: 2000 },
    );
    assert.equal(nestsDeeperThan('{"a":"[[[[\\"{{{{"}', 1), false, 'brackets and an escaped quote inside a string');
    assert.equal(nestsDeeperThan('{"a":"\\\\"}', 1), false, 'an escaped backslash ends before the quote');
  });

  it('scans 200,000 levels without recursion', () => {
    const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
    assert.equal(nestsDeeperThan(deep, 64), true);
  });

  it('measures the body in UTF-8 bytes, base64 decoded, before parsing', () => {
    const bounds = { maxBytes: 10, maxDepth: 2 };
    assert.equal(outOfBounds(eventOf('"éééééé"'), bounds), 'too-large', '8 characters, 14 bytes');
    assert.equal(outOfBounds(eventOf('"abc"'), bounds), undefined);
    assert.equal(outOfBounds(eventOf(Buffer.from('[[[1]]]').toString('base64'), true), bounds), 'too-deep');
    assert.equal(outOfBounds(eventOf(Buffer.from('x'.repeat(11)).toString('base64'), true), bounds), 'too-large');
    assert.equal(outOfBounds(eventOf(Buffer.from('[[1]]').toString('base64'), true), bounds), undefined);
    assert.equal(
      outOfBounds({ body: null } as RestEvent, bounds),
      undefined,
      'no body: the handler says what is missing',
    );
  });
});
