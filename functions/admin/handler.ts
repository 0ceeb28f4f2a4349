/**
 * The operator's path to a deployed stage's Redis (which sits in isolated
 * subnets): a function reached through its function URL with `AWS_IAM` auth
 * only (infra/admin-entry.ts), which runs the admin CLI's commands
 * (cli/commands.ts) against the stage's store and parameters, as
 * `npx ratelimit` does locally. `npx ratelimit` signs the call itself when
 * `RATE_LIMIT_ADMIN_URL` names the URL (cli/remote.ts):
 *
 *   RATE_LIMIT_ADMIN_URL=https://<id>.lambda-url.<region>.on.aws/ npx ratelimit inspect login-ip 203.0.113.9
 *
 * The body is `{"argv": [...]}`; the answer `{ exitCode, stdout, stderr }`
 * (the audit lines of a write in stderr, and in the function's log). The
 * audit lines name the caller Lambda authenticated and the access key id they
 * signed with, which CloudTrail traces to its AssumeRole (identity.ts); a call
 * that names nobody (a direct `lambda:Invoke` of a plain event) is refused
 * with a 403 and runs nothing. A direct invoke of a hand-made URL-shaped
 * event cannot be told from the URL's: only IAM keeps it out (the operator
 * policy allows InvokeFunction through the URL only; a broad `lambda:*`
 * grant elsewhere does not; docs/runbook.md). Each write also notifies the
 * operators (notify.ts); a function that could not (no valid queue, no
 * pepper to digest keys with) answers a write 5xx with the reason and runs nothing; reads still run.
 * Parameters are read from SSM (`--ssm` is implied); overrides written there.
 */

import { InvalidSettingError } from '@platform/rate-limit';
import { readSettings, secretParameter, secretsFolder } from '@platform/rate-limit/config';
import type { AuditRecord } from '../../cli/commands.ts';
import { runCli, writesOf } from '../../cli/commands.ts';
import { SECRETS } from '../../config/secrets.ts';
import { readOperationsQueue } from '../shared/settings.ts';
import { readAdminRequest } from './identity.ts';
import { DIGEST_SECRET, noticeOf, type OperationsNotifier, SqsOperationsNotifier } from './notify.ts';

