/**
 * CloudFormation's resource schemas as cfn-lint ships them (preinstalled, as
 * `npm run lint:cfn` needs): which property of a type holds its tags; and
 * the properties that give a resource a fixed name.
 */
import { execFileSync } from 'node:child_process';

/**
 * Each type's tag property by CloudFormation's registry schema (cfn-lint's
 * copy, preinstalled like `npm run lint:cfn` needs): the property named by
 * `tagging.tagProperty` when `tagging.taggable`, else none.
 */
export function tagPropertyOf(types: readonly string[]): Record<string, string | null> {
  const script = `
import json, sys, os, cfnlint.data.schemas.providers.eu_west_1 as p
base = os.path.join(os.path.dirname(p.__file__), '..', 'resources')
out = {}
for t in json.loads(sys.argv[1]):
    h = p.types.get(t)
    if h is None:
        out[t] = None if t.startswith('Custom::') or t.startswith('AWS::CDK::') else 'UNKNOWN'
        continue
    s = json.load(open(os.path.join(base, h + '.json')))
    tagging = s.get('tagging') or {}
    prop = tagging.get('tagProperty', '/properties/Tags').split('/')[-1]
    out[t] = prop if tagging.get('taggable', 'Tags' in s.get('properties', {})) and prop in s.get('properties', {}) else None
print(json.dumps(out))
`;
  return JSON.parse(execFileSync('python3', ['-c', script, JSON.stringify(types)], { encoding: 'utf8' }));
}

/** Properties that give a resource a name unique in its account or region: a kept one blocks the next create. */
export const FIXED_NAME_PROPERTIES = [
  'LogGroupName',
  'RoleName',
  'Name',
  'AliasName',
  'ReplicationGroupId',
  'GlobalReplicationGroupIdSuffix',
  'MultiRegionClusterNameSuffix',
  'ClusterName',
  'UserName',
  'UserId',
  'UserGroupId',
  'ACLName',
  'ParameterGroupName',
  'SubnetGroupName',
  'FunctionName',
  'QueueName',
  'TopicName',
  'EventBusName',
  'FinalSnapshotName',
  'SnapshotName',
  'BucketName',
] as const;

/** Each type's create-only properties by its registry schema (cfn-lint's copy): a change to one replaces the resource. */
export function createOnlyPropertiesOf(types: readonly string[]): Record<string, string[]> {
  const script = `
import json, sys, os, cfnlint.data.schemas.providers.eu_west_1 as p
base = os.path.join(os.path.dirname(p.__file__), '..', 'resources')
out = {}
for t in json.loads(sys.argv[1]):
    s = json.load(open(os.path.join(base, p.types[t] + '.json')))
    out[t] = [c.split('/')[-1] for c in s.get('createOnlyProperties', [])]
print(json.dumps(out))
`;
  return JSON.parse(execFileSync('python3', ['-c', script, JSON.stringify(types)], { encoding: 'utf8' }));
}
