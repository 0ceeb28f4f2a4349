/**
 * One OS process flooding a Slack channel through the gateway (spawned by the
 * flood test). argv[2]: JSON { base, team, channel, count, worker }.
 * Prints one JSON line: the status of every request.
 */
import { signSlackBody } from '../../functions/slack/signature.ts';
import { call } from './http.ts';

const input = JSON.parse(process.argv[2] ?? '{}') as {
  base: string;
  team: string;
  channel: string;
  count: number;
  worker: number;
};
const statuses = await Promise.all(
  Array.from({ length: input.count }, (_, i) => {
    const body = JSON.stringify({
      type: 'event_callback',
      team_id: input.team,
      event_id: `Ev${input.worker}x${i}`,
      event: { type: 'message', channel: input.channel },
    });
    return call(input.base, {
      method: 'POST',
      path: '/webhooks/slack',
      body,
      headers: signSlackBody('local-only-slack-signing-secret', body),
      from: `127.0.${10 + input.worker}.1`,
    }).then((answer) => answer.status);
  }),
);
process.stdout.write(`${JSON.stringify(statuses)}\n`);
