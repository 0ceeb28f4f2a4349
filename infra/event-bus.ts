/**
 * Where accepted events reach the platform: the stage's EventBridge event
 * bus, fed from the events queue (functions/shared/sink.ts puts each accepted
 * webhook, listener and harvester event there) by an EventBridge pipe, with
 * no code of ours in between. The bus's name is published in SSM for the
 * platform's modules to subscribe with rules.
 *
 * Dead letters: a pipe with an SQS source has no dead-letter config of its
 * own (Pipes takes one for stream sources only); a batch the bus refuses goes
 * back to the queue, and after the queue's maxReceiveCount (5) to its
 * dead-letter queue: the `DeadLetters` alarm fires on the first, `QueueAge`
 * when the pipe stops draining.
 */
import { Stack } from 'aws-cdk-lib';
import { EventBus as Bus } from 'aws-cdk-lib/aws-events';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { CfnPipe } from 'aws-cdk-lib/aws-pipes';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { StringParameter } from 'aws-cdk-lib/aws-ssm';
import { Construct } from 'constructs';

/** What each event on the bus says it is: rules match on these. */
export const ACCEPTED_EVENT = { source: 'platform.accepted-events', detailType: 'AcceptedEvent' } as const;

export interface EventBusProps {
  /** `ratelimit-<stage>`: the bus's and the pipe's name. */
  readonly name: string;
  readonly queue: IQueue;
  /** The queue's own dead-letter queue (its redrive policy): where events the bus keeps refusing end. */
  readonly deadLetters: IQueue;
  /** The SSM parameter the bus's name is published under. */
  readonly busNameParameter: string;
}

export class EventBus extends Construct {
  readonly bus: Bus;
  readonly pipe: CfnPipe;

  constructor(scope: Construct, id: string, props: EventBusProps) {
    super(scope, id);
    this.bus = new Bus(this, 'Bus', {
      eventBusName: props.name,
      description: 'Accepted webhook, listener and harvester events of the rate-limited platform',
    });
    const role = new Role(this, 'PipeRole', {
      assumedBy: new ServicePrincipal('pipes.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': Stack.of(this).account } },
      }),
      description: `${props.name}: the pipe from the events queue to the bus`,
    });
    props.queue.grantConsumeMessages(role);
    role.addToPolicy(new PolicyStatement({ actions: ['events:PutEvents'], resources: [this.bus.eventBusArn] }));
    this.pipe = new CfnPipe(this, 'Pipe', {
      name: `${props.name}-events`,
      description: 'Drains the accepted events queue into the stage bus',
      roleArn: role.roleArn,
      source: props.queue.queueArn,
      sourceParameters: { sqsQueueParameters: { batchSize: 10, maximumBatchingWindowInSeconds: 1 } },
      target: this.bus.eventBusArn,
      targetParameters: {
        // the message body is the accepted event (JSON): it becomes the event's detail as it is
        inputTemplate: '<$.body>',
        eventBridgeEventBusParameters: { source: ACCEPTED_EVENT.source, detailType: ACCEPTED_EVENT.detailType },
      },
    });
    new StringParameter(this, 'BusName', {
      parameterName: props.busNameParameter,
      description: 'The event bus accepted events arrive on (rules of the platform modules subscribe to it)',
      stringValue: this.bus.eventBusName,
    });
  }
}
