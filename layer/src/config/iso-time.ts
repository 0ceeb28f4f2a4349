/** An ISO 8601 time: a date, optionally a time of day to the minute (seconds, milliseconds) and a zone. */
const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?(Z|[+-]\d{2}:\d{2}))?$/;

/**
 * The epoch ms an ISO 8601 time names, or undefined when it is malformed or
 * names no real instant: 2030-02-30 is not March 2 (Date.parse would roll it
 * over), 24:00 and :60 are not times, and a time of day needs its zone. One
 * check for an override's `until` wherever it is read (the policy store, the CLI).
 */
export function parseIsoTime(text: string): number | undefined {
  const match = ISO_TIME.exec(text);
  if (!match) return undefined;
  const [, y, mo, d, h = '0', mi = '0', sec = '0', ms = '0', zone = 'Z'] = match;
  const [year, month, day, hour, minute, second] = [y, mo, d, h, mi, sec].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return undefined;
  // the last day of that month (day 0 of the next), leap years included
  if (day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return undefined;
  let offsetMinutes = 0;
  if (zone !== 'Z') {
    const [zh, zm] = zone.slice(1).split(':').map(Number) as [number, number];
    if (zh > 23 || zm > 59) return undefined;
    offsetMinutes = (zone.startsWith('-') ? -1 : 1) * (zh * 60 + zm);
  }
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, Number(ms.padEnd(3, '0')));
  return utc - offsetMinutes * 60_000;
}
