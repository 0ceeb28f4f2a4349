/**
 * Durations are written with their unit (`'15 m'`, `'100 ms'`) so that a
 * window of 60 can never be read as 60 ms by one module and 60 s by another.
 */
export type Duration = `${number} ms` | `${number} s` | `${number} m` | `${number} h`;

const UNIT_US = { ms: 1_000, s: 1_000_000, m: 60_000_000, h: 3_600_000_000 } as const;
const DURATION = /^(\d+(?:\.\d+)?) (ms|s|m|h)$/;

/**
 * Whole microseconds in a duration, or `undefined` when the text is not one or
 * is not a whole number of µs ('0.0001 ms'). The decimal is scaled by string,
 * not by float multiplication, so '1.1 ms' is exactly 1100 µs.
 */
export function parseDurationUs(text: string): number | undefined {
  const match = DURATION.exec(text);
  if (!match) return undefined;
  const [whole = '0', fraction = ''] = (match[1] as string).split('.');
  const unitUs = UNIT_US[match[2] as keyof typeof UNIT_US];
  const scale = 10 ** fraction.length;
  const numerator = (Number(whole) * scale + Number(fraction || '0')) * unitUs;
  if (!Number.isSafeInteger(numerator) || numerator % scale !== 0) return undefined;
  return numerator / scale;
}

/** Milliseconds in a duration (possibly fractional), or `undefined` when the text is not one. */
export function parseDuration(text: string): number | undefined {
  const us = parseDurationUs(text);
  return us === undefined ? undefined : us / 1000;
}

export function isDuration(text: string): text is Duration {
  return parseDurationUs(text) !== undefined;
}

/** Whole microseconds of a duration already checked by the policy schema. */
export function toUs(duration: Duration): number {
  const us = parseDurationUs(duration);
  if (us === undefined) throw new TypeError(`not a duration: ${duration}`);
  return us;
}

/** Milliseconds of a duration already checked by the policy schema. */
export function toMs(duration: Duration): number {
  return toUs(duration) / 1000;
}
