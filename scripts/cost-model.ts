/**
 * The arithmetic of `npm run cost`: a stage's shape read from its synthesized
 * templates (cdk.out), unit prices (config/prices.json), the bytes the code
 * writes per check (measured: scripts/cost-bytes.ts) and a load, into a
 * monthly bill split in two parts:
 *
 * - **limiter**: what the limiter itself adds to the platform: the store's
 *   nodes, its EMF metrics (ingested, stored, the custom metrics they
 *   create), its refusal lines and the top-offenders rule reading them, its
 *   alarms (limiter and store), the store's key and secret, and the Lambda
 *   time spent waiting for a check;
 * - **platform**: the rest of the stage at that request rate (API Gateway,
 *   WAF and its logs, the functions' requests and time, the endpoints, the
 *   other alarms, the dashboard).
 *
 * Pure: no file, no clock (the test checks the sums by hand for two rates).
 */

export interface Prices {
  readonly asOf: string;
  readonly region: string;
  readonly hoursPerMonth: number;
  readonly cloudwatch: {
    readonly logsIngestedPerGB: number;
    readonly logsStoredPerGBMonth: number;
    readonly logEventOverheadBytes: number;
    readonly vendedLogsIngestedPerGB: number;
    readonly customMetricPerMonth: number;
    readonly alarmMetricPerMonth: number;
    readonly dashboardPerMonth: number;
    readonly insightRulePerMonth: number;
    readonly insightRuleMatchedPerMillionEvents: number;
  };
  readonly elasticache: { readonly nodeHour: Readonly<Record<string, number>> };
  readonly memorydb: { readonly nodeHour: Readonly<Record<string, number>> };
  readonly lambda: {
    readonly perMillionRequests: number;
    readonly perGBSecondArm: number;
    readonly perGBSecondX86: number;
  };
  readonly apiGateway: { readonly restPerMillionRequests: number };
  readonly waf: { readonly webAclPerMonth: number; readonly rulePerMonth: number; readonly perMillionRequests: number };
  readonly privatelink: { readonly endpointPerAzHour: number };
  readonly kms: { readonly keyPerMonth: number };
  readonly secretsManager: { readonly secretPerMonth: number };
}

/** What a stage deploys, as far as its bill goes (read from the templates by `stageShape`). */
export interface StageShape {
  readonly store: { readonly service: 'elasticache' | 'memorydb'; readonly nodeType: string; readonly nodes: number };
  /** Memory of each function, MB, and whether it runs on Arm. */
  readonly functions: readonly { readonly memoryMb: number; readonly arm: boolean }[];
  /** The policies the limiter's alarms watch: the series its metrics create. */
  readonly limiterPolicies: readonly string[];
  /** Metrics watched by alarms on the limiter's and the store's metrics, and by the other alarms. */
  readonly alarmMetrics: { readonly limiter: number; readonly platform: number };
  readonly dashboards: number;
  readonly insightRules: number;
  readonly kmsKeys: number;
  readonly secrets: number;
  /** Interface endpoints × the subnets (AZs) each sits in. */
  readonly endpointAzs: number;
  /** What WAF logs: nothing, every request, or (a logging filter) only the blocked and counted ones. */
  readonly waf: { readonly webAcls: number; readonly rules: number; readonly logs: 'none' | 'all' | 'flagged' };
  /** Retention of the functions' log groups (EMF and refusal lines land there), days. */
  readonly functionLogRetentionDays: number;
}

/** Bytes the code writes, measured by running it (scripts/cost-bytes.ts). */
export interface WrittenBytes {
  /** EMF bytes per check, averaged over a container's batches at the load's rate. */
  readonly emfPerCheck: number;
  /** EMF lines (log events) per check. */
  readonly emfEventsPerCheck: number;
  /** One refusal line (REFUSAL_LOG). */
  readonly refusalLine: number;
}

