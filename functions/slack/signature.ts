import { createHmac, timingSafeEqual } from 'node:crypto';

/** How far a request's timestamp may be from now (Slack's own advice: 5 minutes). */
export const MAX_SKEW_SECONDS = 300;

export type SignatureCheck = 'valid' | 'stale' | 'bad-signature';

/**
 * Slack's v0 request signature: `v0=` + hex HMAC-SHA256 of
 * `v0:<X-Slack-Request-Timestamp>:<raw body>` with the app's signing secret,
 * compared in constant time; the timestamp within 5 minutes of now.
 */
export function verifySlackSignature(
  signingSecret: string,
  timestamp: string | undefined,
  signature: string | undefined,
  body: string,
  nowSeconds = Math.floor(Date.now() / 1000),
): SignatureCheck {
  const seconds = Number(timestamp);
  if (!timestamp || !/^\d{1,12}$/.test(timestamp) || Math.abs(nowSeconds - seconds) > MAX_SKEW_SECONDS) return 'stale';
  const expected = Buffer.from(
    `v0=${createHmac('sha256', signingSecret).update(`v0:${timestamp}:${body}`).digest('hex')}`,
  );
  const given = Buffer.from(signature ?? '');
  return given.length === expected.length && timingSafeEqual(given, expected) ? 'valid' : 'bad-signature';
}

/** Signs a body as Slack does (the tests' and the demo's sender). */
export function signSlackBody(signingSecret: string, body: string, timestamp = Math.floor(Date.now() / 1000)) {
  const signature = `v0=${createHmac('sha256', signingSecret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
  return { 'X-Slack-Request-Timestamp': String(timestamp), 'X-Slack-Signature': signature };
}
