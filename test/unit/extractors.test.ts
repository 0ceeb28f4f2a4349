import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { MisconfiguredCheckError } from '@platform/rate-limit';
import {
  apiKeyHash,
  bodyField,
  clientIp,
  clientIp48,
  emailHash,
  ip48Key,
  ipKey,
  MissingKeyError,
} from '@platform/rate-limit/middleware';
import fc from 'fast-check';
import { httpApiEvent, restEvent } from '../support/events.ts';

describe('Key extractors', () => {
  it('every IPv4-mapped IPv6 form is its IPv4 address, for the /64 and the /48 key', () => {
    const forms = [
      '::ffff:1.2.3.4',
      '::FFFF:1.2.3.4',
      '::ffff:0102:0304',
      '::ffff:102:304',
      '0:0:0:0:0:ffff:1.2.3.4',
      '0000:0000:0000:0000:0000:FFFF:0102:0304',
      '::0:ffff:1.2.3.4',
    ];
    for (const form of forms) {
      assert.equal(ipKey(form), '1.2.3.4', form);
      assert.equal(ip48Key(form), '1.2.3.4', form);
      assert.equal(clientIp(restEvent({ ip: form })), '1.2.3.4', form);
    }
    const quad = fc.tuple(...Array.from({ length: 4 }, () => fc.integer({ min: 0, max: 255 })));
    fc.assert(
      fc.property(quad, fc.boolean(), (bytes, hex) => {
        const v4 = bytes.join('.');
        const [a, b, c, d] = bytes as [number, number, number, number];
        const mapped = hex ? `::ffff:${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}` : `::ffff:${v4}`;
        assert.equal(ipKey(mapped), v4);
      }),
    );
    assert.equal(ipKey('::1.2.3.4'), '0:0:0:0::/64', 'IPv4-compatible (deprecated) is not mapped: an IPv6 /64');
    assert.equal(ipKey('64:ff9b::1.2.3.4'), '64:ff9b:0:0::/64', 'NAT64 is an IPv6 address of the translator');
  });

  it('ip48Key keys IPv6 by its /48 and keeps IPv4; clientIp48 reads the gateway-seen address', () => {
    assert.equal(ip48Key('2001:db8:1:2:3:4:5:6'), '2001:db8:1::/48');
    assert.equal(ip48Key('2001:DB8:0001:ffff::1'), '2001:db8:1::/48');
    assert.equal(ip48Key('192.0.2.1'), '192.0.2.1');
    assert.equal(clientIp48(restEvent({ ip: '2001:db8:7:8::1' })), '2001:db8:7::/48');
    assert.throws(() => clientIp48(restEvent({ ip: 'not-an-ip' })), MissingKeyError);
    const group = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16));
    const site = fc.tuple(group, group, group);
    const rest = fc.tuple(group, group, group, group, group);
    fc.assert(
      fc.property(site, rest, rest, (prefix, a, b) => {
        assert.equal(ip48Key([...prefix, ...a].join(':')), ip48Key([...prefix, ...b].join(':')));
        assert.match(ip48Key([...prefix, ...a].join(':')), /^[0-9a-f]{1,4}:[0-9a-f]{1,4}:[0-9a-f]{1,4}::\/48$/);
      }),
    );
  });

  it('clientIp reads the gateway-seen address of REST and HTTP API events, not X-Forwarded-For', () => {
    assert.equal(
      clientIp(restEvent({ ip: '2001:db8::1', headers: { 'X-Forwarded-For': '1.2.3.4' } })),
      '2001:db8:0:0::/64',
    );
    assert.equal(clientIp(httpApiEvent({ ip: '192.0.2.1', headers: { 'x-forwarded-for': '1.2.3.4' } })), '192.0.2.1');
    assert.throws(() => clientIp(restEvent({ ip: 'not-an-ip' })), MissingKeyError);
  });

  it('ipKey keeps an IPv4 address and keys an IPv6 address by its /64', () => {
    assert.equal(ipKey('192.0.2.1'), '192.0.2.1');
    assert.equal(ipKey('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
    assert.equal(ipKey('2001:DB8:0001:0002::ff'), '2001:db8:1:2::/64');
    assert.equal(ipKey('::1'), '0:0:0:0::/64');
    assert.equal(ipKey('fe80::1%eth0'.split('%')[0] as string), 'fe80:0:0:0::/64');
    assert.equal(ipKey('::ffff:192.0.2.9'), '192.0.2.9', 'an IPv4-mapped address is its IPv4 address');
  });

  it('ipKey gives every address of one /64 the same key, and different /64s different keys', () => {
    const group = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16));
    const half = fc.tuple(group, group, group, group);
    fc.assert(
      fc.property(half, half, half, (prefix, hostA, hostB) => {
        const a = ipKey([...prefix, ...hostA].join(':'));
        const b = ipKey([...prefix, ...hostB].join(':'));
        assert.equal(a, b);
        const other = [...prefix];
        other[3] = ((Number.parseInt(prefix[3], 16) + 1) % 0x10000).toString(16);
        assert.notEqual(ipKey([...other, ...hostA].join(':')), a);
      }),
    );
  });

  it('apiKeyHash gives a 22-character keyed hash whatever the header case, never the key', () => {
    const keyed = (pepper: string | undefined) => apiKeyHash({ pepper: () => pepper });
    const upper = keyed('p1')(restEvent({ headers: { 'X-Api-Key': 'sk_live_abc' } }));
    const lower = keyed('p1')(httpApiEvent({ headers: { 'x-api-key': 'sk_live_abc' } }));
    assert.equal(upper, lower);
    assert.match(upper, /^[A-Za-z0-9_-]{22}$/);
    assert.notEqual(keyed('p1')(restEvent({ headers: { 'x-api-key': 'sk_live_abd' } })), upper);
    assert.notEqual(keyed('p2')(restEvent({ headers: { 'x-api-key': 'sk_live_abc' } })), upper, 'another pepper');
    // the unkeyed hash a dump could be matched against is never the answer
    const unkeyed = createHash('sha256').update('sk_live_abc').digest().subarray(0, 16).toString('base64url');
    assert.notEqual(upper, unkeyed);
    assert.throws(() => keyed('p1')(restEvent()), MissingKeyError);
    assert.throws(
      () => keyed(undefined)(restEvent({ headers: { 'x-api-key': 'sk_live_abc' } })),
      MisconfiguredCheckError,
      'no pepper: refused, not hashed unkeyed',
    );
  });

  it('emailHash normalises the address and depends on the pepper', () => {
    const withPepper = (pepper: string) => emailHash({ pepper: () => pepper });
    const a = withPepper('p1')(restEvent({ body: { email: ' Alice@Example.com ' } }));
    assert.equal(a, withPepper('p1')(restEvent({ body: { email: 'alice@example.com' } })));
    assert.notEqual(a, withPepper('p2')(restEvent({ body: { email: 'alice@example.com' } })));
    assert.equal(a.includes('alice'), false);
    assert.throws(() => withPepper('p1')(restEvent({ body: { user: 'x' } })), MissingKeyError);
    assert.throws(
      () => emailHash({ pepper: () => undefined })(restEvent({ body: { email: 'a@b.c' } })),
      /no email pepper/,
    );
  });

  it('bodyField reads a dotted path, keeps plain ids and hashes the rest', () => {
    const event = restEvent({
      body: { team_id: 'T0123', event: { channel: 'C9' }, message: { chat: { id: -100123 } }, name: 'a b' },
    });
    assert.equal(bodyField('team_id')(event), 'T0123');
    assert.equal(bodyField('event.channel')(event), 'C9');
    assert.equal(bodyField('message.chat.id')(event), '-100123');
    assert.match(bodyField('name')(event), /^[A-Za-z0-9_-]{22}$/);
    assert.throws(() => bodyField('missing.path')(event), MissingKeyError);
    const base64 = { ...restEvent(), body: Buffer.from('{"team_id":"T9"}').toString('base64'), isBase64Encoded: true };
    assert.equal(bodyField('team_id')(base64), 'T9');
    assert.throws(() => bodyField('team_id')({ ...restEvent(), body: '{not json' }), MissingKeyError);
  });
});
