/**
 * The admin function's entry point and what it tells (docs/runbook.md,
 * "Reaching a deployed stage"):
 *
 * - a function URL on its alias `live` with `AWS_IAM` auth: Lambda checks the
 *   caller's SigV4 signature and their `lambda:InvokeFunctionUrl` permission,
 *   then hands the function the caller's ARN (functions/admin/identity.ts),
 *   which the audit line names. No resource policy: only principals of the
 *   stage's account whose own policies allow `lambda:InvokeFunctionUrl` on
 *   this function may call it. Chosen over a CloudTrail trail of the
 *   function's data events because the person is then in the audit line and
 *   the notice at the moment of the write, with no trail bucket to keep and
 *   search (docs/runbook.md says why and what remains).
 * - the operations queue the function puts one notice per write on, and an
 *   EventBridge pipe publishing each to the stage's alarm topic: who, what,
 *   when, reaches whoever is subscribed there.
 */
import { CfnOutput, Duration, Stack } from 'aws-cdk-lib';
import { ManagedPolicy, PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import {
  type Alias,
  type FunctionUrl,
  FunctionUrlAuthType,
  type Function as LambdaFunction,
} from 'aws-cdk-lib/aws-lambda';
import { CfnPipe } from 'aws-cdk-lib/aws-pipes';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

export interface AdminEntryProps {
  /** `ratelimit-<stage>`. */
  readonly name: string;
  /** The operator policy's prefix: IAM names are account-wide (`name`, or `<name>-<region>` in a two-region stage). */
  readonly accountWideName: string;
  readonly fn: LambdaFunction;
  readonly alias: Alias;
  /** The stage's alarm topic (infra/observability.ts): operators already listen there. */
  readonly topic: ITopic;
}

export class AdminEntry extends Construct {
  readonly url: FunctionUrl;
  readonly operations: Queue;
  /** What the pipe could not publish 5 times (alarmed: Observability.watchOperations). */
  readonly deadLetters: Queue;
  readonly pipe: CfnPipe;
  /** What an operator's role (an SSO permission set) attaches to call the URL: through the URL only. */
  readonly operatorPolicy: ManagedPolicy;

  constructor(scope: Construct, id: string, props: AdminEntryProps) {
    super(scope, id);
    this.url = props.alias.addFunctionUrl({ authType: FunctionUrlAuthType.AWS_IAM });
    new CfnOutput(Stack.of(this), 'AdminUrl', {
      value: this.url.url,
      description: 'RATE_LIMIT_ADMIN_URL for npx ratelimit against this stage (SigV4, IAM)',
    });

    // Function URLs created since 2025-10 want both actions; InvokeFunction only through the URL, so an
    // operator cannot hand the function a forged URL-shaped event by lambda:Invoke
    const targets = [props.alias.functionArn, props.fn.functionArn];
    this.operatorPolicy = new ManagedPolicy(this, 'OperatorPolicy', {
      managedPolicyName: `${props.accountWideName}-admin-operator`,
      description: `npx ratelimit against ${props.name}: the admin function's IAM-authorized URL, nothing else`,
      statements: [
        new PolicyStatement({
          actions: ['lambda:InvokeFunctionUrl'],
          resources: targets,
          conditions: { StringEquals: { 'lambda:FunctionUrlAuthType': 'AWS_IAM' } },
        }),
        new PolicyStatement({
          actions: ['lambda:InvokeFunction'],
          resources: targets,
          conditions: { Bool: { 'lambda:InvokedViaFunctionUrl': 'true' } },
        }),
      ],
    });

    this.deadLetters = new Queue(this, 'OperationsDeadLetters', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    const deadLetters = this.deadLetters;
    this.operations = new Queue(this, 'Operations', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      deadLetterQueue: { queue: deadLetters, maxReceiveCount: 5 },
    });
    this.operations.grantSendMessages(props.fn);
    props.fn.addEnvironment('OPERATIONS_QUEUE_URL', this.operations.queueUrl);

    const role = new Role(this, 'PipeRole', {
      assumedBy: new ServicePrincipal('pipes.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': Stack.of(this).account } },
      }),
      description: `${props.name}: the pipe from the admin function's operations queue to the alarm topic`,
    });
    this.operations.grantConsumeMessages(role);
    // sns:Publish on this topic, and the topic key's two actions a publisher needs (grantPublish would give GenerateDataKey*)
    role.addToPolicy(new PolicyStatement({ actions: ['sns:Publish'], resources: [props.topic.topicArn] }));
    if (props.topic.masterKey) {
      role.addToPolicy(
        new PolicyStatement({
          actions: ['kms:GenerateDataKey', 'kms:Decrypt'], // what publishing to an encrypted topic needs
          resources: [props.topic.masterKey.keyArn],
        }),
      );
    }
    this.pipe = new CfnPipe(this, 'Pipe', {
      name: `${props.name}-operations`,
      description: 'Each write of the admin function (who, what, when) to the alarm topic',
      roleArn: role.roleArn,
      source: this.operations.queueArn,
      sourceParameters: { sqsQueueParameters: { batchSize: 1 } },
      target: props.topic.topicArn,
      // the message body is the notice (JSON, no secret, the key as a digest): published as it is
      targetParameters: { inputTemplate: '<$.body>' },
    });
  }
}
