/**
 * The HTTP entry: a REST API (WAF attaches to REST API stages, not to HTTP
 * APIs) with the outer line of config/outer-line.json in front of every
 * route: stage throttling and an AWS WAF rate-based rule per client IP. One
 * method per route and method of functions/routes.ts, each proxied to its
 * function; this file never lists a route itself.
 */
import { ArnFormat, Aws, Duration, Fn, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import {
  AccessLogFormat,
  type CfnRestApi,
  EndpointType,
  LambdaIntegration,
  LogGroupLogDestination,
  MethodLoggingLevel,
  RestApi,
} from 'aws-cdk-lib/aws-apigateway';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { CfnLoggingConfiguration, CfnWebACL, CfnWebACLAssociation } from 'aws-cdk-lib/aws-wafv2';
import { Construct } from 'constructs';
import { type OuterLine, routeThrottleOf } from '../config/outer-line.ts';
import { GATEWAY_TIMEOUT_MS } from '../functions/route.ts';
import type { Route } from '../functions/routes.ts';
import { secretHeadersOf } from '../functions/secret-headers.ts';
import type { TracingMode } from './stage-hygiene.ts';
import { apiTracing } from './tracing.ts';

/** The REST API's TLS security policy (API Gateway's enhanced policies for regional APIs). */
export const API_SECURITY_POLICY = 'SecurityPolicy_TLS13_1_2_PFS_PQ_2025_09';

/** AWS managed rule groups on the web ACL, in count mode. */
export const MANAGED_RULE_GROUPS = [
  'AWSManagedRulesCommonRuleSet',
  'AWSManagedRulesKnownBadInputsRuleSet',
  'AWSManagedRulesAmazonIpReputationList',
] as const;

/**
 * The stage's execution logging and metrics, on the stage and on every method
 * with a throttle of its own (a method setting replaces the stage's for that
 * method: without these, the throttled methods would log and measure nothing).
 * Errors only, never the data trace (it would log each request's headers).
 */
export const STAGE_LOGGING = { loggingLevel: MethodLoggingLevel.ERROR, metricsEnabled: true, dataTraceEnabled: false };

/**
 * WAF logs what a rule blocked or counted (the managed rule groups count),
 * nothing it merely allowed: the requests worth reading, at a fraction of
 * the cost of a record per request (~1.5 kB each).
 */
export const WAF_LOGGING_FILTER = {
  DefaultBehavior: 'DROP',
  Filters: [
    {
      Behavior: 'KEEP',
      Requirement: 'MEETS_ANY',
      Conditions: [{ ActionCondition: { Action: 'BLOCK' } }, { ActionCondition: { Action: 'COUNT' } }],
    },
  ],
} as const;

/**
 * The URI paths of the routes that authenticate a sender's signed deliveries
 * (the webhooks: `rawBody`), as one anchored regular expression, with or
 * without the stage's prefix (the execute-api URL carries it, a custom domain
 * does not). Slack and Telegram deliver from a few shared IPs: the per-IP WAF
 * rule leaves these paths to their routes' own per-source limits. Anchored and
 * exact, so `/v1/x/webhooks/slack` (the public API's proxy) is still counted.
 */
export function webhookPathPattern(routes: readonly Route[], stage: string): string | undefined {
  const literal = (text: string) => text.replace(/[.*+?^$(){}|[\]\\]/g, '\\$&');
  const paths = routes
    .filter((route) => route.rawBody)
    .map((route) =>
      route.path
        .split('/')
        .map((part) => (/^\{[^}]+\+\}$/.test(part) ? '.+' : /^\{[^}]+\}$/.test(part) ? '[^/]+' : literal(part)))
        .join('/'),
    );
  return paths.length === 0 ? undefined : `^(/${literal(stage)})?(${paths.join('|')})$`;
}

export interface PublicApiProps {
  readonly name: string;
  readonly stage: string;
  readonly outerLine: OuterLine;
  readonly routes: readonly Route[];
  readonly functionOf: (route: Route) => IFunction;
  /** The stage's X-Ray switch (infra/tracing.ts). */
  readonly tracing: TracingMode;
  /** Whether this stage sets the region's API Gateway account role (infra/stage-hygiene.ts). */
  readonly accountRole: boolean;
}

export class PublicApi extends Construct {
  readonly api: RestApi;
  readonly webAcl: CfnWebACL;

