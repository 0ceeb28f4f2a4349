/**
 * A stage that spans two regions (issue 32; docs/deploy.md, "Two regions"):
 * its stage file lists `regions` instead of one `account`/`region`. Read and
 * validated here, before any construct exists; the rest of the deploy
 * context (store sizes, tags, reservations) is the stage's, the same in
 * every region.
 *
 * The first region listed is the anchor: it holds the two global resources
 * (the Global Datastore and the MemoryDB Multi-Region cluster), which a
 * CloudFormation stack can own in one region only. `homeRegion` names where
 * the home mode's checks go (the Global Datastore's primary); it starts as
 * the anchor and changes only by the promotion runbook (docs/runbook.md,
 * "Promoting the home region").
 */
import * as v from 'valibot';
import { InvalidContextError } from './context.ts';
import { MEMORYDB_MULTI_REGION_NODE_TYPE } from './global-stores.ts';

/** Where one region of the stage lives, and the address space of its VPC (the two must not overlap: they are peered). */
export interface RegionPlace {
  readonly account: string;
  readonly region: string;
  readonly availabilityZones: readonly string[];
  /** The VPC's IPv4 CIDR (a /16): the peer region's functions reach the home store through it. */
  readonly cidr: string;
}

export interface MultiRegionStage {
  /** Anchor first (it owns the global resources). */
  readonly regions: readonly [RegionPlace, RegionPlace];
  /** The region whose Global Datastore member is the primary: home-mode checks go there. */
  readonly homeRegion: string;
  /** The MemoryDB Multi-Region cluster's node type (the regional store; db.r7g.xlarge and up). @default 'db.r7g.xlarge' */
  readonly memoryDbNodeType: string;
  /** How often each region's rebalancer runs (REBALANCE_PERIOD_SECONDS): EventBridge schedules in whole minutes. @default 60 */
  readonly rebalancePeriodSeconds: number;
}

/** The stage-file keys a multi-region stage replaces by its `regions` entries. */
export const PER_REGION_KEYS = ['account', 'region', 'availabilityZones'] as const;

/** The keys of the multi-region shape (the stage file's, besides the shared deploy context). */
export const MULTI_REGION_KEYS = ['regions', 'homeRegion', 'memoryDbNodeType', 'rebalancePeriodSeconds'] as const;

const REGION = /^[a-z]{2}(-[a-z]+)+-\d$/;

const Place = v.strictObject({
  account: v.pipe(
    v.union([v.string(), v.number()]),
    v.transform(String),
    v.regex(/^\d{12}$/, 'a 12-digit AWS account id'),
  ),
  region: v.pipe(v.string(), v.regex(REGION, 'an AWS region such as eu-west-1')),
  availabilityZones: v.pipe(
    v.array(v.pipe(v.string(), v.regex(/^[a-z]{2}(-[a-z]+)+-\d[a-z]$/, 'availability zones such as eu-west-1a'))),
    v.minLength(2, 'at least two availability zones (Multi-AZ)'),
  ),
  // a /16 of the private ranges: room for the isolated (and egress) subnets of every zone
  cidr: v.pipe(
    v.string(),
    v.regex(/^(10\.\d{1,3}|172\.(1[6-9]|2\d|3[01])|192\.168)\.0\.0\/16$/, 'a private /16 such as 10.10.0.0/16'),
  ),
});

const Schema = v.object({
  regions: v.pipe(
    v.array(Place),
    v.length(2, 'two regions: the anchor (home at first) and one other (more are not built yet)'),
  ),
  homeRegion: v.optional(v.pipe(v.string(), v.regex(REGION, 'an AWS region such as eu-west-1'))),
  // MemoryDB Multi-Region runs on R7g nodes of size xlarge and up
  memoryDbNodeType: v.optional(
    v.pipe(v.string(), v.regex(/^db\.r7g\.[0-9]*xlarge$/, 'an R7g node of size xlarge or larger (db.r7g.xlarge…)')),
    MEMORYDB_MULTI_REGION_NODE_TYPE,
  ),
  rebalancePeriodSeconds: v.optional(
    v.pipe(
      v.union([v.number(), v.string()]),
      v.transform(Number),
      v.number(),
      v.integer('a whole number of seconds'),
      v.minValue(60, 'at least 60 (EventBridge schedules run at most once a minute)'),
      v.maxValue(3600),
      v.check((s) => s % 60 === 0, 'a whole number of minutes (EventBridge schedules in minutes)'),
    ),
    60,
  ),
});

/**
 * The stage's regions when its stage file lists them, else undefined (a
 * single-region stage). `given` are the -c values: a region-bound one
 * (account, region, availabilityZones) cannot apply to two regions, so it is
 * refused rather than silently ignored.
 */
export function readMultiRegionStage(
  file: Readonly<Record<string, unknown>>,
  given: (name: string) => unknown,
): MultiRegionStage | undefined {
  if (file.regions === undefined) return undefined;
  for (const name of PER_REGION_KEYS) {
    if (file[name] !== undefined) {
      throw new InvalidContextError(
        `context ${name}: a two-region stage names it per region (its stage file's regions), not once`,
      );
    }
    if (given(name) !== undefined) {
      throw new InvalidContextError(
        `context ${name}: a two-region stage takes it from its stage file's regions, not from -c`,
      );
    }
  }
  const parsed = v.safeParse(Schema, {
    regions: file.regions,
    homeRegion: file.homeRegion,
    memoryDbNodeType: file.memoryDbNodeType,
    rebalancePeriodSeconds: file.rebalancePeriodSeconds ?? given('rebalancePeriodSeconds'),
  });
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const path = issue.path?.map((p) => p.key).join('.') ?? '';
    throw new InvalidContextError(`context ${path}: ${issue.message}`);
  }
  const { regions, homeRegion, memoryDbNodeType, rebalancePeriodSeconds } = parsed.output;
  const [anchor, other] = regions as unknown as [RegionPlace, RegionPlace];
  if (anchor.region === other.region) throw new InvalidContextError('context regions: two different regions');
  if (anchor.cidr === other.cidr) {
    throw new InvalidContextError('context regions.cidr: the two VPCs are peered, so their CIDRs must not overlap');
  }
  if (anchor.account !== other.account) {
    // Global Datastore and MemoryDB Multi-Region join clusters of one account only
    throw new InvalidContextError('context regions.account: both regions in one account (the global stores need it)');
  }
  for (const place of regions) {
    if (!place.availabilityZones.every((zone) => zone.startsWith(place.region))) {
      throw new InvalidContextError(`context regions.availabilityZones: zones of ${place.region}`);
    }
  }
  const home = homeRegion ?? anchor.region;
  if (!regions.some((place) => place.region === home)) {
    throw new InvalidContextError(`context homeRegion: ${home} is not one of the stage's regions`);
  }
  return { regions: [anchor, other], homeRegion: home, memoryDbNodeType, rebalancePeriodSeconds };
}
