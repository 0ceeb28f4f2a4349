/**
 * The listener as a long-running process (ECS Fargate in AWS, `npm start`
 * locally):
 *   MATTERMOST_URL=http://127.0.0.1:8065 node functions/mattermost-listener/main.ts
 * (a sub-path install: MATTERMOST_URL=https://example.com/mattermost; a bad
 * value is refused, its reason on stderr, exit 2).
 * The bot token is the SecureString `<parameter path>/secrets/mattermost-listener/mattermost-bot-token`.
 * SIGTERM (how Fargate stops a task) and SIGINT stop it cleanly: exit 0.
 */
import { InvalidSettingError } from '@platform/rate-limit';
import { closePlatform, platform } from '../shared/platform.ts';
import { catchUpPublisher } from './catch-up-metrics.ts';
import { MattermostListener } from './listener.ts';
import { readMattermostUrl } from './settings.ts';

let url: string;
try {
  url = readMattermostUrl(process.env.MATTERMOST_URL);
} catch (error) {
  if (!(error instanceof InvalidSettingError)) throw error;
  console.error(error.message);
  process.exit(2);
}
const { limiter, acceptedOnce, sink, logger, policies, ready, observer } = platform();
await Promise.all([ready, policies.ready()]);
const token = policies.secret('mattermost-bot-token');
if (!token) {
  logger.error('no Mattermost bot token (secrets/mattermost-listener/mattermost-bot-token)');
  process.exit(2);
}
// A catch-up's lag (reconnect to every channel caught up) as an EMF metric (the listener's health alarm watches it).
const onCaughtUp = catchUpPublisher();
const listener = new MattermostListener({
  url,
  token,
  limiter,
  once: acceptedOnce,
  sink,
  logger,
  onCaughtUp,
  observer,
});
const stop = async () => {
  await listener.stop();
  closePlatform();
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
await listener.start();
logger.info('mattermost listener connected', { url });
