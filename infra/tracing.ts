/**
 * X-Ray as a stage switch (the stage file's `tracing`): `off` traces nothing
 * (no segments, no X-Ray permissions on the functions' roles); `sampled`
 * traces the API stage by a sampling rule of a low fixed rate and a small
 * reservoir, and the functions follow the API's decision (Lambda's active
 * tracing honours the trace header it is invoked with; only a function
 * nothing upstream traced, the scheduled harvester, samples by Lambda's own
 * 1 a second + 5 %).
 */

import { Tracing } from 'aws-cdk-lib/aws-lambda';
import { CfnSamplingRule } from 'aws-cdk-lib/aws-xray';
import { Construct } from 'constructs';
import type { TracingMode } from './stage-hygiene.ts';

/**
 * The sampled stage's rule: 1 request a second (the reservoir), then 1 % of
 * the rest. At 1,000 requests/s that is ~11 traces a second instead of 1,000:
 * docs/deploy.md, "Tracing".
 */
export const SAMPLING = { fixedRate: 0.01, reservoirSize: 1, priority: 1000 } as const;

/** A function's tracing for the stage's mode. */
export const lambdaTracing = (mode: TracingMode): Tracing => (mode === 'sampled' ? Tracing.ACTIVE : Tracing.DISABLED);

/** Whether the API stage traces. */
export const apiTracing = (mode: TracingMode): boolean => mode === 'sampled';

/** The sampling rule of the stage's API (X-Ray names an API Gateway stage's service `<api>/<stage>`). */
export class ApiSamplingRule extends Construct {
  readonly rule: CfnSamplingRule;

  constructor(scope: Construct, id: string, props: { readonly apiName: string; readonly stage: string }) {
    super(scope, id);
    this.rule = new CfnSamplingRule(this, 'Rule', {
      samplingRule: {
        // X-Ray rule names: at most 32 characters (ratelimit-<stage of ≤ 20> fits)
        ruleName: props.apiName,
        priority: SAMPLING.priority,
        fixedRate: SAMPLING.fixedRate,
        reservoirSize: SAMPLING.reservoirSize,
        serviceName: `${props.apiName}/${props.stage}`,
        serviceType: 'AWS::ApiGateway::Stage',
        host: '*',
        httpMethod: '*',
        urlPath: '*',
        resourceArn: '*',
        version: 1,
      },
    });
  }
}
