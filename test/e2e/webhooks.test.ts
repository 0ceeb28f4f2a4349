/**
 * The Slack and Telegram webhooks through the local gateway, over real HTTP:
 * sender verification, per-channel and per-chat limits inside one scope,
 * retries and redeliveries neither counted nor forwarded twice.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { signSlackBody } from '../../functions/slack/signature.ts';
import { consumers, type TestPlatform } from '../support/consumers.ts';
import { call, loopbackAddress } from '../support/http.ts';

const SLACK_SECRET = 'local-only-slack-signing-secret';
const TELEGRAM_SECRET = 'local-only-telegram-secret-token';

let platform: TestPlatform;
before(async () => {
  platform = await consumers();
});
after(() => platform.close());

function slackEvent(team: string, channel: string, id = `Ev${randomUUID().slice(0, 12)}`) {
  return JSON.stringify({ type: 'event_callback', team_id: team, event_id: id, event: { type: 'message', channel } });
}

const slack = (
  body: string,
  headers: Record<string, string> = signSlackBody(SLACK_SECRET, body),
  from = loopbackAddress(),
) => call(platform.base, { method: 'POST', path: '/webhooks/slack', body, headers, from });

const telegram = (bot: string, update: unknown, secret = TELEGRAM_SECRET) =>
  call(platform.base, {
    method: 'POST',
    path: `/webhooks/telegram/${bot}`,
    body: JSON.stringify(update),
    headers: { 'X-Telegram-Bot-Api-Secret-Token': secret },
    from: loopbackAddress(),
  });

describe('Slack webhook (POST /webhooks/slack)', () => {
  it('answers 401 to a bad signature and to a stale timestamp, before any parsing', async () => {
    const body = slackEvent('T1', 'C1');
    const bad = await slack(body, {
      ...signSlackBody(SLACK_SECRET, body),
      'X-Slack-Signature': `v0=${'0'.repeat(64)}`,
    });
    assert.equal(bad.status, 401);
    assert.equal(bad.json().error, 'bad_signature');
    const stale = await slack(body, signSlackBody(SLACK_SECRET, body, Math.floor(Date.now() / 1000) - 301));
    assert.equal(stale.status, 401);
    assert.equal(stale.json().error, 'stale_request');
    assert.equal((await slack(body, {})).status, 401, 'unsigned');
  });

  it('echoes the url_verification challenge', async () => {
    const answer = await slack(JSON.stringify({ type: 'url_verification', challenge: 'c-123' }));
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.json(), { challenge: 'c-123' });
  });

  it('refuses a flooded channel with 429 and X-Slack-No-Retry, while another channel of the workspace passes', async () => {
    const team = `T${randomUUID().slice(0, 8)}`;
    const statuses: number[] = [];
    for (let i = 0; i < 61; i++) statuses.push((await slack(slackEvent(team, 'CFLOOD'))).status);
    assert.deepEqual(statuses, [...Array(60).fill(200), 429]);
    const refused = await slack(slackEvent(team, 'CFLOOD'));
    assert.equal(refused.headers['x-slack-no-retry'], '1');
    assert.ok(Number(refused.headers['retry-after']) > 0);
    assert.equal((await slack(slackEvent(team, 'CQUIET'))).status, 200);
    assert.equal(platform.events().filter((e) => e.scope === team).length, 61);
  });

  it('neither counts nor forwards a retried event_id again', async () => {
    const team = `T${randomUUID().slice(0, 8)}`;
    const body = slackEvent(team, 'C1', 'EvRetry1');
    const first = await slack(body);
    assert.equal(first.status, 200);
    assert.match(first.headers.ratelimit ?? '', /"slack-channel";r=59;/);
    const retry = await slack(body, { ...signSlackBody(SLACK_SECRET, body), 'X-Slack-Retry-Num': '1' });
    assert.equal(retry.status, 200);
    assert.deepEqual(retry.json(), { ok: true, duplicate: true });
    const next = await slack(slackEvent(team, 'C1'));
    assert.match(next.headers.ratelimit ?? '', /"slack-channel";r=58;/, 'the retry was not counted');
    assert.equal(platform.events().filter((e) => e.id === 'EvRetry1').length, 1);
  });
});

describe('Telegram webhook (POST /webhooks/telegram/{bot})', () => {
  it('answers 401 to a wrong or missing secret token, and to an unknown bot', async () => {
    assert.equal((await telegram('demo', { update_id: 1 }, 'wrong')).status, 401);
    assert.equal((await telegram('demo', { update_id: 1 }, '')).status, 401);
    assert.equal((await telegram('no-such-bot', { update_id: 1 })).status, 401);
  });

  it('limits one chat to its window while another chat of the bot passes', async () => {
    const base = Date.now();
    const statuses: number[] = [];
    for (let i = 0; i < 61; i++) {
      statuses.push((await telegram('demo', { update_id: base + i, message: { chat: { id: -1001 } } })).status);
    }
    assert.deepEqual(statuses, [...Array(60).fill(200), 429]);
    const other = await telegram('demo', { update_id: base + 100, message: { chat: { id: 42 } } });
    assert.equal(other.status, 200);
  });

  it('answers a redelivered update_id with 200 without counting or forwarding it again', async () => {
    const update = { update_id: Date.now() + 5000, message: { chat: { id: 777 } } };
    const first = await telegram('demo', update);
    assert.equal(first.status, 200);
    const again = await telegram('demo', update);
    assert.deepEqual(again.json(), { ok: true, duplicate: true });
    assert.equal(platform.events().filter((e) => e.id === String(update.update_id)).length, 1);
  });
});
