/**
 * How a region's functions reach the home store in the other region (issue
 * 32): inter-region VPC peering between the stage's two VPCs, a route to the
 * peer's CIDR in every subnet the functions and the stores live in, and
 * security group rules by CIDR on 6379 (a security group cannot name one in
 * another region). The Global Datastore and MemoryDB replicate between
 * regions on AWS's own network; only the home-mode checks travel here.
 *
 * Why peering and not a Transit Gateway: two VPCs need one connection,
 * peering has no hourly charge (a Transit Gateway charges per attachment
 * hour and per GB processed, on top of the inter-region transfer both pay),
 * and no extra hop. A third region would make the mesh worth a Transit
 * Gateway (docs/deploy.md, "Two regions").
 *
 * The peer region (not the anchor) requests the connection: it needs the
 * anchor's VPC id, which exists first. CloudFormation accepts an inter-region
 * peering within one account itself (no PeerRoleArn).
 */
import { Stack, type StackProps } from 'aws-cdk-lib';
import {
  CfnRoute,
  CfnVPCPeeringConnection,
  type ISubnet,
  type IVpc,
  Peer,
  Port,
  type SecurityGroup,
} from 'aws-cdk-lib/aws-ec2';
import { Construct } from 'constructs';
import { REDIS_PORT } from './durable-store.ts';

/** The subnets whose traffic crosses to the peer: the isolated ones (stores, functions) and the egress ones (workers behind NAT). */
function linkedSubnets(vpc: IVpc): ISubnet[] {
  return [...vpc.isolatedSubnets, ...vpc.privateSubnets];
}

/** A route to `peerCidr` through the peering in each route table of the VPC's linked subnets. */
export function routeToPeer(scope: Construct, vpc: IVpc, peerCidr: string, peeringConnectionId: string): CfnRoute[] {
  return linkedSubnets(vpc).map(
    (subnet, i) =>
      new CfnRoute(scope, `ToPeer${i}`, {
        routeTableId: subnet.routeTable.routeTableId,
        destinationCidrBlock: peerCidr,
        vpcPeeringConnectionId: peeringConnectionId,
      }),
  );
}

/**
 * The rules on this region's side: the home store takes 6379 from the peer
 * region's address space (its functions, after a promotion or now), and this
 * region's functions may send 6379 there. The regional store (MemoryDB) has
 * its own security group and takes nothing from the peer.
 */
export function openHomeStoreToPeer(
  homeStore: SecurityGroup,
  functions: SecurityGroup,
  peerCidr: string,
  peerRegion: string,
): void {
  homeStore.addIngressRule(Peer.ipv4(peerCidr), Port.tcp(REDIS_PORT), `functions of ${peerRegion} to the home store`);
  functions.addEgressRule(Peer.ipv4(peerCidr), Port.tcp(REDIS_PORT), `to the home store in ${peerRegion}`);
}

export interface PeeringProps {
  readonly vpc: IVpc;
  /** The anchor region's VPC (a cross-region reference). */
  readonly peerVpcId: string;
  readonly peerRegion: string;
  readonly peerCidr: string;
  readonly account: string;
}

/** The peer region's side: the peering request to the anchor's VPC and its routes. */
export class RegionPeering extends Construct {
  readonly connection: CfnVPCPeeringConnection;

  constructor(scope: Construct, id: string, props: PeeringProps) {
    super(scope, id);
    this.connection = new CfnVPCPeeringConnection(this, 'Connection', {
      vpcId: props.vpc.vpcId,
      peerVpcId: props.peerVpcId,
      peerRegion: props.peerRegion,
      peerOwnerId: props.account,
    });
    routeToPeer(this, props.vpc, props.peerCidr, this.connection.ref);
  }
}

export interface RegionLinkStackProps extends StackProps {
  readonly vpc: IVpc;
  /** The peering the other region's data stack requested (a cross-region reference). */
  readonly peeringConnectionId: string;
  readonly peerCidr: string;
}

/**
 * The anchor's side of the peering: its routes back to the peer region. A
 * stack of its own because it needs the connection the peer region's data
 * stack makes after the anchor's data stack (which the peer needs first).
 */
export class RegionLinkStack extends Stack {
  constructor(scope: Construct, id: string, props: RegionLinkStackProps) {
    super(scope, id, props);
    routeToPeer(this, props.vpc, props.peerCidr, props.peeringConnectionId);
  }
}
