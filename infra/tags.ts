/**
 * The tags a platform team finds on every resource of a stage: which stage,
 * which service, who owns it and which cost centre pays (the stage file's
 * `tags`). Applied once to the app (CDK's Tags aspect reaches every taggable
 * resource of every stack, the ones CDK creates for itself included); the
 * budget (infra/budget.ts) filters the stage's costs by them.
 */
import { Aspects, CfnResource, Stack, TagManager, Tags } from 'aws-cdk-lib';
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
  const tags = stageTags(context);
  for (const [key, value] of Object.entries(tags)) Tags.of(scope).add(key, value);
  // The stacks' own tags, which CloudFormation puts on what it creates; set explicitly
  // (`@aws-cdk/core:explicitStackTags`: Tags.of no longer reaches a stack itself)
  for (const stack of scope.node.findAll().filter(Stack.isStack)) {
    for (const [key, value] of Object.entries(tags)) stack.tags.setTag(key, value);
  }
  const untagged = new TagUntaggedResources(tags);
  Aspects.of(scope).add(untagged);
  // CDK creates the cross-region references' providers (a two-region stage's ExportsWriter and
  // ExportsReader: a role and a function each) while preparing the app, after the aspects ran: the
  // tree's validation runs after that and before the templates are written, so it tags them then.
  for (const stack of scope.node.findAll().filter(Stack.isStack)) {
    stack.node.addValidation({
      validate: () => {
        for (const node of stack.node.findAll()) untagged.visit(node);
        return [];
      },
    });
  }
}

/**
 * CloudFormation types CDK itself creates as raw resources, out of the tag
 * aspect's reach (core's custom resource providers: the default security
 * group's restriction, log retention), whose schema takes `Tags` as a list.
 */
const RAW_TAGGABLE = new Set(['AWS::IAM::Role', 'AWS::Lambda::Function']);

class TagUntaggedResources {
  readonly #tags: readonly { Key: string; Value: string }[];
  constructor(tags: Record<string, string>) {
    this.#tags = Object.entries(tags).map(([Key, Value]) => ({ Key, Value }));
  }

  visit(node: IConstruct): void {
    if (!CfnResource.isCfnResource(node) || !RAW_TAGGABLE.has(node.cfnResourceType)) return;
    if (TagManager.isTaggable(node) || TagManager.isTaggableV2(node)) return;
    node.addPropertyOverride('Tags', this.#tags);
  }
}
