/**
 * `override <policy> [<key>] '<json>' [--until <ISO time> | --for 8h]`:
 * writes a policy override (or a per-key one) where the store reads it,
 * after checking it compiles, audited; with --until/--for it ends by itself.
 */
import { RateLimitError } from '@platform/rate-limit';
import { folderPrefix, overrideParameter, parseIsoTime, type ValidatedOverride } from '@platform/rate-limit/config';
import { CliError, defineCommand, durationFlag, EXIT } from '../command.ts';
import { audit, auditedWrite, knownPolicy, out } from '../context.ts';
import { keyOf } from '../keys.ts';

/**
 * The instant an override's `until` names, checked however it was given (the
 * `--until` flag, or an `until` in the JSON): malformed is `malformedCode`
 * (the flag: a usage error, 2; the JSON: refused, 3), past is refused (3):
 * such an override could never apply.
 */
function untilOf(text: unknown, given: string, malformedCode: number, now: number): number {
  const at = typeof text === 'string' ? parseIsoTime(text) : undefined;
  // what was given is not repeated (a word out of place may be a secret: cli/command.ts, unknownName)
  if (at === undefined)
    throw new CliError(
      malformedCode,
      `${given} takes a real ISO 8601 time such as 2026-12-02T06:00Z; what was given (${typeof text === 'string' ? `${text.length} characters` : text === null ? 'null' : typeof text}) is not one`,
    );
  if (at <= now)
    throw new CliError(EXIT.refused, `${given} ${String(text)} has passed: the override would never apply`);
  return at;
}

/**
 * Why a text that JSON.parse refused is not JSON, and where, without any of
 * the text: V8's own message quotes it (`Unexpected token 'a', "ann@corp.io"
 * is not valid JSON`), and the admin function logs every message, so a key or
 * an email typed where the JSON goes would land in its log. Where: the first
 * character no JSON value can continue with, found as the end of the longest
 * prefix JSON.parse still reads as a value cut short.
 */
export function notJsonReason(text: string): string {
  const mayContinue = (length: number): boolean => {
    try {
      JSON.parse(text.slice(0, length));
      return true;
    } catch (error) {
      const message = (error as Error).message;
      if (message.includes('end of JSON input')) return true;
      const at = /at position (\d+)/.exec(message);
      return at !== null && Number(at[1]) >= length;
    }
  };
  if (mayContinue(text.length)) return `it ends before its value is complete (${text.length} characters)`;
  let good = 0; // a prefix that may continue (the empty one does)
  let bad = text.length; // one that may not
  while (bad - good > 1) {
    const middle = Math.floor((good + bad) / 2);
    if (mayContinue(middle)) good = middle;
    else bad = middle;
  }
  const before = text.slice(0, good);
  const line = before.split('\n').length;
  const column = good - before.lastIndexOf('\n');
  return `unexpected character at position ${good} (line ${line}, column ${column}) of ${text.length}`;
}

/** When an override written now ends: `--until <ISO time>` or `--for <duration>`; undefined for one that stays. */
function overrideEnd(values: { readonly until?: string; readonly for?: string }, now: number): string | undefined {
  if (values.until !== undefined && values.for !== undefined) throw new CliError(EXIT.usage, 'one of --until, --for');
  if (values.for !== undefined) {
    const ms = durationFlag(values.for);
    if (ms === undefined || ms <= 0) throw new CliError(EXIT.usage, '--for takes a duration such as 8h or 30m');
    return new Date(now + ms).toISOString();
  }
  if (values.until === undefined) return undefined;
  return new Date(untilOf(values.until, '--until', EXIT.usage, now)).toISOString();
}