  constructor(scope: Construct, id: string, props: PublicApiProps) {
    super(scope, id);
    const { stageThrottle, ipRateRule } = props.outerLine;
    // a route's own throttle, on each of its methods (API Gateway method throttling replaces the stage's there)
    const methodOptions = Object.fromEntries(
      props.routes.flatMap((route) => {
        const throttle = routeThrottleOf(props.outerLine, route.id);
        if (!throttle) return [];
        return route.methods.map((method) => [
          `${route.path}/${method}`,
          { throttlingRateLimit: throttle.rateLimit, throttlingBurstLimit: throttle.burstLimit, ...STAGE_LOGGING },
        ]);
      }),
    );
    const accessLogs = new LogGroup(this, 'AccessLogs', { retention: RetentionDays.THREE_MONTHS });
    this.api = new RestApi(this, 'Api', {
      restApiName: props.name,
      description: 'The platform behind the rate limiter (routes from functions/routes.ts)',
      endpointTypes: [EndpointType.REGIONAL],
      // the region's one API Gateway logging role: set by this stack only when the stage file says (docs/deploy.md)
      cloudWatchRole: props.accountRole,
      deployOptions: {
        stageName: props.stage,
        throttlingRateLimit: stageThrottle.rateLimit,
        throttlingBurstLimit: stageThrottle.burstLimit,
        methodOptions,
        accessLogDestination: new LogGroupLogDestination(accessLogs),
        accessLogFormat: AccessLogFormat.jsonWithStandardFields(),
        ...STAGE_LOGGING,
        tracingEnabled: apiTracing(props.tracing),
      },
    });
    // An enhanced security policy instead of a regional API's default TLS_1_0: TLS 1.3 and 1.2 with forward
    // secrecy and post-quantum key exchange (webhook senders speak 1.2), the endpoint in STRICT access mode
    // (SNI must match). aws-cdk-lib 2.276 has no RestApi prop for them yet: CloudFormation's, set directly.
    const restApi = this.api.node.defaultChild as CfnRestApi;
    restApi.addPropertyOverride('SecurityPolicy', API_SECURITY_POLICY);
    restApi.addPropertyOverride('EndpointAccessMode', 'STRICT');
    for (const route of props.routes) {
      const resource = this.api.root.resourceForPath(route.path);
      const integration = new LambdaIntegration(props.functionOf(route), {
        timeout: Duration.millis(GATEWAY_TIMEOUT_MS),
      });
      for (const method of route.methods) resource.addMethod(method, integration);
    }

    const webhooks = webhookPathPattern(props.routes, props.stage);
    this.webAcl = new CfnWebACL(this, 'WebAcl', {
      name: props.name,
      scope: 'REGIONAL',
      defaultAction: { allow: {} },
      visibilityConfig: { cloudWatchMetricsEnabled: true, metricName: props.name, sampledRequestsEnabled: true },
      rules: [
        {
          name: 'per-ip-rate',
          priority: 0,
          // a rate rule's refusal is a 429 with when to come back (the window), not WAF's default 403
          action: {
            block: {
              customResponse: {
                responseCode: 429,
                responseHeaders: [{ name: 'Retry-After', value: String(ipRateRule.evaluationWindowSeconds) }],
              },
            },
          },
          statement: {
            rateBasedStatement: {
              aggregateKeyType: 'IP',
              limit: ipRateRule.limit,
              evaluationWindowSec: ipRateRule.evaluationWindowSeconds,
              ...(webhooks === undefined
                ? {}
                : {
                    // only requests outside the webhook paths are counted (and blocked)
                    scopeDownStatement: {
                      notStatement: {
                        statement: {
                          regexMatchStatement: {
                            fieldToMatch: { uriPath: {} },
                            regexString: webhooks,
                            textTransformations: [{ priority: 0, type: 'NONE' }],
                          },
                        },
                      },
                    },
                  }),
            },
          },
          visibilityConfig: {
            cloudWatchMetricsEnabled: true,
            metricName: `${props.name}-per-ip-rate`,
            sampledRequestsEnabled: true,
          },
        },
        // AWS's managed rule groups, counting only (their matches are in the WAF log and metrics): turn
        // one to blocking once its counts show it refuses no real caller (docs/deploy.md, "The outer line")
        ...MANAGED_RULE_GROUPS.map((group, i) => ({
          name: group,
          priority: 1 + i,
          overrideAction: { count: {} },
          statement: { managedRuleGroupStatement: { vendorName: 'AWS', name: group } },
          visibilityConfig: {
            cloudWatchMetricsEnabled: true,
            metricName: `${props.name}-${group}`,
            sampledRequestsEnabled: true,
          },
        })),
      ],
    });
    // WAF's log group name must start with aws-waf-logs-, so CloudFormation cannot generate it: the name
    // carries the stack's own id (its UUID's first group), unique per created stack. A rolled-back
    // create or a destroy that leaves the group behind never blocks the next create, which is a new
    // stack with a new id. prod retains its WAF logs (evidence of an attack outlives the stack);
    // every other stage deletes them with the stack.
    const stackSuffix = Fn.select(0, Fn.split('-', Fn.select(2, Fn.split('/', Aws.STACK_ID))));
    const wafLogs = new LogGroup(this, 'WafLogs', {
      logGroupName: `aws-waf-logs-${props.name}-${stackSuffix}`,
      retention: RetentionDays.THREE_MONTHS,
      removalPolicy: props.stage === 'prod' ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });
    new CfnLoggingConfiguration(this, 'WafLogging', {
      resourceArn: this.webAcl.attrArn,
      // the log group's ARN without CloudWatch Logs' trailing ':*', which WAF refuses
      logDestinationConfigs: [
        Stack.of(this).formatArn({
          service: 'logs',
          resource: 'log-group',
          resourceName: wafLogs.logGroupName,
          arnFormat: ArnFormat.COLON_RESOURCE_NAME,
        }),
      ],
      // every header a consumer treats as a secret (functions/secret-headers.ts), never written
      redactedFields: secretHeadersOf(props.routes).map((name) => ({ singleHeader: { Name: name } })),
      loggingFilter: WAF_LOGGING_FILTER,
    });
    new CfnWebACLAssociation(this, 'WebAclStage', {
      resourceArn: this.api.deploymentStage.stageArn,
      webAclArn: this.webAcl.attrArn,
    });

    Validations.of(this.api).acknowledge(
      {
        id: 'AwsSolutions-APIG2',
        reason:
          'Each function validates its own request (typed parsers, 4xx with a reason, fuzzed in test/e2e/gateway.test.ts); webhook bodies must reach them byte for byte to verify signatures.',
      },
      {
        id: 'AwsSolutions-APIG4',
        reason:
          'Callers are authenticated by the functions themselves: login is the authentication, the API by API key (hashed, checked against the registry), Slack by request signature, Telegram by its secret token.',
      },
      {
        id: 'AwsSolutions-COG4',
        reason:
          "No Cognito authorizer on the API: see AwsSolutions-APIG4. The stage's user pool (infra/user-directory.ts) is the login function's credential store, checked in the function.",
      },
    );
  }
}
