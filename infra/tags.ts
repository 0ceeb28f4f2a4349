/**
 * The tags a platform team finds on every resource of a stage: which stage,
 * which service, who owns it and which cost centre pays (the stage file's
 * `tags`). Applied once to the app (CDK's Tags aspect reaches every taggable
 * resource of every stack, the ones CDK creates for itself included); the
 * budget (infra/budget.ts) filters the stage's costs by them.
 */
import { Tags } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';
import type { DeployContext } from './context.ts';

/** The service tag's value: this project. */
export const SERVICE_TAG_VALUE = 'ratelimit';

/** The tag keys, as Cost Explorer and the budget's filter name them (`user:<key>` once activated). */
export const TAG_KEYS = { stage: 'stage', service: 'service', owner: 'owner', costCentre: 'cost-centre' } as const;

/** A stage's tags, by key. */
export function stageTags(context: Pick<DeployContext, 'stage' | 'tags'>): Record<string, string> {
  return {
    [TAG_KEYS.stage]: context.stage,
    [TAG_KEYS.service]: SERVICE_TAG_VALUE,
    [TAG_KEYS.owner]: context.tags.owner,
    [TAG_KEYS.costCentre]: context.tags.costCentre,
  };
}

/** Tags every taggable resource under `scope` (the app) with the stage's tags. */
export function tagStage(scope: IConstruct, context: Pick<DeployContext, 'stage' | 'tags'>): void {
  for (const [key, value] of Object.entries(stageTags(context))) Tags.of(scope).add(key, value);
}
