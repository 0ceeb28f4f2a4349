/**
 * What every consumer function has in common: Node 24 on arm64, the bundle
 * `npm run build` wrote for it, the layer, the stage's tracing and a log group kept a
 * month. The callers add what differs (name, timeout, network, environment).
 */
import { join } from 'node:path';
import { Validations } from 'aws-cdk-lib';
import {
  Architecture,
  Code,
  type FunctionProps,
  type IFunction,
  type ILayerVersion,
  Runtime,
} from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import { FUNCTION_MEMORY_MB } from '../config/lambda-runtime.ts';
import type { TracingMode } from './stage-hygiene.ts';
import { lambdaTracing } from './tracing.ts';

export function consumerFunctionBase(
  scope: Construct,
  id: string,
  options: { readonly dist: string; readonly layer: ILayerVersion; readonly tracing: TracingMode },
): Pick<
  FunctionProps,
  'runtime' | 'architecture' | 'handler' | 'code' | 'layers' | 'memorySize' | 'tracing' | 'logGroup'
> {
  return {
    runtime: Runtime.NODEJS_24_X,
    architecture: Architecture.ARM_64,
    handler: 'handler.handler',
    code: Code.fromAsset(join(options.dist, 'functions', id)),
    layers: [options.layer],
    // the layer's V8 code cache is made for this memory's heap flags (config/lambda-runtime.ts)
    memorySize: FUNCTION_MEMORY_MB,
    // the stage's switch (infra/tracing.ts): off, or following the API's sampled decision
    tracing: lambdaTracing(options.tracing),
    logGroup: new LogGroup(scope, `Logs-${id}`, { retention: RetentionDays.ONE_MONTH }),
  };
}

/**
 * cdk-nag's IAM5 on a function's own role for active tracing, acknowledged
 * there and nowhere else: X-Ray's PutTraceSegments/PutTelemetryRecords take
 * no resource-level permission (every other statement of the role names its
 * resources, and a wildcard added to one later is still found).
 */
export function acknowledgeTracing(fn: IFunction): void {
  if (!fn.role) return;
  Validations.of(fn.role).acknowledge({
    id: 'AwsSolutions::AwsSolutions-IAM5[Resource::*]',
    reason: 'X-Ray PutTraceSegments/PutTelemetryRecords (active tracing) have no resource-level permissions.',
  });
}
