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
 * audit lines name the caller Lambda authenticated (identity.ts); a call
 * that names nobody (a direct `lambda:Invoke`) is refused with a 403 and
 * runs nothing. Each write also notifies the operators (notify.ts).
 * Parameters are read from SSM (`--ssm` is implied); overrides written there.
 */

import type { AuditRecord } from '../../cli/commands.ts';
import { runCli } from '../../cli/commands.ts';
import { readOperationsQueue } from '../shared/settings.ts';
import { readAdminRequest } from './identity.ts';
import { noticeOf, type OperationsNotifier, SqsOperationsNotifier } from './notify.ts';

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

let notifier: OperationsNotifier | undefined | null = null;
/** The operations queue when configured (always in Lambda: settings refuse it unset there). */
function operationsNotifier(): OperationsNotifier | undefined {
  if (notifier === null) {
    const queueUrl = readOperationsQueue();
    notifier = queueUrl === undefined ? undefined : new SqsOperationsNotifier(queueUrl);
  }
  return notifier;
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
  const argv = [...request.argv, ...(request.argv.includes('--ssm') ? [] : ['--ssm'])];
  const written: AuditRecord[] = [];
  let stdout = '';
  let stderr = '';
  const exitCode = await runCli(argv, {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
      process.stderr.write(text); // the audit lines land in the function's log too
    },
    who: caller.arn,
    onAudit: (record) => written.push(record),
  });
  const target = operationsNotifier();
  for (const record of written) {
    const notice = noticeOf(record, caller, {
      ...(context?.awsRequestId ? { requestId: context.awsRequestId } : {}),
      ...(context?.functionName ? { functionName: context.functionName } : {}),
    });
    try {
      await target?.notify(notice);
    } catch (error) {
      // the write stands (it is done); the operator and the log are told it went unannounced
      const line = JSON.stringify({
        audit: 'ratelimit',
        notified: false,
        what: notice.what,
        who: notice.who,
        reason: (error as Error).name,
      });
      process.stderr.write(`${line}\n`);
      stderr += `ratelimit: ${notice.what} is done but the operators were not notified (${(error as Error).name}): tell them\n`;
    }
  }
  const answer: AdminAnswer = { exitCode, stdout, stderr };
  return json(200, answer);
}
