import { appendFile, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { InvalidSettingError } from '@platform/rate-limit';
import { AWS_CLIENT_OPTIONS } from '@platform/rate-limit/redis';
import type { ConsumerSettings } from './settings.ts';

/** An event a webhook accepted, on its way to the platform's processing. */
export interface AcceptedEvent {
  readonly source: 'slack' | 'telegram' | 'mattermost' | 'harvester';
  /** The sender's id of the event (Slack event_id, Telegram update_id, Mattermost post id, harvested page): never reused. */
  readonly id: string;
  /** The scope it was counted in (workspace, bot, channel). */
  readonly scope: string;
  /** The event as the sender sent it. */
  readonly payload: unknown;
}

/**
 * Where accepted events go, within the sender's ack time (Slack: 3 s): SQS in
 * AWS, a JSON-lines file locally. Throws when the event could not be handed on;
 * the webhook then answers 503 so the sender retries.
 */
export interface EventSink {
  /** `signal` aborts a put its caller stopped waiting for (the sender's ack time is up). */
  put(event: AcceptedEvent, signal?: AbortSignal): Promise<void>;
}

export class FileEventSink implements EventSink {
  readonly #file: string;
  #ready: Promise<unknown> | undefined;

  constructor(file: string) {
    this.#file = file;
  }

  async put(event: AcceptedEvent): Promise<void> {
    this.#ready ??= mkdir(dirname(this.#file), { recursive: true });
    await this.#ready;
    // one write of one line: appends of a few KiB by concurrent processes do not interleave
    await appendFile(this.#file, `${JSON.stringify(event)}\n`);
  }
}

/**
 * How the platform's SQS clients are made: the endpoint the SDK resolves (the
 * regional one in AWS, the queue URL's own host; AWS_ENDPOINT_URL_SQS where
 * set), not the queue URL's host, which would override AWS_ENDPOINT_URL_SQS.
 */
export const SQS_CLIENT_OPTIONS = { ...AWS_CLIENT_OPTIONS, useQueueUrlAsEndpoint: false } as const;

/**
 * SQS, its SDK module imported when the sink is made (at a cold start, where
 * Lambda gives the init full CPU) rather than by every function that merely
 * links this file: ~80 ms of a cold start a function without a queue
 * (login) no longer pays (npm run bench:cold).
 */
export class SqsEventSink implements EventSink {
  readonly #sdk: Promise<typeof import('@aws-sdk/client-sqs')>;
  readonly #client: Promise<SQSClient>;
  readonly #queueUrl: string;

  constructor(queueUrl: string, client?: SQSClient) {
    this.#sdk = import('@aws-sdk/client-sqs');
    this.#client = client
      ? Promise.resolve(client)
      : this.#sdk.then(({ SQSClient }) => new SQSClient(SQS_CLIENT_OPTIONS));
    this.#queueUrl = queueUrl;
  }

  async put(event: AcceptedEvent, signal?: AbortSignal): Promise<void> {
    const [{ SendMessageCommand }, client] = await Promise.all([this.#sdk, this.#client]);
    await client.send(
      new SendMessageCommand({
        QueueUrl: this.#queueUrl,
        MessageBody: JSON.stringify(event),
        MessageAttributes: {
          source: { DataType: 'String', StringValue: event.source },
          eventId: { DataType: 'String', StringValue: event.id },
        },
      }),
      { abortSignal: signal },
    );
  }
}

/**
 * The sink of a deployed function whose EVENT_QUEUE_URL is unset: it refuses
 * every event, never writing a file inside the function's package, and a
 * webhook answers 503 before counting anything (webhook.ts, `sinkConfigured`).
 */
export class UnsetEventSink implements EventSink {
  readonly variable: string;

  constructor(variable: string) {
    this.variable = variable;
  }

  async put(): Promise<void> {
    throw new InvalidSettingError(this.variable, 'must be set in Lambda to hand accepted events on');
  }
}

/** The sink the settings name. */
export function eventSinkOf(sink: ConsumerSettings['sink']): EventSink {
  switch (sink.kind) {
    case 'sqs':
      return new SqsEventSink(sink.queueUrl);
    case 'file':
      return new FileEventSink(sink.file);
    case 'unset':
      return new UnsetEventSink(sink.variable);
  }
}