export interface Load {
  readonly checksPerSecond: number;
  readonly requestsPerSecond: number;
  /** Share of checks refused (each writes a refusal line). */
  readonly refusedShare: number;
  /** Mean time a function waits for a check, ms (Lambda bills it). */
  readonly checkMs: number;
  /** Mean invocation time of a function, ms. */
  readonly invocationMs: number;
  /** Share of requests WAF logs when its logging filter keeps only blocked and counted ones. */
  readonly wafFlaggedShare: number;
  /** Bytes of one WAF log record. */
  readonly wafRecordBytes: number;
  /** Bytes of one API Gateway access log line. */
  readonly accessLogBytes: number;
}

export interface CostLine {
  readonly part: 'limiter' | 'platform';
  readonly item: string;
  readonly usdPerMonth: number;
  /** How the figure was made, for the reader. */
  readonly basis: string;
}

export interface Bill {
  readonly lines: readonly CostLine[];
  readonly limiterPerMonth: number;
  readonly platformPerMonth: number;
  /** The limiter's part per million checks. */
  readonly limiterPerMillionChecks: number;
}

/** Metric series per policy the observer creates in a month: the outcomes seen (Allowed, Limited, one degraded), NearLimit, CheckLatency. */
export const SERIES_PER_POLICY = 5;

const GB = 1e9;

const WAF_LOGGED_SHARE: Record<StageShape['waf']['logs'], (load: Load) => number> = {
  none: () => 0,
  all: () => 1,
  flagged: (load) => load.wafFlaggedShare,
};

