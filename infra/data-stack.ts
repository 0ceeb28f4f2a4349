/**
 * The stateful stack: the network, the durable Redis, its AUTH secret and the
 * key that encrypts the limiter's data at rest and its SecureString
 * parameters. Termination-protected; deploying the platform stack never
 * replaces anything here.
 */

import { ArnFormat, Fn, RemovalPolicy, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import {
  FlowLogDestination,
  InterfaceVpcEndpointAwsService,
  IpAddresses,
  Port,
  SecurityGroup,
  SubnetType,
  Vpc,
} from 'aws-cdk-lib/aws-ec2';
import { Key } from 'aws-cdk-lib/aws-kms';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { type ISecret, Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { REDIS_ROLES } from '../config/redis-roles.ts';
import type { DeployContext } from './context.ts';
import { type DurableStore, type DurableStoreProps, REDIS_PORT } from './durable-store.ts';
import { GlobalStores } from './global-stores.ts';
import { MemoryDbCluster, memoryDbUser } from './memorydb-cluster.ts';
import { openHomeStoreToPeer, RegionPeering } from './region-link.ts';
import type { MultiRegionStage, RegionPlace } from './regions.ts';
import { UserDirectory } from './user-directory.ts';
import { ValkeyCluster } from './valkey-cluster.ts';

/**
 * The services the functions call from their isolated subnets (there is no
 * NAT): without an endpoint a call has no path and times out. Every stage
 * deploys the one route table, so login (Cognito AdminInitiateAuth) and llm
 * (Bedrock Converse) are always there, and so are their endpoints.
 */
export const VPC_ENDPOINT_SERVICES = {
  ssm: InterfaceVpcEndpointAwsService.SSM,
  secretsManager: InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
  sqs: InterfaceVpcEndpointAwsService.SQS,
  // serves the user pool's SigV4 API (AdminInitiateAuth), not a pool domain's hosted UI or OAuth endpoints
  cognitoIdp: InterfaceVpcEndpointAwsService.COGNITO_IDP,
  bedrockRuntime: InterfaceVpcEndpointAwsService.BEDROCK_RUNTIME,
} as const;

export interface DataStackProps extends StackProps {
  readonly context: DeployContext;
  /** A stage spanning two regions (infra/regions.ts): this region's part of it. @default a single-region stage */
  readonly multiRegion?: RegionRole;
}

/** One region of a two-region stage. */
export interface RegionRole {
  readonly stage: MultiRegionStage;
  readonly place: RegionPlace;
  /** The anchor region's data stack, given to the other region's (absent: this is the anchor). */
  readonly anchor?: DataStack;
}

/** The ARN of the same secret in `region` (a Secrets Manager replica keeps the primary's name and suffix). */
function replicaArn(scope: Construct, primaryArn: string, region: string): string {
  // arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-<6 characters>
  const nameWithSuffix = Fn.select(6, Fn.split(':', primaryArn));
  return Stack.of(scope).formatArn({
    service: 'secretsmanager',
    region,
    resource: 'secret',
    resourceName: nameWithSuffix,
    arnFormat: ArnFormat.COLON_RESOURCE_NAME,
  });
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
  /**
   * A two-region stage's home store, this region's Global Datastore member
   * (the primary in the home region); `store` is then the region's MemoryDB
   * Multi-Region member.
   */
  readonly homeStore: ValkeyCluster | undefined;
  /** The anchor's: the Global Datastore and the MemoryDB Multi-Region cluster. */
  readonly globalStores: GlobalStores | undefined;
  /** The other region's: the peering to the anchor's VPC (the anchor's routes back: infra/region-link.ts). */
  readonly peering: RegionPeering | undefined;

  readonly #zones: readonly string[];

  constructor(scope: Construct, id: string, props: DataStackProps) {
    super(scope, id, { ...props, terminationProtection: true });
    const { context, multiRegion } = props;
    this.#zones = context.availabilityZones;
    const name = `ratelimit-${context.stage}`;

    // Isolated subnets for Redis and the functions; with egress=nat also private
    // subnets behind one NAT gateway, for the consumers that call outside AWS.
    const withEgress = context.egress === 'nat';
    this.vpc = new Vpc(this, 'Vpc', {
      availabilityZones: [...context.availabilityZones],
      // two regions' VPCs are peered: each its own address space (the stage file's)
      ...(multiRegion ? { ipAddresses: IpAddresses.cidr(multiRegion.place.cidr) } : {}),
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
        // the SDKs call the regional host names (cognito-idp.<region>.amazonaws.com …): they must resolve here
        privateDnsEnabled: true,
      });
    }

    this.dataKey = new Key(this, 'DataKey', {
      alias: `alias/${name}`,
      description: 'Rate limiter: Redis at rest and the SecureString parameters',
      enableKeyRotation: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    const authSecret = multiRegion?.anchor
      ? // the anchor's secret, replicated here: one password on every store of the stage
        Secret.fromSecretCompleteArn(
          this,
          'RedisAuth',
          replicaArn(this, multiRegion.anchor.store.authSecret.secretArn, multiRegion.place.region),
        )
      : this.#authSecret(name, context, multiRegion);

    this.userDirectory = new UserDirectory(this, 'Users', { name, existingUserPoolId: context.userPoolId });

    const storeProps: DurableStoreProps = {
      name,
      vpc: this.vpc,
      securityGroup: redisSecurityGroup,
      authSecret,
      encryptionKey: this.dataKey,
      nodeType: context.nodeType,
      shards: context.shards,
      replicasPerShard: context.replicasPerShard,
    };
    if (multiRegion) {
      const stores = this.#multiRegionStores(storeProps, redisSecurityGroup, multiRegion);
      this.store = stores.regional;
      this.homeStore = stores.home;
      this.globalStores = stores.global;
      this.peering = stores.peering;
      return;
    }
    this.homeStore = undefined;
    this.globalStores = undefined;
    this.peering = undefined;
    if (context.redis === 'memorydb') {
      this.store = new MemoryDbCluster(this, 'MemoryDb', storeProps);
    } else {
      this.store = new ValkeyCluster(this, 'Valkey', storeProps);
    }
  }

  /** The functions' Redis credentials (a two-region stage: the anchor's, replicated to the other region). */
  #authSecret(name: string, context: DeployContext, multiRegion: RegionRole | undefined): ISecret {
    const authSecret = new Secret(this, 'RedisAuth', {
      description: `${name}: the functions' Redis user and password (ElastiCache RBAC) or MemoryDB's ACL user`,
      encryptionKey: this.dataKey,
      generateSecretString: {
        // the user the functions authenticate as: MemoryDB's one user, or ElastiCache's functions user (RBAC)
        // (a two-region stage: one user on every store, MemoryDB's, named by the stage)
        secretStringTemplate: JSON.stringify({
          username: context.redis === 'memorydb' || multiRegion ? memoryDbUser(name) : REDIS_ROLES.functions.username,
        }),
        generateStringKey: 'password',
        // ElastiCache user passwords: 16–128 printable characters without @ " / or spaces.
        excludePunctuation: true,
        passwordLength: 64,
      },
      removalPolicy: RemovalPolicy.RETAIN,
      // the other region's functions and stores read the replica (encrypted with that region's aws/secretsmanager key)
      ...(multiRegion ? { replicaRegions: [{ region: multiRegion.stage.regions[1].region }] } : {}),
    });
    Validations.of(authSecret).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'Rotated by the documented two-password procedure (docs/runbook.md, "Rotating the Redis users\' passwords"): the ElastiCache or MemoryDB user holds the new password beside the old until every consumer has picked it up; no rotation function yet.',
    });
    return authSecret;
  }

  /**
   * A two-region stage's stores in this region (infra/global-stores.ts): the
   * Global Datastore member behind a security group of its own, open to the
   * peer region's CIDR, and the MemoryDB Multi-Region member behind the
   * functions-only one; in the anchor the two global resources, elsewhere
   * the peering to the anchor.
   */
  #multiRegionStores(storeProps: DurableStoreProps, regional: SecurityGroup, multiRegion: RegionRole) {
    const { stage, place, anchor } = multiRegion;
    const peer = stage.regions.find((other) => other.region !== place.region) as RegionPlace;
    const homeSecurityGroup = new SecurityGroup(this, 'HomeRedis', {
      vpc: this.vpc,
      description: `The home store (Global Datastore member): 6379 from the functions here and in ${peer.region}`,
      allowAllOutbound: false,
    });
    homeSecurityGroup.addIngressRule(this.functionsSecurityGroup, Port.tcp(REDIS_PORT), 'functions to the home store');
    this.functionsSecurityGroup.addEgressRule(homeSecurityGroup, Port.tcp(REDIS_PORT), 'functions to the home store');
    openHomeStoreToPeer(homeSecurityGroup, this.functionsSecurityGroup, peer.cidr, peer.region);
    const home = new ValkeyCluster(this, 'Valkey', {
      ...storeProps,
      securityGroup: homeSecurityGroup,
      singleUser: memoryDbUser(storeProps.name),
      ...(anchor ? { secondaryOf: (anchor.globalStores as GlobalStores).globalReplicationGroupId } : {}),
    });
    const global = anchor
      ? undefined
      : new GlobalStores(this, 'Global', {
          name: storeProps.name,
          replicationGroupId: storeProps.name,
          primary: home.replicationGroup,
          anchorRegion: place.region,
          homeRegion: stage.homeRegion,
          memoryDbNodeType: stage.memoryDbNodeType,
          shards: storeProps.shards,
        });
    const regionalStore = new MemoryDbCluster(this, 'MemoryDb', {
      ...storeProps,
      securityGroup: regional,
      nodeType: stage.memoryDbNodeType,
      multiRegionClusterName: ((anchor?.globalStores ?? global) as GlobalStores).multiRegionClusterName,
    });
    const peering = anchor
      ? new RegionPeering(this, 'Peering', {
          vpc: this.vpc,
          peerVpcId: anchor.vpc.vpcId,
          peerRegion: peer.region,
          peerCidr: peer.cidr,
          account: place.account,
        })
      : undefined;
    return { home, regional: regionalStore, global, peering };
  }
}
