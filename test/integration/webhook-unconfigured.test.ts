/**
 * A deployed webhook without its event queue (EVENT_QUEUE_URL unset in
 * Lambda: the sink refuses every event) answers 503 not_configured before
 * anything is counted: neither the per-IP window nor the event's own windows
 * are debited, and the event is not claimed, so the sender's retries do not
 * spend a workspace's or a bot's budget on events nobody could receive.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { PolicyStore } from '@platform/rate-limit/config';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { PLATFORM_POLICIES } from '../../config/catalogue.ts';
import { createPlatform, platform, usePlatform } from '../../functions/shared/platform.ts';
import { UnsetEventSink } from '../../functions/shared/sink.ts';
import { signSlackBody } from '../../functions/slack/signature.ts';
import { targets } from '../support/targets.ts';

const PREFIX = '/ratelimit/test-webhook-unconfigured';
const SLACK_SECRET = 'test-slack-signing-secret';
const TELEGRAM_SECRET = 'test-telegram-secret-token';
const BOT = 'bot1';

type Handler = (event: unknown, context: unknown) => Promise<APIGatewayProxyResult>;
const redis = (targets[0] as (typeof targets)[number]).client();
const logged: string[] = [];
let slack: Handler;
let telegram: Handler;

before(async () => {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  const policies = new PolicyStore({
    prefix: PREFIX,
    defaults: PLATFORM_POLICIES,
    source: {
      fetchAll: async () => ({
        [`${PREFIX}/secrets/slack/slack-signing-secret`]: SLACK_SECRET,
        [`${PREFIX}/secrets/telegram/telegram-bot-${BOT}`]: TELEGRAM_SECRET,
      }),
    },
  });
  await policies.refresh();
  // the sink a Lambda without EVENT_QUEUE_URL gets (eventSinkOf, consumer-aws.test.ts)
  usePlatform(createPlatform({ redis, policies, sink: new UnsetEventSink('EVENT_QUEUE_URL') }));
  platform().logger.error = ((message: string, ...rest: unknown[]) =>
    void logged.push(JSON.stringify([message, ...rest]))) as never;
  slack = (await import('../../functions/slack/handler.ts')).handler as unknown as Handler;
  telegram = (await import('../../functions/telegram/handler.ts')).handler as unknown as Handler;
});
after(() => {
  usePlatform(undefined);
  redis.disconnect();
});

const context = { awsRequestId: 'req-1', getRemainingTimeInMillis: () => 10_000 };

function post(path: string, body: string, headers: Record<string, string>, ip: string) {
  return {
    httpMethod: 'POST',
    path,
    resource: path,
    headers: { 'Content-Type': 'application/json', ...headers },
    body,
    isBase64Encoded: false,
    requestContext: { identity: { sourceIp: ip }, requestId: randomUUID() },
  };
}

/** What is left of each limit, read without debiting. */
async function remaining(requests: { policy: string; key: string }[], scope?: string): Promise<number[]> {
  const decision = await platform().limiter.peek(requests, scope === undefined ? {} : { scope });
  assert.ok(decision.decided, `the peek was decided: ${decision.outcome}`);
  return decision.limits.map((l) => l.remaining);
}

describe('Webhooks in Lambda without an event queue', () => {
  it('Slack: 503 not_configured, the setting logged, and nothing counted or claimed', async () => {
    const ip = '203.0.113.41';
    const team = `T${randomUUID().slice(0, 8)}`;
    const body = JSON.stringify({
      type: 'event_callback',
      team_id: team,
      event_id: 'EvUnconfigured1',
      event: { type: 'message', channel: 'C1' },
    });
    for (let retry = 0; retry < 3; retry++) {
      const answer = await slack(post('/webhooks/slack', body, signSlackBody(SLACK_SECRET, body), ip), context);
      assert.equal(answer.statusCode, 503);
      assert.equal(JSON.parse(answer.body).error, 'not_configured');
    }
    assert.match(logged.join('\n'), /EVENT_QUEUE_URL/);
    assert.deepEqual(await remaining([{ policy: 'slack-ip', key: ip }]), [600], 'the per-IP window was not debited');
    assert.deepEqual(
      await remaining(
        [
          { policy: 'slack-workspace', key: team },
          { policy: 'slack-channel', key: 'C1' },
        ],
        team,
      ),
      [300, 60],
      "the event's windows were not debited",
    );
  });

  it('Telegram: 503 not_configured, and nothing counted', async () => {
    const ip = '203.0.113.42';
    const update = JSON.stringify({ update_id: 7, message: { chat: { id: 42 } } });
    const headers = { 'X-Telegram-Bot-Api-Secret-Token': TELEGRAM_SECRET };
    const answer = await telegram(
      { ...post(`/webhooks/telegram/${BOT}`, update, headers, ip), pathParameters: { bot: BOT } },
      context,
    );
    assert.equal(answer.statusCode, 503);
    assert.equal(JSON.parse(answer.body).error, 'not_configured');
    assert.deepEqual(await remaining([{ policy: 'telegram-ip', key: ip }]), [600]);
    assert.deepEqual(
      await remaining(
        [
          { policy: 'telegram-bot', key: BOT },
          { policy: 'telegram-chat', key: '42' },
        ],
        BOT,
      ),
      [300, 60],
    );
  });
});
