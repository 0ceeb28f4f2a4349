/**
 * Every write the admin function makes (reset, rate, override) tells the
 * operators who did what, when: one record per write on the operations
 * queue, which an EventBridge pipe publishes to the stage's alarm topic
 * (infra/admin-entry.ts). SQS rather than SNS from code: the function sits in
 * isolated subnets with an SQS endpoint already there, and the SDK client is
 * the platform's. The record carries no secret and no key: a key appears as
 * a digest (the first 16 hex of its SHA-256), enough to match the audit line
 * in the function's log, useless to replay.
 */
import { createHash } from 'node:crypto';
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
  readonly what: string;
  readonly at: string;
  readonly policy: string | undefined;
  /** The key's SHA-256, first 16 hex digits (the audit line in the function's log has the key as stored). */
  readonly keyDigest: string | undefined;
  /** An override's new value, a rate change: policy settings, never a secret. */
  readonly change: unknown;
  /** The Lambda request id: the function's log has the full audit line under it. */
  readonly requestId: string | undefined;
  /** The admin function of the stage (`ratelimit-<stage>-admin`). */
  readonly functionName: string | undefined;
}

export const keyDigest = (key: string): string => createHash('sha256').update(key).digest('hex').slice(0, 16);

/** The notice of one audited write: who/what/when, the key as a digest. */
export function noticeOf(
  record: AuditRecord,
  caller: Caller,
  where: { requestId?: string; functionName?: string },
): OperationNotice {
  const policy = typeof record.policy === 'string' ? record.policy : undefined;
  const key = typeof record.key === 'string' ? record.key : undefined;
  const change = record.what === 'override' ? record.after : record.what === 'rate' ? record.change : undefined;
  return {
    subject: `${where.functionName ?? 'ratelimit'}: ${record.what} ${policy ?? ''} by ${caller.arn}`.slice(0, 100),
    who: caller.arn,
    callerId: caller.callerId,
    what: record.what,
    at: record.at,
    policy,
    keyDigest: key === undefined ? undefined : keyDigest(key),
    change,
    requestId: where.requestId,
    functionName: where.functionName,
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
