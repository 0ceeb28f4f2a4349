/**
 * Who calls the admin function (functions/admin/identity.ts): the IAM caller
 * Lambda put in a function URL event, and the command line of its body —
 * or a refusal with a status and a reason, for any other event.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { readAdminRequest } from '../../functions/admin/identity.ts';

const BOB = 'arn:aws:sts::123456789012:assumed-role/OnCall/bob';
/** The temporary access key id of Bob's session, as Lambda puts it beside his ARN. */
const BOB_KEY = 'ASIAEXAMPLEBOB000001';
const event = (body: string, extra: Record<string, unknown> = {}) => ({
  version: '2.0',
  requestContext: {
    http: { method: 'POST' },
    authorizer: {
      iam: { userArn: BOB, accountId: '123456789012', callerId: 'AROAEXAMPLE:bob', accessKey: BOB_KEY } as Record<
        string,
        unknown
      >,
    },
  },
  body,
  ...extra,
});

describe('The admin function’s caller (a function URL with AWS_IAM auth)', () => {
  it('reads the caller’s ARN, account and id, and the argv of a plain or base64 body', () => {
    const body = JSON.stringify({ argv: ['reset', 'login-ip', '192.0.2.1'] });
    for (const e of [event(body), event(Buffer.from(body).toString('base64'), { isBase64Encoded: true })]) {
      const request = readAdminRequest(e);
      assert.ok(!request.refused, JSON.stringify(request));
      assert.deepEqual(request.caller, {
        arn: BOB,
        accountId: '123456789012',
        callerId: 'AROAEXAMPLE:bob',
        accessKey: BOB_KEY,
      });
      assert.deepEqual(request.argv, ['reset', 'login-ip', '192.0.2.1']);
    }
  });

  it('keeps the access key id the caller signed with: a session name is theirs to choose, the key is not', () => {
    // `aws sts assume-role --role-session-name alice` names "alice" in the ARN, whoever asked: the access key id
    // (temporary, ASIA…) is what CloudTrail's AssumeRole event traces to the real caller
    const posing = event(JSON.stringify({ argv: ['reset', 'login-ip', '192.0.2.1'] }));
    posing.requestContext.authorizer.iam.userArn = 'arn:aws:sts::123456789012:assumed-role/OnCall/alice';
    const request = readAdminRequest(posing);
    assert.ok(!request.refused, JSON.stringify(request));
    assert.equal(request.caller.accessKey, BOB_KEY);
    // Lambda always gives it for a signed call: an event without it, or with something else there, names nobody
    for (const accessKey of [undefined, '', 'short', 'ASIA EXAMPLE BOB 0001', 42]) {
      const e = event(JSON.stringify({ argv: ['policies'] }));
      if (accessKey === undefined) delete e.requestContext.authorizer.iam.accessKey;
      else e.requestContext.authorizer.iam.accessKey = accessKey;
      const refused = readAdminRequest(e);
      assert.ok(
        refused.refused && refused.statusCode === 403,
        `${JSON.stringify(accessKey)}: ${JSON.stringify(refused)}`,
      );
    }
  });

  it('refuses an event naming no IAM caller (403), a bad body (400), a GET (405)', () => {
    const argv = JSON.stringify({ argv: ['policies'] });
    const noIam = { ...event(argv), requestContext: { http: { method: 'POST' } } };
    const cases: [unknown, number][] = [
      [{ argv: ['policies'] }, 403],
      [noIam, 403],
      [event(argv, { version: '1.0' }), 403],
      [{ ...event(argv), requestContext: { ...event(argv).requestContext, http: { method: 'GET' } } }, 405],
      [event('not json'), 400],
      [event(JSON.stringify({ argv: [] })), 400],
      [event(JSON.stringify({ argv: Array(17).fill('x') })), 400],
    ];
    for (const [e, status] of cases) {
      const request = readAdminRequest(e);
      assert.ok(request.refused, JSON.stringify(e));
      assert.equal(request.statusCode, status);
    }
  });

  it('takes as the caller only an IAM or STS ARN', () => {
    fc.assert(
      fc.property(fc.string(), (arn) => {
        const e = event(JSON.stringify({ argv: ['policies'] }));
        e.requestContext.authorizer.iam.userArn = arn;
        const request = readAdminRequest(e);
        if (!request.refused) assert.match(request.caller.arn, /^arn:aws[a-z-]*:(iam|sts)::\d{12}:/);
      }),
    );
  });
});
