/**
 * Durations are written with their unit (`'15 m'`, `'100 ms'`) so that a
 * window of 60 can never be read as 60 ms by one module and 60 s by another.
 */
export type Duration = `${number} ms` | `${number} s` | `${number} m` | `${number} h`;

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const;
const DURATION = /^(\d+(?:\.\d+)?) (ms|s|m|h)$/;

/** Milliseconds in a duration, or `undefined` when the text is not one. */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text);
  if (!match) return undefined;
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

export function isDuration(text: string): text is Duration {
  return parseDuration(text) !== undefined;
}

/** Milliseconds of a duration already checked by the policy schema. */
export function toMs(duration: Duration): number {
  const ms = parseDuration(duration);
  if (ms === undefined) throw new TypeError(`not a duration: ${duration}`);
  return ms;
}
