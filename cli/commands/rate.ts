/** `rate <policy> <key> --set N | --increase | --decrease [--pause 30s]`: an adaptive bucket's runtime rate for one key, audited. */
import type { RateChange } from '@platform/rate-limit';
import { CliError, defineCommand, durationFlag, EXIT, RedisUnavailableError } from '../command.ts';
import { audit, auditedWrite, knownPolicy, limiterOf, out } from '../context.ts';
import { keyOf } from '../keys.ts';

const USAGE = 'rate <policy> <key> --set N | --increase | --decrease [--pause 30s]';

// digits with an optional fraction: Number() alone reads `0x10` as 16, `1e3` as 1000 and ` 5` as 5
const DECIMAL = /^[0-9]+(\.[0-9]+)?$/;

/** A `--set` rate per second: a plain positive decimal (2, 0.5); undefined for anything else. */
export function rateFlag(text: string): number | undefined {
  if (!DECIMAL.test(text)) return undefined;
  const rate = Number(text);
  return rate > 0 && Number.isFinite(rate) ? rate : undefined;
}

export const rate = defineCommand({
  name: 'rate',
  writes: true,
  usage: USAGE,
  summary: ["change an adaptive bucket's rate for every worker"],
  options: {
    set: { type: 'string' },
    increase: { type: 'boolean' },
    decrease: { type: 'boolean' },
    pause: { type: 'string' },
  },
  redis: true,
  async run(context, rest, values) {
    const [policy, given] = rest;
    if (!policy) throw new CliError(EXIT.usage, USAGE);
    knownPolicy(context, policy);
    const key = keyOf(context, given, values);
    const chosen = [values.set !== undefined, values.increase === true, values.decrease === true].filter(
      Boolean,
    ).length;
    if (chosen !== 1) throw new CliError(EXIT.usage, 'exactly one of --set N, --increase, --decrease');
    const pauseMs = values.pause === undefined ? undefined : durationFlag(values.pause);
    if (values.pause !== undefined && pauseMs === undefined)
      throw new CliError(EXIT.usage, '--pause takes a duration such as 30s or 2m');
    const set = values.set === undefined ? undefined : rateFlag(values.set);
    if (values.set !== undefined && set === undefined)
      throw new CliError(EXIT.usage, '--set takes a rate per second: a positive decimal such as 2 or 0.5');
    const change: RateChange =
      set !== undefined
        ? { set }
        : values.increase
          ? { increase: true }
          : { decrease: true, ...(pauseMs === undefined ? {} : { pauseMs }) };
    const options = values.scope === undefined ? {} : { scope: values.scope };
    const limiter = limiterOf(context);
    const current = await limiter.currentRate(policy, key, options);
    const before = current.decided ? current.ratePerSecond : undefined;
    const outcome = await auditedWrite(context, 'rate', { policy, key, change, before }, async () => {
      const changed = await limiter.changeRate(policy, key, change, options);
      // a runtime rate is the limiter's operation, run on the home store of a multi-region stage; an undecided
      // change may still have been run by Redis (a reply past the budget)
      if (!changed.decided) throw new RedisUnavailableError(changed.reason, context.multiRegion ? 'home' : 'regional');
      return changed;
    });
    audit(context, 'rate', { policy, key, change, before, after: outcome.ratePerSecond });
    out(context, `${policy} ${key}: ${before}/s -> ${outcome.ratePerSecond}/s`, {
      before,
      after: outcome.ratePerSecond,
    });
    return EXIT.ok;
  },
});
