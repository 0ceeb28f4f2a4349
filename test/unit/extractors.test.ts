import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { apiKeyHash, bodyField, clientIp, emailHash, MissingKeyError } from '../../layer/src/middleware/index.ts';
import { httpApiEvent, restEvent } from '../support/events.ts';

describe('Key extractors', () => {
  it('clientIp reads the gateway-seen address of REST and HTTP API events, not X-Forwarded-For', () => {
    assert.equal(clientIp(restEvent({ ip: '2001:db8::1', headers: { 'X-Forwarded-For': '1.2.3.4' } })), '2001:db8::1');
    assert.equal(clientIp(httpApiEvent({ ip: '192.0.2.1', headers: { 'x-forwarded-for': '1.2.3.4' } })), '192.0.2.1');
    assert.throws(() => clientIp(restEvent({ ip: 'not-an-ip' })), MissingKeyError);
  });

  it('apiKeyHash gives a 22-character hash whatever the header case, never the key', () => {
    const upper = apiKeyHash()(restEvent({ headers: { 'X-Api-Key': 'sk_live_abc' } }));
    const lower = apiKeyHash()(httpApiEvent({ headers: { 'x-api-key': 'sk_live_abc' } }));
    assert.equal(upper, lower);
    assert.match(upper, /^[A-Za-z0-9_-]{22}$/);
    assert.notEqual(apiKeyHash()(restEvent({ headers: { 'x-api-key': 'sk_live_abd' } })), upper);
    assert.throws(() => apiKeyHash()(restEvent()), MissingKeyError);
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
