/**
 * The outer line (docs/design.md, "The outer line"): API Gateway stage throttling and the AWS WAF
 * rate-based rule per IP, from config/outer-line.json. The CDK app deploys
 * these numbers, the local gateway (npm start) enforces them, and
 * `npm run nginx:conf` renders them for a classic host: all three read them
 * here, validated against what the AWS services accept.
 */
import { readFileSync } from 'node:fs';
import * as v from 'valibot';

export interface Throttle {
  readonly rateLimit: number;
  readonly burstLimit: number;
}

export interface OuterLine {
  /** API Gateway stage throttling: a token bucket for the stage's routes that have none of their own (best effort). */
  readonly stageThrottle: Throttle;
  /**
   * A token bucket per route (by its id in functions/routes.ts, for all its
   * methods), instead of the stage's: API Gateway method throttling.
   */
  readonly routeThrottles?: Readonly<Record<string, Throttle>>;
  /** The throttle of a route `routeThrottles` does not name: every route has its own bucket (a new route too). */
  readonly defaultRouteThrottle?: Throttle;
  /** The AWS WAF rate-based rule: requests per client IP in a sliding evaluation window. */
  readonly ipRateRule: { readonly limit: number; readonly evaluationWindowSeconds: number };
}

export const OUTER_LINE_FILE = new URL('./outer-line.json', import.meta.url);

/** WAF rate-based rules take a limit from 10 and these evaluation windows only. */
export const WAF_EVALUATION_WINDOWS = [60, 120, 300, 600] as const;

const ThrottleSchema = v.strictObject({
  rateLimit: v.pipe(v.number(), v.minValue(1), v.maxValue(1_000_000)),
  burstLimit: v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1_000_000)),
});

const Schema = v.object({
  stageThrottle: ThrottleSchema,
  routeThrottles: v.optional(v.record(v.pipe(v.string(), v.regex(/^[a-z][a-z0-9-]{0,63}$/)), ThrottleSchema), {}),
  defaultRouteThrottle: v.optional(ThrottleSchema),
  ipRateRule: v.strictObject({
    limit: v.pipe(v.number(), v.integer(), v.minValue(10), v.maxValue(2_000_000_000)),
    evaluationWindowSeconds: v.picklist(WAF_EVALUATION_WINDOWS),
  }),
});

/** A route's own throttle: the one `routeThrottles` gives it, else the default (undefined: the stage's). */
export function routeThrottleOf(line: OuterLine, routeId: string): Throttle | undefined {
  return line.routeThrottles?.[routeId] ?? line.defaultRouteThrottle;
}

export class InvalidOuterLineError extends Error {
  override readonly name = 'InvalidOuterLineError';
}

/** The outer line from parsed JSON; anything AWS would refuse is an InvalidOuterLineError naming the field. */
export function parseOuterLine(value: unknown): OuterLine {
  const parsed = v.safeParse(Schema, value);
  if (parsed.success) return parsed.output;
  const issue = parsed.issues[0];
  const path = issue.path?.map((p) => String(p.key)).join('.') || 'outer line';
  throw new InvalidOuterLineError(`${path}: ${issue.message}`);
}

export function readOuterLine(file: string | URL = OUTER_LINE_FILE): OuterLine {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new InvalidOuterLineError(`${String(file)}: ${(error as Error).message}`);
  }
  return parseOuterLine(json);
}
