/**
 * The admin function's notice of a write (functions/admin/notify.ts): who,
 * what, when, and the key as a digest keyed with the stage's email pepper,
 * so that whoever reads the alarm topic cannot hash guesses (every IPv4
 * address) to find the key, while operators can still match two notices of
 * one key.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { AuditRecord } from '../../cli/commands.ts';
import { keyDigest, noticeOf } from '../../functions/admin/notify.ts';

const PEPPER = 'a-stage-pepper-of-at-least-16-chars';
const OTHER = 'another-stage-pepper-16-chars-plus';
const sha256Prefix = (key: string) => createHash('sha256').update(key).digest('hex').slice(0, 16);
const CALLER = {
  arn: 'arn:aws:sts::123456789012:assumed-role/OnCall/bob',
  accountId: '123456789012',
  callerId: 'AROAEXAMPLE:bob',
  accessKey: 'ASIAEXAMPLEBOB000001',
};

describe('The key digest of an operator notice', () => {
  it('is keyed: not the plain SHA-256 prefix, another under another secret, the same twice under one', () => {
    fc.assert(
      fc.property(fc.ipV4(), (ip) => {
        const digest = keyDigest(ip, PEPPER);
        assert.match(digest, /^[0-9a-f]{16}$/);
        assert.notEqual(digest, sha256Prefix(ip), 'the IP cannot be brute-forced back without the pepper');
        assert.notEqual(digest, keyDigest(ip, OTHER));
        assert.equal(digest, keyDigest(ip, PEPPER), 'stable: notices of one key match');
      }),
    );
    assert.notEqual(keyDigest('203.0.113.9', PEPPER), keyDigest('203.0.113.10', PEPPER));
  });

  it('is what a notice of a write to an IPv4 key carries, and the notice never holds the key', () => {
    const record: AuditRecord = {
      audit: 'ratelimit',
      who: CALLER.arn,
      what: 'reset',
      at: '2026-12-02T03:00:00.000Z',
      policy: 'login-ip',
      key: '203.0.113.9',
    };
    const notice = noticeOf(record, CALLER, { requestId: 'req-1' }, PEPPER);
    assert.equal(notice.keyDigest, keyDigest('203.0.113.9', PEPPER));
    assert.equal(notice.accessKey, CALLER.accessKey, 'the access key id CloudTrail traces to the real caller');
    assert.notEqual(notice.keyDigest, sha256Prefix('203.0.113.9'));
    assert.ok(!JSON.stringify(notice).includes('203.0.113.9'));
    assert.ok(!JSON.stringify(notice).includes(PEPPER));
    assert.equal(noticeOf({ ...record, key: undefined }, CALLER, {}, PEPPER).keyDigest, undefined);
  });
});
