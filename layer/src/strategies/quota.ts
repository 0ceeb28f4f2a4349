/**
 * Calendar quota: at most `limit` units per UTC day, ISO week or calendar
 * month (optionally in a fixed offset from UTC), reset at the boundary
 * (lua/lib/quota.lua). What API products sell as "100,000 calls a month";
 * combined all-or-nothing with a token bucket (same group) it caps a burst
 * allowance by a monthly total.
 */
import * as v from 'valibot';
import { type CompiledCommon, commonEntries, count, int, type StrategyUnit } from './strategy.ts';

const PERIOD_CODES = { day: 'd', week: 'w', month: 'm' } as const;
/** A period's nominal length: exact for a day and a week (a fixed offset has no daylight saving); a month's is `monthSeconds`. */
const PERIOD_SECONDS = { day: 86_400, week: 604_800, month: 2_592_000 } as const;

/**
 * RateLimit-Policy `w` of a month quota: the length of the month its status
 * runs in, in the quota's offset, 28 to 31 days. The nominal 30 days would
 * disagree with `t` (the seconds to the boundary): past `w` early in a 31-day
 * month, and a February window ending two days after its reset. With a reset
 * the month is the one ending there, 00:00 on a 1st in the offset (a clock a
 * few seconds off the script's lands on the day before: the same month); a
 * status with no reset (nothing counted this period yet) is in the month of
 * now in the offset. The offset's wall clock is read with the UTC getters.
 */
function monthSeconds(resetAfterMs: number, nowMs: number, offsetMs: number): number {
  const local = new Date(nowMs + resetAfterMs + offsetMs);
  const year = local.getUTCFullYear();
  const month = resetAfterMs > 0 && local.getUTCDate() === 1 ? local.getUTCMonth() - 1 : local.getUTCMonth();
  return (Date.UTC(year, month + 1, 1) - Date.UTC(year, month, 1)) / 1000;
}

const OFFSET = /^([+-])(0\d|1[0-4]):([0-5]\d)$/;

const schema = v.strictObject({
  ...commonEntries,
  strategy: v.literal('quota'),
  limit: v.pipe(count, v.maxValue(1_000_000_000, 'must be at most 1000000000')),
  period: v.picklist(['day', 'week', 'month'], 'must be "day", "week" or "month"'),
  /** The fixed offset of the period's calendar from UTC, `+05:30` or `-08:00`. @default '+00:00' */
  utcOffset: v.optional(
    v.pipe(
      v.string(),
      v.regex(OFFSET, 'must be a fixed offset from UTC such as "+05:30" or "-08:00"'),
      v.check((o) => offsetUs(o) <= 14 * 3_600_000_000 && offsetUs(o) >= -14 * 3_600_000_000, 'must be within ±14:00'),
    ),
  ),
});

export type QuotaPolicy = v.InferOutput<typeof schema>;

export interface CompiledQuota extends CompiledCommon<'quota', QuotaPolicy> {
  readonly period: QuotaPolicy['period'];
  /** Local time minus UTC, µs. */
  readonly offsetUs: number;
}

/** `+05:30` as µs (local time minus UTC). */
function offsetUs(offset: string): number {
  const [, sign, hours, minutes] = OFFSET.exec(offset) ?? [];
  return (sign === '-' ? -1 : 1) * (Number(hours) * 60 + Number(minutes)) * 60_000_000;
}

/** What a status of a quota carries of its calendar: its offset, when not UTC (`LimitStatus.utcOffsetMs`). */
export function calendarOf(policy: CompiledQuota): { utcOffsetMs?: number } {
  return policy.offsetUs === 0 ? {} : { utcOffsetMs: policy.offsetUs / 1000 };
}

export const quota: StrategyUnit<'quota', typeof schema, CompiledQuota> = {
  name: 'quota',
  kind: 'qt',
  luaFragment: 'lib/quota',
  title: 'calendar quota',
  schema,
  quota: true,
  valueCounter: true,

  compile(common, config) {
    return {
      ...common,
      strategy: 'quota',
      config,
      limit: config.limit,
      maxCost: config.limit,
      windowSeconds: PERIOD_SECONDS[config.period],
      period: config.period,
      offsetUs: config.utcOffset === undefined ? 0 : offsetUs(config.utcOffset),
    };
  },

  // lua/lib/quota.lua, check record: limit, period code, offset µs
  checkFields({ policy }) {
    return [int(policy.limit), PERIOD_CODES[policy.period], int(policy.offsetUs)];
  },

  windowSecondsAt(status, nowMs) {
    // a status carries its compiled window: only a month's varies (PERIOD_SECONDS, above)
    return status.windowSeconds === PERIOD_SECONDS.month
      ? monthSeconds(status.resetAfterMs, nowMs, status.utcOffsetMs ?? 0)
      : status.windowSeconds;
  },

  describe(config) {
    return `${config.limit} per calendar ${config.period}${config.utcOffset ? ` (UTC${config.utcOffset})` : ' (UTC)'}`;
  },
};
