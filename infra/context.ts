/**
 * The deploy-time choices, read once from CDK context (`-c name=value` or
 * cdk.json) and validated here: a bad value stops the synth with its name and
 * the reason, before any construct exists.
 */
import * as v from 'valibot';

/** The durable Redis the limiter runs on (SPEC §8): both keep every acknowledged write and never evict. */
export type DurableStoreKind = 'elasticache' | 'memorydb';

export interface DeployContext {
  /** Names resources and the parameter path (`/ratelimit/<stage>`). @default 'prod' */
  readonly stage: string;
  /** @default 'elasticache' (ElastiCache for Valkey, durability sync) */
  readonly redis: DurableStoreKind;
  /** Durability needs R/M/C7gn-class (Graviton) nodes. @default 'cache.r7g.large' (ElastiCache), 'db.r7g.large' (MemoryDB) */
  readonly nodeType: string;
  /** @default 1 */
  readonly shards: number;
  /** Durability and Multi-AZ need at least one. @default 1 */
  readonly replicasPerShard: number;
  /** Where `npm run build` wrote the layer and the functions. @default 'dist' */
  readonly dist: string;
}

const positiveInt = (min: number, max: number) =>
  v.pipe(
    v.union([v.number(), v.string()]),
    v.transform(Number),
    v.number(),
    v.integer(),
    v.minValue(min),
    v.maxValue(max),
  );

const Schema = v.object({
  stage: v.optional(v.pipe(v.string(), v.regex(/^[a-z][a-z0-9-]{0,19}$/, 'lowercase letters, digits, dashes')), 'prod'),
  redis: v.optional(v.picklist(['elasticache', 'memorydb']), 'elasticache'),
  nodeType: v.optional(
    v.pipe(v.string(), v.regex(/^(cache|db)\.(r|m|c)[0-9]+g[a-z]*\.[a-z0-9]+$/, 'a Graviton node type')),
  ),
  shards: v.optional(positiveInt(1, 500), 1),
  replicasPerShard: v.optional(positiveInt(1, 5), 1),
  dist: v.optional(v.pipe(v.string(), v.minLength(1)), 'dist'),
});

export class InvalidContextError extends Error {
  override readonly name = 'InvalidContextError';
}

/** The context values by name, as `App.node.tryGetContext` gives them. */
export function readDeployContext(get: (name: string) => unknown): DeployContext {
  const raw = Object.fromEntries(
    ['stage', 'redis', 'nodeType', 'shards', 'replicasPerShard', 'dist']
      .map((name) => [name, get(name)])
      .filter(([, value]) => value !== undefined),
  );
  const parsed = v.safeParse(Schema, raw);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const path = issue.path?.map((p) => p.key).join('.') ?? '';
    throw new InvalidContextError(`context ${path}: ${issue.message}`);
  }
  const { nodeType, ...rest } = parsed.output;
  const prefix = rest.redis === 'memorydb' ? 'db.' : 'cache.';
  const resolvedNodeType = nodeType ?? `${prefix}r7g.large`;
  if (!resolvedNodeType.startsWith(prefix)) {
    throw new InvalidContextError(`context nodeType: ${rest.redis} takes ${prefix}* node types`);
  }
  return { ...rest, nodeType: resolvedNodeType };
}