export interface AdminAnswer {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** A function URL's answer. */
export interface UrlResult {
  readonly statusCode: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

const json = (statusCode: number, body: unknown): UrlResult => ({
  statusCode,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

/** Why the notices could not be sent as they must: the function then runs nothing. */
class NotifierUnavailableError extends Error {
  override readonly name = 'NotifierUnavailableError';
  readonly statusCode: 500 | 503;
  constructor(statusCode: 500 | 503, message: string) {
    super(message);
    this.statusCode = statusCode;
  }
}

/** Where notices go, and the secret their key digests are keyed with. */
interface Notifier {
  readonly target: OperationsNotifier;
  readonly digestSecret: string;
}

let queue: { readonly url: string; readonly target: OperationsNotifier } | undefined;
let digestSecret: string | undefined;

/** The email pepper from SSM, where the CLI's store reads it for `--email` (that store is per command, not ours). */
async function readDigestSecret(): Promise<string> {
  const { parameterPath } = readSettings();
  const consumer = SECRETS[DIGEST_SECRET];
  const name = secretParameter(parameterPath, consumer, DIGEST_SECRET);
  let values: Record<string, string>;
  try {
    const { SsmParameterSource } = await import('@platform/rate-limit/ssm');
    values = await new SsmParameterSource().fetchAll(`${parameterPath}/${secretsFolder(consumer)}`);
  } catch (error) {
    process.stderr.write(`${JSON.stringify({ audit: 'ratelimit', unreadable: name, reason: String(error) })}\n`);
    // Powertools wraps the SDK's error (AccessDeniedException, a timeout): name what went wrong
    const cause = (error as Error).cause instanceof Error ? ((error as Error).cause as Error) : (error as Error);
    throw new NotifierUnavailableError(503, `${name} could not be read (${cause.name})`);
  }
  const value = values[name];
  if (!value) throw new NotifierUnavailableError(500, `no ${name}: put it (npm run secrets:put)`);
  return value;
}

/**
 * The notifier, read and validated before a write runs: a function that
 * wrote first and then found it could not notify would make every write an
 * unannounced one. Undefined when nobody is to be told (a local run without
 * a queue; in Lambda the queue is required). The queue's setting is checked
 * on every call (a regex); the pepper read once per container, while found.
 */
async function readyNotifier(): Promise<Notifier | undefined> {
  const url = readOperationsQueue();
  if (url === undefined) return undefined;
  if (queue?.url !== url) queue = { url, target: new SqsOperationsNotifier(url) };
  digestSecret ??= await readDigestSecret();
  return { target: queue.target, digestSecret };
}

/** One line of the function's log: a JSON object, so nothing in it ends the line early. */
function logLine(line: Record<string, unknown>): void {
  process.stderr.write(`${JSON.stringify(line)}\n`);
}

/** The answer of a function that cannot notify: 5xx and the reason (never a stack), in the log too. */
function unnotified(error: unknown): UrlResult {
  const known = error instanceof NotifierUnavailableError || error instanceof InvalidSettingError;
  const statusCode = error instanceof NotifierUnavailableError ? error.statusCode : known ? 500 : 503;
  const reason = known ? error.message : `unexpected ${(error as Error)?.name ?? typeof error}`;
  process.stderr.write(`${JSON.stringify({ audit: 'ratelimit', refused: statusCode, reason })}\n`);
  return json(statusCode, {
    error: `the admin function cannot notify the operators of a write (${reason}): nothing was run; fix its configuration`,
  });
}

export async function handler(
  event: unknown,
  context?: { awsRequestId?: string; functionName?: string },
): Promise<UrlResult> {
  const request = readAdminRequest(event);
  if (request.refused) {
    process.stderr.write(
      `${JSON.stringify({ audit: 'ratelimit', refused: request.statusCode, reason: request.reason })}\n`,
    );
    return json(request.statusCode, { error: request.reason });
  }
  const { caller } = request;
  // first: after a caller's `--` every word is positional, so an `--ssm` appended there would be no option
  const argv = ['--ssm', ...request.argv];
  // a write must be announceable before it runs; a read (policies, inspect) needs no notifier, so an
  // incident's reads still work while the queue or the pepper is missing
  let notifier: Notifier | undefined;
  if (writesOf(argv)) {
    try {
      notifier = await readyNotifier();
    } catch (error) {
      return unnotified(error);
    }
  }
  const written: AuditRecord[] = [];
  let stdout = '';
  let stderr = '';
  const requestId = context?.awsRequestId ? { requestId: context.awsRequestId } : {};
  const exitCode = await runCli(argv, {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
      // into the log as one JSON value: a caller's words in it (an unknown command's name echoed) cannot make a
      // line of their own there, such as an audit line naming someone else. An audit line the CLI wrote is
      // logged from its record below, once.
      if (!text.startsWith('{"audit":"ratelimit"')) logLine({ cli: 'stderr', ...requestId, text });
    },
    who: caller.arn,
    // into each audit line: what CloudTrail traces to the real AssumeRole (a session name is the caller's choice)
    accessKey: caller.accessKey,
    onAudit: (record) => {
      written.push(record);
      // the log's audit line, built from the record itself, with the request it belongs to
      logLine({ ...record, ...requestId });
    },
  });
  if (notifier !== undefined) {
    const where = {
      ...(context?.awsRequestId ? { requestId: context.awsRequestId } : {}),
      ...(context?.functionName ? { functionName: context.functionName } : {}),
    };
    for (const record of written) {
      const notice = noticeOf(record, caller, where, notifier.digestSecret);
      try {
        await notifier.target.notify(notice);
      } catch (error) {
        // the write stands (it is done); the operator and the log are told it went unannounced
        logLine({
          audit: 'ratelimit',
          notified: false,
          what: notice.what,
          who: notice.who,
          accessKey: notice.accessKey,
          reason: (error as Error).name,
          ...requestId,
        });
        stderr += `ratelimit: ${notice.what} is done but the operators were not notified (${(error as Error).name}): tell them\n`;
      }
    }
  }
  const answer: AdminAnswer = { exitCode, stdout, stderr };
  return json(200, answer);
}
