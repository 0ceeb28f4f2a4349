/**
 * ElastiCache for Valkey with durability `sync`: cluster mode (durability
 * requires it), Multi-AZ with at least one replica per shard, TLS in transit
 * and at rest, an AUTH token from Secrets Manager, and its own parameter
 * group with `maxmemory-policy noeviction` (ElastiCache's default is
 * volatile-lru: an evicted counter is a reset limit).
 */
import { type Duration, RemovalPolicy } from 'aws-cdk-lib';
import { type IMetric, Metric } from 'aws-cdk-lib/aws-cloudwatch';
import { CfnParameterGroup, CfnReplicationGroup, CfnSubnetGroup } from 'aws-cdk-lib/aws-elasticache';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
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

export class ValkeyCluster extends Construct implements DurableStore {
  readonly kind = 'elasticache' as const;
  readonly endpointAddress: string;
  readonly endpointPort: string;
  readonly authSecret: ISecret;
  readonly replicationGroup: CfnReplicationGroup;
  readonly #nodeIds: string[];

  constructor(scope: Construct, id: string, props: DurableStoreProps) {
    super(scope, id);
    this.authSecret = props.authSecret;
    const subnets = new CfnSubnetGroup(this, 'Subnets', {
      description: `${props.name}: isolated subnets`,
      subnetIds: props.vpc.isolatedSubnets.map((subnet) => subnet.subnetId),
    });
    const parameters = new CfnParameterGroup(this, 'Parameters', {
      cacheParameterGroupFamily: VALKEY_PARAMETER_FAMILY,
      description: `${props.name}: cluster mode, never evict (a lost counter is a reset limit)`,
      properties: { 'cluster-enabled': 'yes', 'maxmemory-policy': 'noeviction' },
    });
    this.replicationGroup = new CfnReplicationGroup(this, 'ReplicationGroup', {
      replicationGroupId: props.name,
      replicationGroupDescription: 'Rate limiter counters (durable: sync writes to a Multi-AZ transaction log)',
      engine: 'valkey',
      engineVersion: VALKEY_ENGINE_VERSION,
      cacheNodeType: props.nodeType,
      clusterMode: 'enabled',
      durability: 'sync',
      numNodeGroups: props.shards,
      replicasPerNodeGroup: props.replicasPerShard,
      automaticFailoverEnabled: true,
      multiAzEnabled: true,
      transitEncryptionEnabled: true,
      transitEncryptionMode: 'required',
      atRestEncryptionEnabled: true,
      kmsKeyId: props.encryptionKey.keyArn,
      authToken: props.authSecret.secretValueFromJson('password').unsafeUnwrap(),
      port: REDIS_PORT,
      cacheParameterGroupName: parameters.ref,
      cacheSubnetGroupName: subnets.ref,
      securityGroupIds: [props.securityGroup.securityGroupId],
      snapshotRetentionLimit: 7,
      snapshotWindow: '03:00-04:00',
      preferredMaintenanceWindow: 'sun:04:30-sun:05:30',
      autoMinorVersionUpgrade: true,
    });
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
    this.endpointAddress = this.replicationGroup.attrConfigurationEndPointAddress;
    this.endpointPort = this.replicationGroup.attrConfigurationEndPointPort;
    // ElastiCache reports host and engine metrics per node: <group>-<shard 0001…>-<node 001…>.
    this.#nodeIds = [];
    for (let shard = 1; shard <= props.shards; shard++) {
      for (let node = 1; node <= 1 + props.replicasPerShard; node++) {
        this.#nodeIds.push(`${props.name}-${String(shard).padStart(4, '0')}-${String(node).padStart(3, '0')}`);
      }
    }
  }

  metrics(name: StoreMetric, period: Duration): IMetric[] {
    return this.#nodeIds.map(
      (node) =>
        new Metric({
          namespace: 'AWS/ElastiCache',
          metricName: name,
          dimensionsMap: { CacheClusterId: node },
          statistic: STORE_METRIC_STATISTIC[name],
          period,
          label: node,
        }),
    );
  }
}
