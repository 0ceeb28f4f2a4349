/**
 * Which Bedrock id the deployed LLM route invokes for a model of
 * config/llm-models.json from a region: one rule for the function
 * (functions/llm/bedrock.ts) and for its IAM grant (infra/platform-stack.ts).
 */

/**
 * The cross-region inference geographies Bedrock offers, by the prefix of
 * the source region: a profile's id is `<geography>.<model id>`, and a
 * request through it is served within that geography only.
 */
const GEOGRAPHIES: readonly (readonly [prefix: string, geography: string])[] = [
  ['us-gov-', 'us-gov'],
  ['us-', 'us'],
  ['eu-', 'eu'],
  ['ap-', 'apac'],
];

/**
 * What the deployed route invokes for a model from `region`: its
 * geography's cross-region inference profile, not the foundation model
 * itself, which Bedrock serves on demand in a few regions only (Nova: in
 * us-east-1, and in eu-west-1 only through `eu.`). The IAM grant
 * (infra/platform-stack.ts) and the Bedrock provider both take it from here.
 * A region outside every geography throws: the synth fails on it.
 */
export function inferenceProfileIdOf(bedrockModelId: string, region: string): string {
  const geography = GEOGRAPHIES.find(([prefix]) => region.startsWith(prefix))?.[1];
  if (geography === undefined) {
    throw new Error(
      `no Bedrock cross-region inference geography for region ${region} (${GEOGRAPHIES.map(([p]) => `${p}*`).join(', ')})`,
    );
  }
  return `${geography}.${bedrockModelId}`;
}
