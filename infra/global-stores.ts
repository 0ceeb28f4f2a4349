/**
 * The two stores a two-region stage spans its regions with (issue 32;
 * docs/multi-region.md says what each mode promises on them):
 *
 * - **home** mode: ElastiCache Global Datastore. One writable primary (the
 *   home region's replication group), an asynchronous read-only copy in the
 *   other region for disaster recovery. Every region's functions send their
 *   home-mode checks to the primary (REDIS_HOME_CLUSTER_NODES), across the
 *   VPC peering (infra/region-link.ts): exact, at one cross-region round trip.
 * - **shares** and **approximate** modes: MemoryDB Multi-Region. Active-active,
 *   last writer wins per hash field, so each region writes only its own
 *   fields and reads the others' (REDIS_CLUSTER_NODES: the region's member).
 *
 * Both are owned by the anchor region's data stack (the first region of the
 * stage file): a CloudFormation resource lives in one region. The members
 * are the data stacks' replication groups and clusters (infra/valkey-cluster.ts,
 * infra/memorydb-cluster.ts), with the same TLS and ACL users as a
 * single-region store.
 */
import { RemovalPolicy } from 'aws-cdk-lib';
import { CfnGlobalReplicationGroup } from 'aws-cdk-lib/aws-elasticache';
import { CfnMultiRegionCluster } from 'aws-cdk-lib/aws-memorydb';
import { Construct } from 'constructs';

/** MemoryDB Multi-Region runs Valkey 7.3 (the regional store's 7.2 does not join one). */
export const MEMORYDB_MULTI_REGION_ENGINE_VERSION = '7.3';

/** MemoryDB Multi-Region's smallest node: db.r7g.xlarge (a larger r7g otherwise). */
export const MEMORYDB_MULTI_REGION_NODE_TYPE = 'db.r7g.xlarge';

export interface GlobalStoresProps {
  /** `ratelimit-<stage>`: the suffix of both global names (AWS prefixes each with the region's own code). */
  readonly name: string;
  /** The replication group id every region's member has (the same name in each region). */
  readonly replicationGroupId: string;
  /** The anchor's primary replication group: the Global Datastore is created around it. */
  readonly primary: CfnResourceRef;
  readonly anchorRegion: string;
  /** The region whose member is the primary now (docs/runbook.md, "Promoting the home region"). */
  readonly homeRegion: string;
  readonly memoryDbNodeType: string;
  readonly shards: number;
}

/** What the Global Datastore's member list needs of the primary: its id, and to be created first. */
export interface CfnResourceRef {
  readonly ref: string;
}

export class GlobalStores extends Construct {
  readonly globalDatastore: CfnGlobalReplicationGroup;
  readonly multiRegionCluster: CfnMultiRegionCluster;
  /** The full Global Datastore id (region prefix + suffix): what a secondary joins. */
  readonly globalReplicationGroupId: string;
  /** The full multi-region cluster name (region prefix + suffix): what each region's member names. */
  readonly multiRegionClusterName: string;

  constructor(scope: Construct, id: string, props: GlobalStoresProps) {
    super(scope, id);
    // Members: the group the Global Datastore is created around. After a promotion the stage file's homeRegion
    // names the new primary, and the list says so, so that CloudFormation's view agrees with the failover the
    // runbook performed (never the other way round: a template alone does not move the primary).
    const members: CfnGlobalReplicationGroup.GlobalReplicationGroupMemberProperty[] =
      props.homeRegion === props.anchorRegion
        ? [{ replicationGroupId: props.primary.ref, replicationGroupRegion: props.anchorRegion, role: 'PRIMARY' }]
        : [
            { replicationGroupId: props.replicationGroupId, replicationGroupRegion: props.homeRegion, role: 'PRIMARY' },
            { replicationGroupId: props.primary.ref, replicationGroupRegion: props.anchorRegion, role: 'SECONDARY' },
          ];
    this.globalDatastore = new CfnGlobalReplicationGroup(this, 'GlobalDatastore', {
      globalReplicationGroupIdSuffix: props.name,
      globalReplicationGroupDescription: `${props.name}: the home mode's store (one writable primary, a copy elsewhere)`,
      // no cross-region automatic failover exists: a promotion is the runbook's, by hand
      members,
    });
    // Deleting it leaves every member a regional group (each keeps its data and its own snapshot policy).
    this.globalDatastore.applyRemovalPolicy(RemovalPolicy.DESTROY);
    // Untagged: CloudFormation's schema for it (cfn-lint 1.51's copy) takes no Tags, and it costs nothing itself
    // (its members, tagged, are what is billed).
    this.globalDatastore.addPropertyDeletionOverride('Tags');
    this.globalReplicationGroupId = this.globalDatastore.attrGlobalReplicationGroupId;

    this.multiRegionCluster = new CfnMultiRegionCluster(this, 'MultiRegion', {
      multiRegionClusterNameSuffix: props.name,
      description: `${props.name}: shares and approximate counts, one field per region (last writer wins per field)`,
      engine: 'valkey',
      engineVersion: MEMORYDB_MULTI_REGION_ENGINE_VERSION,
      nodeType: props.memoryDbNodeType,
      numShards: props.shards,
      tlsEnabled: true,
    });
    // MemoryDB refuses to delete it while a regional member exists: the members go first (docs/deploy.md).
    this.multiRegionCluster.applyRemovalPolicy(RemovalPolicy.DESTROY);
    this.multiRegionClusterName = this.multiRegionCluster.attrMultiRegionClusterName;
  }
}
