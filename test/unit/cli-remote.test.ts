/**
 * `npx ratelimit` against a deployed stage (cli/remote.ts): the command line
 * POSTed to the admin function URL, SigV4-signed for service `lambda` in the
 * URL's region — the signature recomputed here from the AWS specification
 * with node:crypto, not with the signer that made it — and the function's
 * answer turned back into output and exit code.
 */
import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import { runRemote } from '../../cli/remote.ts';

const URL_ = 'https://abcdef0123456789.lambda-url.eu-west-1.on.aws/';
const credentials = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };

interface Sent {
  url: string;
  headers: Record<string, string>;
  body: string;
}

function stand(answer: { status: number; body: string }) {
  const sent: Sent[] = [];
  const fetch = (async (url: string, init: { headers: Record<string, string>; body: string }) => {
    sent.push({ url, headers: init.headers, body: init.body });
    return new Response(answer.body, { status: answer.status });
  }) as unknown as typeof globalThis.fetch;
  const out = { stdout: '', stderr: '' };
  const io = {
    stdout: (t: string) => {
      out.stdout += t;
    },
    stderr: (t: string) => {
      out.stderr += t;
    },
  };
  return { sent, fetch, out, io };
}

const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();
const sha256 = (data: string) => createHash('sha256').update(data).digest('hex');

/** The signature AWS computes for this request (Signature Version 4, header-based). */
function expectedSignature(request: Sent, signedHeaders: string[], scope: string[]): string {
  const lower = Object.fromEntries(Object.entries(request.headers).map(([k, v]) => [k.toLowerCase(), v]));
  const canonical = [
    'POST',
    '/',
    '',
    ...signedHeaders.map((h) => `${h}:${String(lower[h]).trim()}`),
    '',
    signedHeaders.join(';'),
    sha256(request.body),
  ].join('\n');
  const [date, region, service] = scope as [string, string, string];
  const toSign = ['AWS4-HMAC-SHA256', lower['x-amz-date'], scope.join('/'), sha256(canonical)].join('\n');
  let key = hmac(`AWS4${credentials.secretAccessKey}`, date);
  for (const part of [region, service, 'aws4_request']) key = hmac(key, part);
  return createHmac('sha256', key).update(toSign).digest('hex');
}

describe('npx ratelimit with RATE_LIMIT_ADMIN_URL (the admin function, signed)', () => {
  it('POSTs the command line signed for lambda in the URL’s region, and answers with the function’s exit code', async () => {
    const { sent, fetch, out, io } = stand({
      status: 200,
      body: JSON.stringify({ exitCode: 3, stdout: 'wrote nothing\n', stderr: 'refused\n' }),
    });
    const argv = ['override', 'login-ip', '{"limit":-1}'];
    assert.equal(await runRemote(URL_, argv, io, { credentials, fetch }), 3);
    assert.deepEqual(out, { stdout: 'wrote nothing\n', stderr: 'refused\n' });
    const [request] = sent;
    assert.ok(request);
    assert.equal(request.url, URL_);
    assert.deepEqual(JSON.parse(request.body), { argv });
    const match =
      /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/(\d{8})\/eu-west-1\/lambda\/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$/.exec(
        String(request.headers.authorization),
      );
    assert.ok(match, String(request.headers.authorization));
    const signedHeaders = String(match[2]).split(';');
    assert.ok(signedHeaders.includes('host') && signedHeaders.includes('x-amz-date'));
    assert.equal(
      match[3],
      expectedSignature(request, signedHeaders, [String(match[1]), 'eu-west-1', 'lambda', 'aws4_request']),
    );
  });

  it('says why when the function refuses the caller, and refuses a URL that is not a function URL', async () => {
    const refused = stand({ status: 403, body: '{"Message":"Forbidden"}' });
    assert.equal(await runRemote(URL_, ['policies'], refused.io, { credentials, fetch: refused.fetch }), 1);
    assert.match(refused.out.stderr, /answered 403: \{"Message":"Forbidden"\}/);
    const elsewhere = stand({ status: 200, body: '{}' });
    assert.equal(
      await runRemote('https://evil.example.com/', ['policies'], elsewhere.io, { credentials, fetch: elsewhere.fetch }),
      2,
    );
    assert.equal(elsewhere.sent.length, 0, 'credentials sign nothing for another host');
  });
});