export function monthlyBill(shape: StageShape, prices: Prices, bytes: WrittenBytes, load: Load): Bill {
  const seconds = prices.hoursPerMonth * 3600;
  const checks = load.checksPerSecond * seconds;
  const requests = load.requestsPerSecond * seconds;
  const cw = prices.cloudwatch;
  const storedMonths = shape.functionLogRetentionDays / (prices.hoursPerMonth / 24);
  /** Ingested and kept for the functions' retention (steady state: a month's bytes × retention in months). */
  const logs = (events: number, bytesEach: number) => {
    const ingested = (events * (bytesEach + cw.logEventOverheadBytes)) / GB;
    return ingested * cw.logsIngestedPerGB + ingested * storedMonths * cw.logsStoredPerGBMonth;
  };
  const nodeHour = prices[shape.store.service].nodeHour[shape.store.nodeType];
  if (nodeHour === undefined) {
    throw new RangeError(`no ${shape.store.service} price for ${shape.store.nodeType} in config/prices.json`);
  }
  // one second of one function, at the functions' mean memory and architecture price
  const functionSecond =
    shape.functions.length === 0
      ? 0
      : shape.functions.reduce(
          (sum, f) => sum + (f.memoryMb / 1024) * (f.arm ? prices.lambda.perGBSecondArm : prices.lambda.perGBSecondX86),
          0,
        ) / shape.functions.length;
  const refused = checks * load.refusedShare;
  const emfEvents = checks * bytes.emfEventsPerCheck;
  const emfBytesEach = emfEvents === 0 ? 0 : (checks * bytes.emfPerCheck) / emfEvents;

  const lines: CostLine[] = [
    {
      part: 'limiter',
      item: `store: ${shape.store.nodes} × ${shape.store.nodeType}`,
      usdPerMonth: shape.store.nodes * nodeHour * prices.hoursPerMonth,
      basis: `${nodeHour} per node-hour`,
    },
    {
      part: 'limiter',
      item: 'EMF metrics (ingested + stored)',
      usdPerMonth: logs(emfEvents, emfBytesEach),
      basis: `${bytes.emfPerCheck.toFixed(1)} B per check, ${shape.functionLogRetentionDays} d kept`,
    },
    {
      part: 'limiter',
      item: 'custom metrics',
      usdPerMonth: shape.limiterPolicies.length * SERIES_PER_POLICY * cw.customMetricPerMonth,
      basis: `${shape.limiterPolicies.length} policies × ${SERIES_PER_POLICY} series`,
    },
    {
      part: 'limiter',
      item: 'refusal lines + top-offenders rule',
      usdPerMonth:
        logs(refused, bytes.refusalLine) +
        shape.insightRules * (cw.insightRulePerMonth + (refused / 1e6) * cw.insightRuleMatchedPerMillionEvents),
      basis: `${(load.refusedShare * 100).toFixed(1)} % refused, ${bytes.refusalLine} B each`,
    },
    {
      part: 'limiter',
      item: 'limiter and store alarms',
      usdPerMonth: shape.alarmMetrics.limiter * cw.alarmMetricPerMonth,
      basis: `${shape.alarmMetrics.limiter} alarm metrics`,
    },
    {
      part: 'limiter',
      item: 'store key and secret',
      usdPerMonth: prices.kms.keyPerMonth + prices.secretsManager.secretPerMonth,
      basis: '1 KMS key, 1 secret',
    },
    {
      part: 'limiter',
      item: 'Lambda time waiting for checks',
      usdPerMonth: checks * (load.checkMs / 1000) * functionSecond,
      basis: `${load.checkMs} ms per check`,
    },
    {
      part: 'platform',
      item: 'API Gateway REST requests',
      usdPerMonth: (requests / 1e6) * prices.apiGateway.restPerMillionRequests,
      basis: `${prices.apiGateway.restPerMillionRequests} per million`,
    },
    {
      part: 'platform',
      item: 'API Gateway access logs',
      usdPerMonth: logs(requests, load.accessLogBytes),
      basis: `${load.accessLogBytes} B per request`,
    },
    {
      part: 'platform',
      item: `WAF: ${shape.waf.webAcls} web ACL, ${shape.waf.rules} rules`,
      usdPerMonth:
        shape.waf.webAcls * prices.waf.webAclPerMonth +
        shape.waf.rules * prices.waf.rulePerMonth +
        (requests / 1e6) * prices.waf.perMillionRequests,
      basis: `${prices.waf.perMillionRequests} per million requests`,
    },
    {
      part: 'platform',
      item: 'WAF logs',
      usdPerMonth:
        ((requests * WAF_LOGGED_SHARE[shape.waf.logs](load) * load.wafRecordBytes) / GB) * cw.vendedLogsIngestedPerGB,
      basis:
        shape.waf.logs === 'flagged'
          ? `${(load.wafFlaggedShare * 100).toFixed(1)} % blocked or counted, ${load.wafRecordBytes} B`
          : `${shape.waf.logs === 'all' ? 'every request' : 'none'}, ${load.wafRecordBytes} B`,
    },
    {
      part: 'platform',
      item: 'Lambda requests and the rest of their time',
      usdPerMonth:
        (requests / 1e6) * prices.lambda.perMillionRequests +
        requests * (Math.max(0, load.invocationMs - load.checkMs) / 1000) * functionSecond,
      basis: `${load.invocationMs} ms per invocation`,
    },
    {
      part: 'platform',
      item: 'interface endpoints',
      usdPerMonth: shape.endpointAzs * prices.privatelink.endpointPerAzHour * prices.hoursPerMonth,
      basis: `${shape.endpointAzs} endpoint-AZs (data processed not counted)`,
    },
    {
      part: 'platform',
      item: 'other alarms, dashboards, keys, secrets',
      usdPerMonth:
        shape.alarmMetrics.platform * cw.alarmMetricPerMonth +
        shape.dashboards * cw.dashboardPerMonth +
        Math.max(0, shape.kmsKeys - 1) * prices.kms.keyPerMonth +
        Math.max(0, shape.secrets - 1) * prices.secretsManager.secretPerMonth,
      basis: `${shape.alarmMetrics.platform} alarm metrics, ${shape.dashboards} dashboard`,
    },
  ];
  const sum = (part: CostLine['part']) =>
    lines.filter((l) => l.part === part).reduce((total, l) => total + l.usdPerMonth, 0);
  const limiterPerMonth = sum('limiter');
  return {
    lines,
    limiterPerMonth,
    platformPerMonth: sum('platform'),
    limiterPerMillionChecks: checks === 0 ? 0 : limiterPerMonth / (checks / 1e6),
  };
}

type Resource = { Type: string; Properties?: Record<string, unknown> };
type Template = { Resources?: Record<string, Resource> };

const LIMITER_NAMESPACES = new Set(['RateLimit', 'AWS/ElastiCache', 'AWS/MemoryDB']);

