/**
 * Amazon MemoryDB (Valkey): the equivalent durable store (every write is in a
 * Multi-AZ transaction log before it is acknowledged), selected with
 * `-c redis=memorydb`. TLS, an ACL user whose password is in Secrets Manager,
 * and a parameter group with `maxmemory-policy noeviction`.
 */

import { Aws, type Duration, Fn, RemovalPolicy } from 'aws-cdk-lib';
import { type IMetric, Metric } from 'aws-cdk-lib/aws-cloudwatch';
import { CfnACL, CfnCluster, CfnParameterGroup, CfnSubnetGroup, CfnUser } from 'aws-cdk-lib/aws-memorydb';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { operatorAclRules } from '../config/redis-roles.ts';
import {
  type DurableStore,
  type DurableStoreProps,
  REDIS_PORT,
  STORE_METRIC_STATISTIC,
  type StoreMetric,
} from './durable-store.ts';

export const MEMORYDB_ENGINE_VERSION = '7.2';
/** MemoryDB's family for Valkey 7 (docs/design.md, "The durable Redis on AWS"). */
export const MEMORYDB_PARAMETER_FAMILY = 'memorydb_valkey7';
/**
 * The ACL user the functions authenticate as (its password is the secret's):
 * `<name>`, i.e. `ratelimit-<stage>`. MemoryDB user names are account-wide,
 * so a fixed one would make a second stage's create fail.
 */
export function memoryDbUser(name: string): string {
  return name;
}

export interface MemoryDbClusterProps extends DurableStoreProps {
  /**
   * The MemoryDB Multi-Region cluster this one is the region's member of
   * (infra/global-stores.ts): engine, version, node type, shards, TLS and
   * parameters are the multi-region cluster's. @default none (a regional cluster)
   */
  readonly multiRegionClusterName?: string;
}

export class MemoryDbCluster extends Construct implements DurableStore {
  readonly kind = 'memorydb' as const;
  readonly endpointAddress: string;
  readonly endpointPort: string;
  readonly authSecret: ISecret;
  /** MemoryDB's one user serves the operator too. */
  readonly operatorSecret: ISecret;
  readonly cluster: CfnCluster;
  readonly #name: string;

  constructor(scope: Construct, id: string, props: MemoryDbClusterProps) {
    super(scope, id);
    this.#name = props.name;
    this.authSecret = props.authSecret;
    this.operatorSecret = props.authSecret;
    const subnets = new CfnSubnetGroup(this, 'Subnets', {
      subnetGroupName: props.name,
      description: `${props.name}: isolated subnets`,
      subnetIds: props.vpc.isolatedSubnets.map((subnet) => subnet.subnetId),
    });
    // A multi-region member takes its parameters from the multi-region cluster (MemoryDB's default: noeviction).
    const parameters =
      props.multiRegionClusterName === undefined
        ? new CfnParameterGroup(this, 'Parameters', {
            parameterGroupName: props.name,
            family: MEMORYDB_PARAMETER_FAMILY,
            description: 'Never evict: a lost counter is a reset limit',
            parameters: { 'maxmemory-policy': 'noeviction' },
          })
        : undefined;
    const user = new CfnUser(this, 'User', {
      userName: memoryDbUser(props.name),
      // The functions and the admin CLI share this user: the operator's rules
      // (config/redis-roles.ts: the platform's commands on its key families,
      // no FLUSHALL/CONFIG/KEYS); MemoryDB takes no `reset…` rule in an
      // access string, and its channels are off by default.
      accessString: operatorAclRules()
        .filter((rule) => rule !== 'resetchannels')
        .join(' '),
      authenticationMode: {
        Type: 'password',
        Passwords: [props.authSecret.secretValueFromJson('password').unsafeUnwrap()],
      },
    });
    const acl = new CfnACL(this, 'Acl', { aclName: props.name, userNames: [memoryDbUser(props.name)] });
    acl.addResourceDependency(user);
    this.cluster = new CfnCluster(this, 'Cluster', {
      clusterName: props.name,
      description: 'Rate limiter counters (durable: Multi-AZ transaction log)',
      ...(parameters
        ? {
            engine: 'valkey',
            engineVersion: MEMORYDB_ENGINE_VERSION,
            numShards: props.shards,
            parameterGroupName: parameters.parameterGroupName,
            tlsEnabled: true,
          }
        : { multiRegionClusterName: props.multiRegionClusterName }),
      // the multi-region cluster's node type too (CloudFormation requires it on each member)
      nodeType: props.nodeType,
      numReplicasPerShard: props.replicasPerShard,
      aclName: acl.aclName,
      subnetGroupName: subnets.subnetGroupName,
      securityGroupIds: [props.securityGroup.securityGroupId],
      kmsKeyId: props.encryptionKey.keyArn,
      port: REDIS_PORT,
      snapshotRetentionLimit: 7,
      snapshotWindow: '03:00-04:00',
      maintenanceWindow: 'sun:04:30-sun:05:30',
      autoMinorVersionUpgrade: true,
      // Unique per creation of the stack (its id's UUID): snapshot names are account-wide and outlive the
      // cluster, so a fixed name would fail the second delete (or a rolled-back create's) of this stage.
      finalSnapshotName: Fn.join('-', [props.name, 'final', Fn.select(2, Fn.split('/', Aws.STACK_ID))]),
    });
    this.cluster.addResourceDependency(acl);
    if (parameters) this.cluster.addResourceDependency(parameters);
    this.cluster.addResourceDependency(subnets);
    // CloudFormation has no Snapshot policy for MemoryDB, but the cluster's FinalSnapshotName is one: deleting
    // the (termination-protected) stack deletes the cluster after MemoryDB took its final snapshot. A retained
    // cluster would make the delete fail instead: its subnets, ACL and VPC could not go while it lives in them.
    this.cluster.applyRemovalPolicy(RemovalPolicy.DESTROY);
    this.endpointAddress = this.cluster.attrClusterEndpointAddress;
    // The port set above: the endpoint attribute is an integer, which a cross-stack export would have to stringify.
    this.endpointPort = String(REDIS_PORT);
  }

  metrics(name: StoreMetric, period: Duration): IMetric[] {
    return [
      new Metric({
        namespace: 'AWS/MemoryDB',
        metricName: name,
        dimensionsMap: { ClusterName: this.#name },
        statistic: STORE_METRIC_STATISTIC[name],
        period,
        label: this.#name,
      }),
    ];
  }
}
