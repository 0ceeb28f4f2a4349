/**
 * ElastiCache for Valkey with durability `sync`: cluster mode (durability
 * requires it), Multi-AZ with at least one replica per shard, TLS in transit
 * and at rest, its own parameter group with `maxmemory-policy noeviction`
 * (ElastiCache's default is volatile-lru: an evicted counter is a reset
 * limit), and least privilege by role-based access control: no AUTH token
 * (which is the default user, with every command), the default user off,
 * and one user per role of config/redis-roles.ts (REDIS_ROLES: the same names
 * and rules as the local production shape's ACL users), each with its
 * password in a Secrets Manager secret of its own.
 */

import { type Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import { type IMetric, Metric } from 'aws-cdk-lib/aws-cloudwatch';
import {
  CfnParameterGroup,
  CfnReplicationGroup,
  CfnSubnetGroup,
  CfnUser,
  CfnUserGroup,
} from 'aws-cdk-lib/aws-elasticache';
import { type ISecret, Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { managedAccessString, REDIS_ROLES, type RedisRole } from '../config/redis-roles.ts';
import {
  type DurableStore,
  type DurableStoreProps,
  REDIS_PORT,
  STORE_METRIC_STATISTIC,
  type StoreMetric,
} from './durable-store.ts';

/** Durability needs Valkey ≥ 9.0. */
export const VALKEY_ENGINE_VERSION = '9.0';
/**
 * The parameter group family of that engine version. ElastiCache names
 * families by engine and major version (`valkey7`, `valkey8`: aws-cdk-lib's
 * CfnParameterGroup docs; "Valkey 9.0 parameter changes" in ElastiCache's
 * "Engine specific parameters" page for 9).
 */
export const VALKEY_PARAMETER_FAMILY = 'valkey9';

export interface ValkeyClusterProps extends DurableStoreProps {
  /**
   * One Redis user for every role, named so (a two-region stage: the same
   * user and password on every store of the stage, as MemoryDB's one user,
   * so one secret reaches the home store and the regional one). @default a
   * user per role of REDIS_ROLES, each with its own secret
   */
  readonly singleUser?: string;
  /**
   * The Global Datastore this group is created a secondary of (infra/global-stores.ts); its primary is
   * created as any group is, and joined by the Global Datastore. @default none: a primary or regional group
   */
  readonly secondaryOf?: string;
}

export class ValkeyCluster extends Construct implements DurableStore {
  readonly kind = 'elasticache' as const;
  readonly endpointAddress: string;
  readonly endpointPort: string;
  readonly authSecret: ISecret;
  readonly operatorSecret: ISecret;
  readonly replicationGroup: CfnReplicationGroup;
  /** The RBAC users by role (the default user, disabled, is not one). */
  readonly users: Readonly<Record<RedisRole, CfnUser>>;
  readonly #nodeIds: string[];

  constructor(scope: Construct, id: string, props: ValkeyClusterProps) {
    super(scope, id);
    // The functions' secret is the data stack's (its template names the user); the operator's is made here.
    this.authSecret = props.authSecret;
    this.operatorSecret = props.singleUser ? props.authSecret : this.#operatorSecret(props);
    const secretOf: Record<RedisRole, ISecret> = { functions: this.authSecret, operator: this.operatorSecret };
    // The default user must be in a user group: off, no command, no key (off refuses every AUTH).
    const defaultUser = new CfnUser(this, 'DefaultUser', {
      engine: 'valkey',
      userId: `${props.name}-default`,
      userName: 'default',
      accessString: 'off -@all',
      authenticationMode: { Type: 'no-password-required' },
    });
    this.users = props.singleUser ? this.#singleUser(props, props.singleUser) : this.#roleUsers(props, secretOf);
    const userGroup = new CfnUserGroup(this, 'Users', {
      engine: 'valkey',
      userGroupId: props.name,
      // a user's Ref is its id: the group waits for its users
      userIds: [defaultUser.ref, ...[...new Set(Object.values(this.users))].map((user) => user.ref)],
    });
    const subnets = new CfnSubnetGroup(this, 'Subnets', {
      description: `${props.name}: isolated subnets`,
      subnetIds: props.vpc.isolatedSubnets.map((subnet) => subnet.subnetId),
    });
    // A secondary takes engine, version, node type, shards and parameters from the Global Datastore's primary.
    const engineShape =
      props.secondaryOf !== undefined ? { globalReplicationGroupId: props.secondaryOf } : this.#engineShape(props);
    this.replicationGroup = new CfnReplicationGroup(this, 'ReplicationGroup', {
      replicationGroupId: props.name,
      replicationGroupDescription: 'Rate limiter counters (durable: sync writes to a Multi-AZ transaction log)',
      ...engineShape,
      replicasPerNodeGroup: props.replicasPerShard,
      transitEncryptionEnabled: true,
      transitEncryptionMode: 'required',
      atRestEncryptionEnabled: true,
      kmsKeyId: props.encryptionKey.keyArn,
      userGroupIds: [userGroup.ref],
      port: REDIS_PORT,
      cacheSubnetGroupName: subnets.ref,
      securityGroupIds: [props.securityGroup.securityGroupId],
      snapshotRetentionLimit: 7,
      snapshotWindow: '03:00-04:00',
      preferredMaintenanceWindow: 'sun:04:30-sun:05:30',
      autoMinorVersionUpgrade: true,
    });
    this.#protect();
    if (props.secondaryOf !== undefined) {
      // cdk-nag reads the engine and Multi-AZ from the group's own properties, which a secondary leaves to its primary
      Validations.of(this.replicationGroup).acknowledge(
        {
          id: 'AwsSolutions-AEC4',
          reason:
            'A Global Datastore secondary inherits Multi-AZ and automatic failover from the primary (which sets both); it may not set them itself.',
        },
        {
          id: 'AwsSolutions-AEC5',
          reason:
            "Valkey, not Redis OSS (the engine is the primary's), on the port every store of the platform uses; the security group admits the functions only, here and from the peer region.",
        },
      );
    }
    this.endpointAddress = this.replicationGroup.attrConfigurationEndPointAddress;
    this.endpointPort = this.replicationGroup.attrConfigurationEndPointPort;
    this.#nodeIds = nodeIds(props);
  }

  /** The operator's own secret (a user per role). */
  #operatorSecret(props: ValkeyClusterProps): ISecret {
    const secret = new Secret(this, 'OperatorAuth', {
      description: `${props.name}: the Redis operator user's password (the admin function)`,
      encryptionKey: props.encryptionKey,
      generateSecretString: {
        secretStringTemplate: JSON.stringify({ username: REDIS_ROLES.operator.username }),
        generateStringKey: 'password',
        // ElastiCache passwords: 16–128 printable characters without @ " / or spaces.
        excludePunctuation: true,
        passwordLength: 64,
      },
      removalPolicy: RemovalPolicy.RETAIN,
    });
    Validations.of(secret).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'Rotated by the documented two-password procedure (docs/runbook.md, "Rotating the Redis users\' passwords"): ElastiCache keeps two passwords per user, so the new one is added before the old one is removed.',
    });
    return secret;
  }

  /** A user per role of REDIS_ROLES (the local production shape's names and rules), each its own password. */
  #roleUsers(props: ValkeyClusterProps, secretOf: Record<RedisRole, ISecret>): Record<RedisRole, CfnUser> {
    return Object.fromEntries(
      (Object.keys(REDIS_ROLES) as RedisRole[]).map((role) => [
        role,
        new CfnUser(this, `User-${role}`, {
          engine: 'valkey',
          userId: `${props.name}-${role}`,
          userName: REDIS_ROLES[role].username,
          accessString: managedAccessString(role),
          authenticationMode: {
            Type: 'password',
            Passwords: [secretOf[role].secretValueFromJson('password').unsafeUnwrap()],
          },
        }),
      ]),
    ) as Record<RedisRole, CfnUser>;
  }

  /** One user serving every role: the operator's rules (the admin function shares it), the stage's one password. */
  #singleUser(props: ValkeyClusterProps, userName: string): Record<RedisRole, CfnUser> {
    const user = new CfnUser(this, 'User', {
      engine: 'valkey',
      userId: `${props.name}-user`,
      userName,
      accessString: managedAccessString('operator'),
      authenticationMode: {
        Type: 'password',
        Passwords: [props.authSecret.secretValueFromJson('password').unsafeUnwrap()],
      },
    });
    return { functions: user, operator: user };
  }

  /** What the group runs (a primary or a regional group sets it; a secondary inherits it). */
  #engineShape(props: ValkeyClusterProps) {
    const parameters = new CfnParameterGroup(this, 'Parameters', {
      cacheParameterGroupFamily: VALKEY_PARAMETER_FAMILY,
      description: `${props.name}: cluster mode, never evict (a lost counter is a reset limit)`,
      properties: { 'cluster-enabled': 'yes', 'maxmemory-policy': 'noeviction' },
    });
    return {
      engine: 'valkey',
      engineVersion: VALKEY_ENGINE_VERSION,
      cacheNodeType: props.nodeType,
      clusterMode: 'enabled',
      durability: 'sync',
      numNodeGroups: props.shards,
      automaticFailoverEnabled: true,
      multiAzEnabled: true,
      cacheParameterGroupName: parameters.ref,
    };
  }

  #protect(): void {
    // Deleting the stack leaves a final snapshot; the stack is also termination-protected.
    this.replicationGroup.applyRemovalPolicy(RemovalPolicy.SNAPSHOT);
    // More shards (the runbook's remedy for memory pressure) are added online:
    // without this, a changed NumNodeGroups replaces the group, which fails on
    // its fixed id (and would lose every counter).
    this.replicationGroup.cfnOptions.updatePolicy = { useOnlineResharding: true };
    // cfn-lint 1.51's schema predates ElastiCache's Durability property: its
    // E3002 ("Durability was unexpected") is schema lag, acknowledged for this
    // resource and this rule only (npm run lint:cfn).
    this.replicationGroup.addMetadata('cfn-lint', { config: { ignore_checks: ['E3002'] } });
    Validations.of(this.replicationGroup).acknowledge({
      id: 'AwsSolutions-AEC6',
      reason:
        'Authenticated by role-based access control (a user group: the default user off, a user per role with its own password) rather than an AUTH token, which is the default user with every command; the rule knows only AuthToken.',
    });
  }

  metrics(name: StoreMetric, period: Duration): IMetric[] {
    return this.#nodeIds.map((node) => this.#nodeMetric(node, name, period, STORE_METRIC_STATISTIC[name]));
  }

  nodeMetrics(name: StoreMetric, period: Duration, statistic: 'SampleCount'): ReadonlyMap<string, IMetric> {
    return new Map(this.#nodeIds.map((node) => [node, this.#nodeMetric(node, name, period, statistic)]));
  }

  #nodeMetric(node: string, name: StoreMetric, period: Duration, statistic: string): IMetric {
    return new Metric({
      namespace: 'AWS/ElastiCache',
      metricName: name,
      dimensionsMap: { CacheClusterId: node },
      statistic,
      period,
      label: node,
    });
  }
}

/**
 * ElastiCache reports host and engine metrics per node: <group>-<shard 0001…>-<node 001…>, from the
 * same shape as the group's NumNodeGroups and ReplicasPerNodeGroup. A reshard redeploys NumNodeGroups
 * in place; ReplicasPerNodeGroup is create-only (with the fixed id, a change fails the update), so a
 * replica count changed out of band is not seen here (docs/deploy.md). Should the ids ever differ from
 * these, the RedisNodeSilent alarms (infra/observability.ts) go off.
 */
function nodeIds(props: DurableStoreProps): string[] {
  const ids: string[] = [];
  for (let shard = 1; shard <= props.shards; shard++) {
    for (let node = 1; node <= 1 + props.replicasPerShard; node++) {
      ids.push(`${props.name}-${String(shard).padStart(4, '0')}-${String(node).padStart(3, '0')}`);
    }
  }
  return ids;
}