/** What the stage's templates deploy (every stack of the stage: data and platform). */
export function stageShape(templates: readonly Template[]): StageShape {
  const resources = templates.flatMap((t) => Object.values(t.Resources ?? {}));
  const ofType = (type: string) => resources.filter((r) => r.Type === type).map((r) => r.Properties ?? {});
  const replicationGroup = ofType('AWS::ElastiCache::ReplicationGroup')[0];
  const memorydb = ofType('AWS::MemoryDB::Cluster')[0];
  let store: StageShape['store'];
  if (replicationGroup) {
    const shards = Number(replicationGroup.NumNodeGroups ?? 1);
    store = {
      service: 'elasticache',
      nodeType: String(replicationGroup.CacheNodeType),
      nodes: shards * (1 + Number(replicationGroup.ReplicasPerNodeGroup ?? 0)),
    };
  } else if (memorydb) {
    const shards = Number(memorydb.NumShards ?? 1);
    store = {
      service: 'memorydb',
      nodeType: String(memorydb.NodeType),
      nodes: shards * (1 + Number(memorydb.NumReplicasPerShard ?? 1)),
    };
  } else {
    throw new RangeError('the templates deploy no store (no ElastiCache replication group, no MemoryDB cluster)');
  }
  const alarmMetrics = { limiter: 0, platform: 0 };
  const policies = new Set<string>();
  for (const alarm of ofType('AWS::CloudWatch::Alarm')) {
    type Stat = { Namespace: string; Dimensions?: { Name: string; Value: unknown }[] };
    const stats: Stat[] = alarm.Namespace
      ? [alarm as unknown as Stat]
      : ((alarm.Metrics as { MetricStat?: { Metric: Stat } }[] | undefined) ?? []).flatMap((m) =>
          m.MetricStat ? [m.MetricStat.Metric] : [],
        );
    for (const stat of stats) {
      if (LIMITER_NAMESPACES.has(stat.Namespace)) alarmMetrics.limiter += 1;
      else alarmMetrics.platform += 1;
      const policy = stat.Dimensions?.find((d) => d.Name === 'policy')?.Value;
      if (stat.Namespace === 'RateLimit' && typeof policy === 'string') policies.add(policy);
    }
  }
  const functionLogGroups = new Set(
    ofType('AWS::Lambda::Function').map((f) =>
      JSON.stringify((f.LoggingConfig as { LogGroup?: unknown } | undefined)?.LogGroup),
    ),
  );
  const logGroups = Object.entries(
    Object.assign({}, ...templates.map((t) => t.Resources ?? {})) as Record<string, Resource>,
  );
  const retention = logGroups
    .filter(([id, r]) => r.Type === 'AWS::Logs::LogGroup' && functionLogGroups.has(JSON.stringify({ Ref: id })))
    .map(([, r]) => Number(r.Properties?.RetentionInDays ?? 3653)); // unset: kept forever (~10 years)
  const webAcls = ofType('AWS::WAFv2::WebACL');
  const wafLogging = ofType('AWS::WAFv2::LoggingConfiguration');
  return {
    store,
    functions: ofType('AWS::Lambda::Function').map((f) => ({
      memoryMb: Number(f.MemorySize ?? 128),
      arm: JSON.stringify(f.Architectures ?? []).includes('arm64'),
    })),
    limiterPolicies: [...policies].sort(),
    alarmMetrics,
    dashboards: ofType('AWS::CloudWatch::Dashboard').length,
    insightRules: ofType('AWS::CloudWatch::InsightRule').length,
    kmsKeys: ofType('AWS::KMS::Key').length,
    secrets: ofType('AWS::SecretsManager::Secret').length,
    endpointAzs: ofType('AWS::EC2::VPCEndpoint')
      .filter((e) => e.VpcEndpointType !== 'Gateway')
      .reduce((sum, e) => sum + ((e.SubnetIds as unknown[] | undefined)?.length ?? 1), 0),
    waf: {
      webAcls: webAcls.length,
      rules: webAcls.reduce((sum, acl) => sum + ((acl.Rules as unknown[] | undefined)?.length ?? 0), 0),
      logs:
        wafLogging.length === 0 ? 'none' : wafLogging.every((l) => l.LoggingFilter !== undefined) ? 'flagged' : 'all',
    },
    functionLogRetentionDays: retention.length > 0 ? Math.max(...retention) : 0,
  };
}
