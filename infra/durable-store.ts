/**
 * The durable Redis behind the limiter (docs/design.md, "The durable Redis on AWS"): every acknowledged write
 * survives a node loss, and nothing is ever evicted. Two AWS services give
 * that; the rest of the app sees only this interface.
 *
 * ElastiCache Serverless is not one of them: it has no parameter groups (so
 * no `noeviction`) and evicts keys that carry a TTL, i.e. it would silently
 * reset limits. docs/deploy.md says so for whoever is tempted.
 */
import type { Duration } from 'aws-cdk-lib';
import type { IMetric } from 'aws-cdk-lib/aws-cloudwatch';
import type { ISecurityGroup, IVpc } from 'aws-cdk-lib/aws-ec2';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';

/** The port both stores listen on, and the only one the functions' security group may reach. */
export const REDIS_PORT = 6379;

/** What either store is made from (infra/data-stack.ts). */
export interface DurableStoreProps {
  readonly name: string;
  readonly vpc: IVpc;
  readonly securityGroup: ISecurityGroup;
  readonly authSecret: ISecret;
  readonly encryptionKey: IKey;
  readonly nodeType: string;
  readonly shards: number;
  readonly replicasPerShard: number;
}

export interface DurableStore {
  readonly kind: 'elasticache' | 'memorydb';
  /** The cluster's configuration endpoint: what REDIS_CLUSTER_NODES names. */
  readonly endpointAddress: string;
  readonly endpointPort: string;
  /** `{ "password": …, "username": … }`: the functions' user (ElastiCache RBAC, config/redis-roles.ts REDIS_ROLES) or MemoryDB's ACL user. */
  readonly authSecret: ISecret;
  /** The operator's credentials (the admin function): ElastiCache's operator user; on MemoryDB its one user's. */
  readonly operatorSecret: ISecret;
  /** The store's own metrics, one per node where the service reports them by node. */
  metrics(name: StoreMetric, period: Duration): IMetric[];
  /**
   * Where the service reports by node: each node's metric of `name`, by node
   * id, for the alarms that watch that every node reports (an id the list has
   * and the service does not report is a node gone, or ids that changed).
   */
  nodeMetrics?(name: StoreMetric, period: Duration, statistic: 'SampleCount'): ReadonlyMap<string, IMetric>;
}

/** The store metrics the dashboard and the alarms read (same meaning on both services). */
export type StoreMetric =
  | 'EngineCPUUtilization'
  | 'DatabaseMemoryUsagePercentage'
  | 'CurrConnections'
  | 'Evictions'
  | 'ReplicationLag'
  /** ElastiCache durable clusters only: writes throttled past ~100 MiB/s per primary. */
  | 'TrafficManagementActive';

/** The statistic each store metric is read with: a maximum for levels, a sum for counts. */
export const STORE_METRIC_STATISTIC: Readonly<Record<StoreMetric, 'Maximum' | 'Sum'>> = {
  EngineCPUUtilization: 'Maximum',
  DatabaseMemoryUsagePercentage: 'Maximum',
  CurrConnections: 'Maximum',
  Evictions: 'Sum',
  ReplicationLag: 'Maximum',
  TrafficManagementActive: 'Maximum',
};
