/**
 * The stateful stack: the network, the durable Redis, its AUTH secret and the
 * key that encrypts the limiter's data at rest and its SecureString
 * parameters. Termination-protected; deploying the platform stack never
 * replaces anything here.
 */

import { RemovalPolicy, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import {
  FlowLogDestination,
  InterfaceVpcEndpointAwsService,
  Port,
  SecurityGroup,
  SubnetType,
  Vpc,
} from 'aws-cdk-lib/aws-ec2';
import { Key } from 'aws-cdk-lib/aws-kms';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { REDIS_ROLES } from '../config/redis-roles.ts';
import type { DeployContext } from './context.ts';
import { type DurableStore, REDIS_PORT } from './durable-store.ts';
import { MemoryDbCluster, memoryDbUser } from './memorydb-cluster.ts';
import { UserDirectory } from './user-directory.ts';
import { ValkeyCluster } from './valkey-cluster.ts';

/** The services the functions call from their isolated subnets (there is no NAT). */
export const VPC_ENDPOINT_SERVICES = {
  ssm: InterfaceVpcEndpointAwsService.SSM,
  secretsManager: InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
  sqs: InterfaceVpcEndpointAwsService.SQS,
} as const;

export interface DataStackProps extends StackProps {
  readonly context: DeployContext;
}

export class DataStack extends Stack {
  /** The stage file's zones: a stack bound to an account would otherwise look them up at synth (no offline synth). */
  override get availabilityZones(): string[] {
    return [...this.#zones];
  }

  readonly vpc: Vpc;
  /** Every function's security group: the only one Redis and the endpoints let in. */
  readonly functionsSecurityGroup: SecurityGroup;
  readonly store: DurableStore;
  /** Encrypts Redis at rest and the limiter's SecureString parameters. */
  readonly dataKey: Key;
  /** The Cognito user pool the login verifies passwords against, and its app client. */
  readonly userDirectory: UserDirectory;

  readonly #zones: readonly string[];

  constructor(scope: Construct, id: string, props: DataStackProps) {
    super(scope, id, { ...props, terminationProtection: true });
    const { context } = props;
    this.#zones = context.availabilityZones;
    const name = `ratelimit-${context.stage}`;

    // Isolated subnets for Redis and the functions; with egress=nat also private
    // subnets behind one NAT gateway, for the consumers that call outside AWS.
    const withEgress = context.egress === 'nat';
    this.vpc = new Vpc(this, 'Vpc', {
      availabilityZones: [...context.availabilityZones],
      natGateways: withEgress ? 1 : 0,
      subnetConfiguration: [
        { name: 'isolated', subnetType: SubnetType.PRIVATE_ISOLATED, cidrMask: 24 },
        ...(withEgress
          ? [
              { name: 'egress', subnetType: SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 24 },
              { name: 'public', subnetType: SubnetType.PUBLIC, cidrMask: 26 },
            ]
          : []),
      ],
    });
    Validations.of(this.vpc).acknowledge({
      id: 'CloudFormation-Validate::W3010',
      reason:
        "The zones are the stage file's (infra/stages/<stage>.json), named on purpose: a stack bound to an account would otherwise look them up, and the synth must run offline.",
    });
    this.vpc.addFlowLog('FlowLog', {
      destination: FlowLogDestination.toCloudWatchLogs(
        new LogGroup(this, 'FlowLogs', { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY }),
      ),
    });

    this.functionsSecurityGroup = new SecurityGroup(this, 'Functions', {
      vpc: this.vpc,
      description: 'The limiter consumers (Lambda functions)',
      allowAllOutbound: false,
    });
    const redisSecurityGroup = new SecurityGroup(this, 'Redis', {
      vpc: this.vpc,
      description: 'The durable Redis: 6379 from the functions only',
      allowAllOutbound: false,
    });
    redisSecurityGroup.addIngressRule(this.functionsSecurityGroup, Port.tcp(REDIS_PORT), 'functions to Redis');
    this.functionsSecurityGroup.addEgressRule(redisSecurityGroup, Port.tcp(REDIS_PORT), 'functions to Redis');

    const endpointsSecurityGroup = new SecurityGroup(this, 'Endpoints', {
      vpc: this.vpc,
      description: 'AWS API endpoints: HTTPS from the functions only',
      allowAllOutbound: false,
    });
    endpointsSecurityGroup.addIngressRule(this.functionsSecurityGroup, Port.tcp(443), 'functions to AWS APIs');
    this.functionsSecurityGroup.addEgressRule(endpointsSecurityGroup, Port.tcp(443), 'functions to AWS APIs');
    for (const [endpointId, service] of Object.entries(VPC_ENDPOINT_SERVICES)) {
      this.vpc.addInterfaceEndpoint(endpointId, {
        service,
        subnets: { subnetType: SubnetType.PRIVATE_ISOLATED },
        securityGroups: [endpointsSecurityGroup],
        open: false,
      });
    }

    this.dataKey = new Key(this, 'DataKey', {
      alias: `alias/${name}`,
      description: 'Rate limiter: Redis at rest and the SecureString parameters',
      enableKeyRotation: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    const authSecret = new Secret(this, 'RedisAuth', {
      description: `${name}: the functions' Redis user and password (ElastiCache RBAC) or MemoryDB's ACL user`,
      encryptionKey: this.dataKey,
      generateSecretString: {
        // the user the functions authenticate as: MemoryDB's one user, or ElastiCache's functions user (RBAC)
        secretStringTemplate: JSON.stringify({
          username: context.redis === 'memorydb' ? memoryDbUser(name) : REDIS_ROLES.functions.username,
        }),
        generateStringKey: 'password',
        // ElastiCache user passwords: 16–128 printable characters without @ " / or spaces.
        excludePunctuation: true,
        passwordLength: 64,
      },
      removalPolicy: RemovalPolicy.RETAIN,
    });
    Validations.of(authSecret).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'Rotated by the documented two-password procedure (docs/runbook.md, "Rotating the Redis users\' passwords"): the ElastiCache or MemoryDB user holds the new password beside the old until every consumer has picked it up; no rotation function yet.',
    });

    this.userDirectory = new UserDirectory(this, 'Users', { name, existingUserPoolId: context.userPoolId });

    const storeProps = {
      name,
      vpc: this.vpc,
      securityGroup: redisSecurityGroup,
      authSecret,
      encryptionKey: this.dataKey,
      nodeType: context.nodeType,
      shards: context.shards,
      replicasPerShard: context.replicasPerShard,
    };
    if (context.redis === 'memorydb') {
      this.store = new MemoryDbCluster(this, 'MemoryDb', storeProps);
    } else {
      this.store = new ValkeyCluster(this, 'Valkey', storeProps);
    }
  }
}
