/**
 * Every write the admin function makes (reset, rate, override) tells the
 * operators who did what, when: one record per write on the operations
 * queue, which an EventBridge pipe publishes to the stage's alarm topic
 * (infra/admin-entry.ts). SQS rather than SNS from code: the function sits in
 * isolated subnets with an SQS endpoint already there, and the SDK client is
 * the platform's. The record carries no secret (the caller's access key id
 * is an identifier: it signs nothing without its secret key) and no key: a key appears as
 * a digest keyed with the stage's email pepper (keyDigest), enough to match
 * two notices of one key or the audit line in the function's log, useless to
 * replay, and not reversible by whoever reads the topic: an unkeyed hash of
 * an IPv4 key (login-ip) falls to hashing all 2^32 addresses.
 */
import { createHmac } from 'node:crypto';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { AuditRecord } from '../../cli/commands.ts';
import { SQS_CLIENT_OPTIONS } from '../shared/sink.ts';
import type { Caller } from './identity.ts';

/** What the operators are told of one write. */
export interface OperationNotice {
  readonly subject: string;
  /** The caller's ARN: the person. */
  readonly who: string;
  readonly callerId: string;
  /**
   * The access key id the caller signed with: CloudTrail's AssumeRole that
   * issued it names who really called (the session name in `who` is theirs to
   * choose). An identifier, not a secret: without its secret key it signs nothing.
   */
  readonly accessKey: string;
  readonly what: string;
  readonly at: string;
  readonly policy: string | undefined;
  /** keyDigest of the key: 16 hex digits (the audit line in the function's log has the key as stored). */
  readonly keyDigest: string | undefined;
  /** An override's new value, a rate change: policy settings, never a secret. */
  readonly change: unknown;
  /** The Lambda request id: the function's log has the full audit line under it. */
  readonly requestId: string | undefined;
  /** The admin function of the stage (`ratelimit-<stage>-admin`). */
  readonly functionName: string | undefined;
  /** 'unknown' for a write sent whose answer never came (it may have landed): check its state by hand. */
  readonly outcome?: 'unknown';
}

/**
 * The secret keyDigest is keyed with: the email pepper (config/secrets.ts),
 * which the admin function already reads to hash `--email` as login does, so
 * the digest needs no secret of its own and is the same in every container
 * of a stage.
 */
export const DIGEST_SECRET = 'email-pepper';

/** Derives the digest's own key from the pepper: its HMACs never equal the pepper's other uses (emails hold no NUL). */
const DIGEST_LABEL = 'ratelimit admin notice key digest\0';

/** A key as the notices name it: HMAC-SHA-256 under a key derived from `secret`, first 16 hex digits. */
export function keyDigest(key: string, secret: string): string {
  const digestKey = createHmac('sha256', secret).update(DIGEST_LABEL).digest();
  return createHmac('sha256', digestKey).update(key).digest('hex').slice(0, 16);
}

/** The notice of one audited write: who/what/when, the key as a digest keyed with `digestSecret`. */
export function noticeOf(
  record: AuditRecord,
  caller: Caller,
  where: { requestId?: string; functionName?: string },
  digestSecret: string,
): OperationNotice {
  const policy = typeof record.policy === 'string' ? record.policy : undefined;
  const key = typeof record.key === 'string' ? record.key : undefined;
  const change = record.what === 'override' ? record.after : record.what === 'rate' ? record.change : undefined;
  const unknown = record.outcome === 'unknown';
  return {
    subject:
      `${where.functionName ?? 'ratelimit'}: ${unknown ? 'maybe ' : ''}${record.what} ${policy ?? ''} by ${caller.arn}`.slice(
        0,
        100,
      ),
    who: caller.arn,
    callerId: caller.callerId,
    accessKey: caller.accessKey,
    what: record.what,
    at: record.at,
    policy,
    keyDigest: key === undefined ? undefined : keyDigest(key, digestSecret),
    change,
    requestId: where.requestId,
    functionName: where.functionName,
    ...(unknown ? { outcome: 'unknown' as const } : {}),
  };
}

/** Where notices go: the operations queue deployed, nowhere else (a write that cannot notify says so). */
export interface OperationsNotifier {
  notify(notice: OperationNotice): Promise<void>;
}

export class SqsOperationsNotifier implements OperationsNotifier {
  readonly #sdk = import('@aws-sdk/client-sqs');
  readonly #client: Promise<SQSClient>;
  readonly #queueUrl: string;

  constructor(queueUrl: string, client?: SQSClient) {
    this.#queueUrl = queueUrl;
    this.#client = client
      ? Promise.resolve(client)
      : this.#sdk.then(({ SQSClient }) => new SQSClient(SQS_CLIENT_OPTIONS));
  }

  async notify(notice: OperationNotice): Promise<void> {
    const [{ SendMessageCommand }, client] = await Promise.all([this.#sdk, this.#client]);
    await client.send(new SendMessageCommand({ QueueUrl: this.#queueUrl, MessageBody: JSON.stringify(notice) }));
  }
}
