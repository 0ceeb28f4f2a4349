/**
 * `top <policy> [--since 1h]`: the keys a policy refused most since
 * `--since` (default 1 h), from the local refusal log
 * (RATE_LIMIT_REFUSAL_LOG; `npm start` writes .local/refusals.jsonl): keys as
 * they are stored, never a raw secret. In AWS the same lines feed the
 * Contributor Insights rule of the dashboard.
 */
import { readFileSync } from 'node:fs';
import { REFUSAL_LOG, type RefusalRecord } from '@platform/rate-limit/middleware';
import { LOCAL_REFUSAL_LOG, readRefusalLog } from '../../config/refusal-log.ts';
import { CliError, defineCommand, durationFlag, EXIT } from '../command.ts';
import { knownPolicy, out } from '../context.ts';

export const top = defineCommand({
  name: 'top',
  usage: 'top <policy> [--since 1h]',
  summary: ['the keys a policy refused most (local refusal log)'],
  options: { since: { type: 'string' } },
  async run(context, rest, values) {
    const [policy] = rest;
    if (!policy) throw new CliError(EXIT.usage, 'top <policy> [--since 1h]');
    knownPolicy(context, policy);
    const sinceMs = durationFlag(values.since ?? '1h');
    if (sinceMs === undefined || sinceMs <= 0)
      throw new CliError(EXIT.usage, '--since takes a duration such as 1h or 15m');
    const file = readRefusalLog() ?? LOCAL_REFUSAL_LOG;
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      throw new CliError(
        EXIT.unavailable,
        `no refusal log at ${file} (npm start writes one; RATE_LIMIT_REFUSAL_LOG names another)`,
      );
    }
    const from = Date.now() - sinceMs;
    const counts = new Map<string, number>();
    for (const line of text.split('\n')) {
      let record: Partial<RefusalRecord>;
      try {
        record = JSON.parse(line) as Partial<RefusalRecord>;
      } catch {
        continue; // a line cut short by a crash, or not a refusal
      }
      if (record.message !== REFUSAL_LOG.message || record.policy !== policy || typeof record.key !== 'string')
        continue;
      if (!(Date.parse(String(record.time)) >= from)) continue;
      counts.set(record.key, (counts.get(record.key) ?? 0) + 1);
    }
    const ranked = [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, 10);
    const human =
      ranked.length === 0
        ? `no refusals of ${policy} since ${values.since ?? '1h'} ago`
        : ranked.map(([key, n]) => `${String(n).padStart(8)}  ${key}`).join('\n');
    out(context, human, {
      policy,
      since: new Date(from).toISOString(),
      top: ranked.map(([key, refused]) => ({ key, refused })),
    });
    return EXIT.ok;
  },
});
