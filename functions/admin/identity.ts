/**
 * Who is calling the admin function: the IAM principal Lambda authenticated
 * (SigV4) on the function URL with `AWS_IAM` auth (infra/admin-entry.ts).
 * Lambda, not the caller, fills `requestContext.authorizer.iam` of a function
 * URL event; an event without it (a direct `lambda:Invoke` payload, a URL
 * without IAM auth) names nobody and is refused, so every write the function
 * makes names a principal (`arn:aws:sts::<account>:assumed-role/<role>/<session>`).
 *
 * The session name is whatever the caller passed to AssumeRole
 * (`aws sts assume-role --role-session-name alice` says "alice", whoever runs
 * it) unless the role's trust policy pins it (`sts:RoleSessionName`,
 * `sts:SourceIdentity`) or IAM Identity Center issues the session (its session
 * name is the user's). What ties a call to the real AssumeRole is the
 * temporary access key id Lambda also hands over (`accessKey`): CloudTrail's
 * event of the AssumeRole that issued it names who asked for it. It is kept
 * here and goes into every audit line and notice (docs/runbook.md, "Who did it").
 */
import * as v from 'valibot';

/** The caller Lambda authenticated: their ARN names the person in the audit line. */
export interface Caller {
  /** `arn:aws:iam::…:user/…` or `arn:aws:sts::…:assumed-role/<role>/<session>`. */
  readonly arn: string;
  readonly accountId: string;
  /** The principal's unique id (`AROA…:<session>`): stable across a role's renames. */
  readonly callerId: string;
  /**
   * The access key id the request was signed with (`ASIA…` for a role's
   * session): CloudTrail has the AssumeRole that issued it, and so who really
   * called, whatever session name they chose. An identifier, not a secret: an
   * access key id without its secret access key signs nothing, so it may be
   * logged and sent on the alarm topic.
   */
  readonly accessKey: string;
}

const Arn = v.pipe(v.string(), v.maxLength(2048), v.regex(/^arn:aws[a-z-]*:(iam|sts)::\d{12}:[A-Za-z0-9+=,.@_/:-]+$/));

const UrlEvent = v.object({
  version: v.literal('2.0'),
  requestContext: v.object({
    http: v.object({ method: v.string() }),
    authorizer: v.object({
      iam: v.object({
        userArn: Arn,
        accountId: v.pipe(v.string(), v.regex(/^\d{12}$/)),
        callerId: v.pipe(v.string(), v.minLength(1), v.maxLength(256)),
        // IAM's AccessKeyId: 16-128 word characters (AKIA… long-term, ASIA… temporary); Lambda always gives it
        accessKey: v.pipe(v.string(), v.regex(/^\w{16,128}$/)),
      }),
    }),
  }),
  body: v.optional(v.string()),
  isBase64Encoded: v.optional(v.boolean()),
});

/** What an authenticated caller may ask: a command line of a few short words (no shell, no files). */
const Invocation = v.object({
  argv: v.pipe(v.array(v.pipe(v.string(), v.maxLength(4096))), v.minLength(1), v.maxLength(16)),
});

/** A request the function refuses, with the status and the reason it answers. */
export interface Refusal {
  readonly refused: true;
  readonly statusCode: 400 | 403 | 405;
  readonly reason: string;
}

export interface AdminRequest {
  readonly refused: false;
  readonly caller: Caller;
  readonly argv: readonly string[];
}

const refuse = (statusCode: Refusal['statusCode'], reason: string): Refusal => ({ refused: true, statusCode, reason });

/** The caller and the command line of a function URL event, or why it is refused. */
export function readAdminRequest(event: unknown): AdminRequest | Refusal {
  const url = v.safeParse(UrlEvent, event);
  if (!url.success) {
    return refuse(
      403,
      'no IAM caller: call the function URL signed (SigV4, AWS_IAM auth; npx ratelimit with RATE_LIMIT_ADMIN_URL), not lambda:Invoke',
    );
  }
  const { requestContext, body = '', isBase64Encoded } = url.output;
  if (requestContext.http.method !== 'POST') return refuse(405, 'POST {"argv": ["<command>", …]}');
  const text = isBase64Encoded ? Buffer.from(body, 'base64').toString('utf8') : body;
  let payload: unknown;
  try {
    payload = JSON.parse(text);
  } catch {
    return refuse(400, 'the body must be JSON: {"argv": ["<command>", …]}');
  }
  const invocation = v.safeParse(Invocation, payload);
  if (!invocation.success) return refuse(400, 'the body must be {"argv": ["<command>", …]} (1–16 words)');
  const { userArn, accountId, callerId, accessKey } = requestContext.authorizer.iam;
  return { refused: false, caller: { arn: userArn, accountId, callerId, accessKey }, argv: invocation.output.argv };
}
