/**
 * The consumers that are not HTTP routes (functions/workers.ts), deployed
 * when the context names what they call (docs/deploy.md): the harvester, a
 * function on an EventBridge schedule, and the Mattermost listener, a
 * long-running ECS Fargate service (a WebSocket does not fit Lambda). Both
 * call hosts outside AWS, so they run in the private subnets behind the NAT
 * gateway (`-c egress=nat`), members of the functions' security group (for
 * Redis and the endpoints) and of one that may reach HTTPS anywhere.
 */
import { join } from 'node:path';
import { Duration, Validations } from 'aws-cdk-lib';
import { type ISecurityGroup, type IVpc, Peer, Port, SecurityGroup, SubnetType } from 'aws-cdk-lib/aws-ec2';
import { Platform } from 'aws-cdk-lib/aws-ecr-assets';
import {
  Cluster,
  ContainerImage,
  ContainerInsights,
  CpuArchitecture,
  FargateService,
  FargateTaskDefinition,
  LogDrivers,
  OperatingSystemFamily,
} from 'aws-cdk-lib/aws-ecs';
import type { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { type ILayerVersion, Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import { type ILogGroup, LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { IQueue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { SecretName } from '../config/secrets.ts';
import type { LongRunningService, ScheduledWorker } from '../functions/workers.ts';
import { acknowledgeTracing, consumerFunctionBase } from './consumer-function.ts';
import { scheduledRun } from './scheduled-run.ts';
import type { TracingMode } from './stage-hygiene.ts';

/** The platform the listener's image is built for: its task's, ARM64 Linux. */
export const LISTENER_PLATFORM = Platform.LINUX_ARM64;

export interface StreamConsumersProps {
  readonly name: string;
  readonly dist: string;
  readonly vpc: IVpc;
  readonly functionsSecurityGroup: ISecurityGroup;
  readonly layer: ILayerVersion;
  /** The stage's X-Ray switch (infra/tracing.ts). */
  readonly tracing: TracingMode;
  readonly events: IQueue;
  /** The limiter's settings every consumer gets (Redis, parameters). */
  /** What a consumer reading these secrets is told and allowed (the platform stack's limiterAccess). */
  readonly access: (secrets: readonly SecretName[]) => {
    readonly statements: readonly PolicyStatement[];
    readonly environment: Readonly<Record<string, string>>;
  };
  /** What every consumer may do (read its parameters and the Redis credentials). */

  readonly harvester?: {
    readonly worker: ScheduledWorker;
    readonly source: string;
    readonly sites: string;
    /** From the stage file; none by default. */
    readonly reservedConcurrency: number | undefined;
  };
  readonly listener?: { readonly service: LongRunningService; readonly mattermostUrl: string };
}

export class StreamConsumers extends Construct {
  readonly harvester: LambdaFunction | undefined;
  readonly listener: FargateService | undefined;
  /** The listener's task definition (its architecture, the image's platform must match). */
  readonly listenerTask: FargateTaskDefinition | undefined;
  /** Every log group a consumer here writes to (each writes its refusals there: the top-offenders rule reads them all). */
  readonly logGroups: ILogGroup[] = [];

  constructor(scope: Construct, id: string, props: StreamConsumersProps) {
    super(scope, id);
    const outbound = new SecurityGroup(this, 'Outbound', {
      vpc: props.vpc,
      description: 'HTTPS to hosts outside AWS (crawled sources, Mattermost), through the NAT gateway',
      allowAllOutbound: false,
    });
    outbound.addEgressRule(Peer.anyIpv4(), Port.tcp(443), 'HTTPS out');
    const securityGroups = [props.functionsSecurityGroup, outbound];
    const subnets = { subnetType: SubnetType.PRIVATE_WITH_EGRESS };

    if (props.harvester) {
      const { worker, source, sites } = props.harvester;
      const fn = new LambdaFunction(this, 'Harvester', {
        ...consumerFunctionBase(this, worker.id, { dist: props.dist, layer: props.layer, tracing: props.tracing }),
        functionName: `${props.name}-${worker.id}`,
        description: `${worker.id}: every ${worker.everyMinutes} min, paced per site through the limiter`,
        timeout: Duration.minutes(Math.min(15, worker.everyMinutes * 3)),
        ...(props.harvester.reservedConcurrency === undefined
          ? {}
          : { reservedConcurrentExecutions: props.harvester.reservedConcurrency }),
        vpc: props.vpc,
        vpcSubnets: subnets,
        securityGroups,
        environment: {
          ...props.access(worker.secrets).environment,
          EVENT_QUEUE_URL: props.events.queueUrl,
          HARVESTER_SOURCE_URL: source,
          HARVESTER_SITES: sites,
        },
      });
      for (const statement of props.access(worker.secrets).statements) fn.addToRolePolicy(statement);
      acknowledgeTracing(fn);
      props.events.grantSendMessages(fn);
      scheduledRun(this, 'HarvesterSchedule', {
        fn,
        layers: [props.layer],
        every: Duration.minutes(worker.everyMinutes),
        description: `Starts a harvest run every ${worker.everyMinutes} minutes (runs may overlap: they share cursor and pace)`,
      });
      this.harvester = fn;
      this.logGroups.push(fn.logGroup);
    }

    if (props.listener) {
      const { service, mattermostUrl } = props.listener;
      const cluster = new Cluster(this, 'Cluster', { vpc: props.vpc, containerInsightsV2: ContainerInsights.ENABLED });
      const task = new FargateTaskDefinition(this, 'ListenerTask', {
        cpu: 256,
        memoryLimitMiB: 512,
        runtimePlatform: { cpuArchitecture: CpuArchitecture.ARM64, operatingSystemFamily: OperatingSystemFamily.LINUX },
      });
      this.listenerTask = task;
      // The execution role pulls the image: ecr:GetAuthorizationToken takes no resource (its other
      // statements name the asset repository and the log group).
      Validations.of(task.obtainExecutionRole()).acknowledge({
        id: 'AwsSolutions::AwsSolutions-IAM5[Resource::*]',
        reason: 'ecr:GetAuthorizationToken has no resource-level permissions; it only lets the task pull its image.',
      });
      const listenerLogs = new LogGroup(this, 'ListenerLogs', { retention: RetentionDays.ONE_MONTH });
      this.logGroups.push(listenerLogs);
      task.addContainer('listener', {
        // dist/services/<id>: the self-contained bundle and its Dockerfile (npm run build).
        // built for the task's architecture whatever the builder's (an x86 image on ARM64 dies with exec format error)
        image: ContainerImage.fromAsset(join(props.dist, 'services', service.id), { platform: LISTENER_PLATFORM }),
        logging: LogDrivers.awsLogs({ streamPrefix: service.id, logGroup: listenerLogs }),
        environment: {
          ...props.access(service.secrets).environment,
          EVENT_QUEUE_URL: props.events.queueUrl,
          MATTERMOST_URL: mattermostUrl,
        },
        // Fargate stops a task with SIGTERM, then SIGKILL after this: the listener closes and logs its summary.
        stopTimeout: Duration.seconds(30),
      });
      for (const statement of props.access(service.secrets).statements) task.addToTaskRolePolicy(statement);
      props.events.grantSendMessages(task.taskRole);
      this.listener = new FargateService(this, 'Listener', {
        serviceName: `${props.name}-${service.id}`,
        cluster,
        taskDefinition: task,
        desiredCount: 1,
        // A restart may overlap the old task: each post is decided once (a claim per post id in Redis).
        minHealthyPercent: 100,
        maxHealthyPercent: 200,
        vpcSubnets: subnets,
        securityGroups,
        assignPublicIp: false,
        circuitBreaker: { rollback: true },
      });
      Validations.of(task).acknowledge({
        id: 'AwsSolutions-ECS2',
        reason:
          'The environment holds settings only (endpoints, the parameter path, the secret ARN); the bot token and the Redis credentials are read at start from SSM and Secrets Manager.',
      });
    }
  }
}