export const override = defineCommand({
  name: 'override',
  writes: true,
  usage: "override <policy> [<key>] '<json>' [--until 2026-12-02T06:00Z | --for 8h]",
  summary: ['write a policy (or per-key) override, validated first;', 'with --until/--for it ends by itself then'],
  options: { until: { type: 'string' }, for: { type: 'string' } },
  async run(context, rest, values) {
    const [policy, ...tail] = rest;
    const [given, text] = tail.length >= 2 ? [tail[0], tail[1]] : [undefined, tail[0]];
    if (!policy || text === undefined || tail.length > 2)
      throw new CliError(EXIT.usage, "override <policy> [<key> | --email <email> | --api-key <key>] '<json>'");
    knownPolicy(context, policy, EXIT.refused); // refused (3), as the store's validation refused it
    // --email/--api-key name the key as for inspect and reset: without them this was a policy-wide override
    const keyed = given !== undefined || values.email !== undefined || values['api-key'] !== undefined;
    const key = keyed ? keyOf(context, given, values) : undefined;
    const now = Date.now();
    const until = overrideEnd(values, now);
    let patch: unknown;
    try {
      patch = JSON.parse(text);
    } catch {
      throw new CliError(EXIT.refused, `not JSON: ${notJsonReason(text)} (the text is not repeated)`);
    }
    const isObject = typeof patch === 'object' && patch !== null && !Array.isArray(patch);
    if (until !== undefined) {
      if (!isObject) throw new CliError(EXIT.refused, 'an override that ends is a JSON object');
      if (Object.hasOwn(patch as object, 'until'))
        throw new CliError(EXIT.usage, 'the end is given twice: --until/--for and an "until" in the JSON');
      patch = { ...(patch as object), until };
    } else if (isObject && Object.hasOwn(patch as object, 'until')) {
      // the JSON's own end, held to the flag's rules, written as the instant it names
      const at = untilOf((patch as { until: unknown }).until, 'until', EXIT.refused, now);
      patch = { ...(patch as object), until: new Date(at).toISOString() };
    }
    let validated: ValidatedOverride;
    try {
      // as the store will apply it: a policy override over the default, a per-key one over the policy in force
      validated = context.store.validateOverride(policy, key, patch);
    } catch (error) {
      if (error instanceof RateLimitError) throw error; // InvalidPolicyError, InvalidCheckError: refused, exit 3
      throw new CliError(EXIT.refused, (error as Error).message); // an `until` of the JSON's own
    }
    const name = overrideParameter(context.prefix, policy, key);
    // the overrides folder only: what the admin function may read (not the secrets beside it)
    const before = (await context.source.fetchAll(folderPrefix(context.prefix, 'overrides').replace(/\/$/, '')))[name];
    const detail = { parameter: name, policy, key, before: before ?? null, after: patch };
    await auditedWrite(context, 'override', detail, () => context.source.put(name, JSON.stringify(patch)));
    audit(context, 'override', detail);
    const { fitsUntil, strands = [] } = validated;
    const ends = fitsUntil === undefined ? undefined : new Date(fitsUntil).toISOString();
    // written, as asked: but it rests on a policy override that ends, and then no longer applies
    if (ends !== undefined)
      context.io.stderr(
        `ratelimit: warning: this override fits only over the policy override, which ends ${ends}: from then on it does not apply\n`,
      );
    // a policy override the per-key ones in force no longer fit over: they stop applying (at once, or when it ends)
    for (const { key: other, at } of strands)
      context.io.stderr(
        `ratelimit: warning: the per-key override ${policy}/${other} no longer fits over this one: it stops applying ${at === undefined ? 'now' : `at ${new Date(at).toISOString()}`}\n`,
      );
    out(context, `wrote ${name}: ${JSON.stringify(patch)} (was ${before ?? 'unset'})`, {
      parameter: name,
      before: before ?? null,
      after: patch,
      ...(ends === undefined ? {} : { appliesUntil: ends }),
      ...(strands.length === 0
        ? {}
        : {
            strands: strands.map(({ key: other, at }) => ({
              key: other,
              at: at === undefined ? 'now' : new Date(at).toISOString(),
            })),
          }),
    });
    return EXIT.ok;
  },
});
