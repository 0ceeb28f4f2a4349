/**
 * CDK's feature flags as infra/cdk.json sets them (`cdk init`'s recommended
 * set for this aws-cdk-lib, CURRENTLY_RECOMMENDED_FLAGS), given to the app as
 * defaults so a synth in-process (the tests) builds the same templates as the
 * CLI, which passes cdk.json's context itself. Each one that changes the
 * template is reviewed in docs/deploy.md ("CDK feature flags").
 */
import { readFileSync } from 'node:fs';

const CDK_JSON = new URL('./cdk.json', import.meta.url);

/** The `@aws-cdk/…` flags of infra/cdk.json's context. */
export const FEATURE_FLAGS: Readonly<Record<string, unknown>> = Object.fromEntries(
  Object.entries((JSON.parse(readFileSync(CDK_JSON, 'utf8')) as { context: Record<string, unknown> }).context).filter(
    ([name]) => name.startsWith('@aws-cdk/') || name.startsWith('@aws-cdk-containers/'),
  ),
);
