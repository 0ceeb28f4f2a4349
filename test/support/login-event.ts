/** A login attempt as API Gateway hands it to the login function (the REST shape), and its device cookie back. */
import { DEVICE_COOKIE } from '../../functions/login/device-cookie.ts';

let requests = 0;

/** The event and context of one POST /auth/login from `from`, with `cookie` as the device cookie's value. */
export function loginEvent(from: string, who: { email: string; password: string }, cookie?: string) {
  const id = ++requests;
  return {
    event: {
      httpMethod: 'POST',
      path: '/auth/login',
      resource: '/auth/login',
      headers: { 'Content-Type': 'application/json', ...(cookie ? { Cookie: `${DEVICE_COOKIE}=${cookie}` } : {}) },
      body: JSON.stringify(who),
      isBase64Encoded: false,
      requestContext: { identity: { sourceIp: from }, requestId: `r${id}` },
    },
    context: { awsRequestId: `req-${id}`, getRemainingTimeInMillis: () => 10_000 },
  };
}

/** The device cookie's value an answer sets, if any. */
export function deviceCookieSet(headers: Record<string, unknown> | undefined): string | undefined {
  const set = headers?.['Set-Cookie'] as string | undefined;
  return set?.slice(DEVICE_COOKIE.length + 1, set.indexOf(';'));
}
