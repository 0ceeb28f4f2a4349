/**
 * The Slack and Telegram webhooks through the local gateway, over real HTTP:
 * sender verification, per-channel and per-chat limits inside one scope,
 * retries and redeliveries neither counted nor forwarded twice.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { readOuterLine } from '../../config/outer-line.ts';
import { platform as sharedPlatform } from '../../functions/shared/platform.ts';
import { signSlackBody } from '../../functions/slack/signature.ts';
import { agedPastPending } from '../support/claims.ts';
import { consumers, type TestPlatform } from '../support/consumers.ts';
import { call, loopbackAddress } from '../support/http.ts';

const SLACK_SECRET = 'local-only-slack-signing-secret';
const TELEGRAM_SECRET = 'local-only-telegram-secret-token';
/** A bot of its own for the update types' test: its 122 updates stay out of the demo bot's window. */
const UPDATES_BOT_SECRET = 'updates-bot-secret-token-of-the-webhooks-test';
/** A bot whose stored token predates the 32-character rule (secrets:put refuses it now, the webhook still accepts it). */
const LEGACY_BOT_SECRET = 'legacy-short-token-20';

/** An address whose per-IP windows are overridden to 3, to reach their refusal under the gateway's own throttle. */
const NARROW_IP = '127.0.9.9';

let platform: TestPlatform;
before(async () => {
  platform = await consumers({
    // the outer line is gateway.test.ts's business: this file sends ~1,000 requests in a few seconds (its fuzz
    // tests), past the stage's shared bucket (burst 400), whose 429s would be read as the webhooks'
    gateway: {
      outerLine: {
        ...readOuterLine(),
        stageThrottle: { rateLimit: 100_000, burstLimit: 100_000 },
        routeThrottles: {},
        defaultRouteThrottle: undefined,
      },
    },
    parameters: {
      [`/ratelimit/local/overrides/slack-ip/${NARROW_IP}`]: { limit: 3 },
      [`/ratelimit/local/overrides/telegram-ip/${NARROW_IP}`]: { limit: 3 },
      '/ratelimit/local/secrets/telegram/telegram-bot-legacy': LEGACY_BOT_SECRET,
      '/ratelimit/local/secrets/telegram/telegram-bot-updates': UPDATES_BOT_SECRET,
    },
  });
});
after(() => platform.close());

function slackEvent(team: string, channel: string, id = `Ev${randomUUID().slice(0, 12)}`) {
  return JSON.stringify({ type: 'event_callback', team_id: team, event_id: id, event: { type: 'message', channel } });
}

/** An Events API delivery of `event`, as Slack wraps every event type. */
function slackCallback(team: string, event: Record<string, unknown>, id = `Ev${randomUUID().slice(0, 12)}`) {
  return JSON.stringify({ type: 'event_callback', team_id: team, event_id: id, event });
}

const slack = (
  body: string,
  headers: Record<string, string> = signSlackBody(SLACK_SECRET, body),
  from = loopbackAddress(),
) => call(platform.base, { method: 'POST', path: '/webhooks/slack', body, headers, from });

const telegram = (bot: string, update: unknown, secret = TELEGRAM_SECRET, from = loopbackAddress()) =>
  call(platform.base, {
    method: 'POST',
    path: `/webhooks/telegram/${bot}`,
    body: JSON.stringify(update),
    headers: { 'X-Telegram-Bot-Api-Secret-Token': secret },
    from,
  });

/** What is left of an address's per-IP window of unverified requests (a peek: nothing debited). */
async function ipWindowLeft(policy: 'slack-ip' | 'telegram-ip', ip: string): Promise<number | undefined> {
  const decision = await sharedPlatform().limiter.peek([{ policy, key: ip }]);
  assert.ok(decision.decided, decision.outcome);
  return decision.limits[0]?.remaining;
}

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

  it("counts only requests failing verification in the per-IP window: a workspace's events from Slack's shared addresses never spend it", async () => {
    const from = NARROW_IP; // as one of the few addresses Slack delivers every workspace's events from
    const team = `T${randomUUID().slice(0, 8)}`;
    for (let i = 0; i < 5; i++) {
      const admitted = await slack(slackEvent(team, 'C1'), undefined, from);
      assert.equal(admitted.status, 200, admitted.body);
      assert.doesNotMatch(admitted.headers.ratelimit ?? '', /slack-ip/);
    }
    assert.equal(await ipWindowLeft('slack-ip', from), 3, 'verified events took nothing of the per-IP window');
    const body = slackEvent(team, 'C1');
    const forged = { ...signSlackBody(SLACK_SECRET, body), 'X-Slack-Signature': `v0=${'0'.repeat(64)}` };
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await slack(body, forged, from)).status);
    assert.deepEqual(statuses, [401, 401, 401, 429], 'each forged request counted; past the window refused');
    const verified = await slack(slackEvent(`T${randomUUID().slice(0, 8)}`, 'C1'), undefined, from);
    assert.equal(verified.status, 200, 'another workspace from the same address still passes');
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

  it('reports what is left of every limit after a refusal: the workspace was not debited', async () => {
    const team = `T${randomUUID().slice(0, 8)}`;
    for (let i = 0; i < 60; i++) assert.equal((await slack(slackEvent(team, 'CFULL'))).status, 200);
    const refused = await slack(slackEvent(team, 'CFULL'));
    assert.equal(refused.status, 429);
    assert.match(
      refused.headers.ratelimit ?? '',
      /"slack-workspace";r=240;/,
      '300 - 60 admitted: the refusal took none',
    );
    const next = await slack(slackEvent(team, 'COTHER'));
    assert.match(next.headers.ratelimit ?? '', /"slack-workspace";r=239;/);
  });

  it('counts a signed event whose channel is an object (channel_created, channel_rename, im_created) by its id', async () => {
    const team = `T${randomUUID().slice(0, 8)}`;
    const id = `Ev${randomUUID().slice(0, 12)}`;
    // Slack's own example of channel_created: `event.channel` is the channel, not its id
    const body = JSON.stringify({
      type: 'event_callback',
      team_id: team,
      event_id: id,
      event: {
        type: 'channel_created',
        channel: { id: 'C024BE91L', name: 'fun', created: 1360782804, creator: 'U024BE7LH' },
      },
    });
    const answer = await slack(body);
    assert.equal(answer.status, 200, answer.body);
    assert.match(answer.headers.ratelimit ?? '', /"slack-channel";r=59;/, 'counted in the channel it names');
    const next = await slack(slackEvent(team, 'C024BE91L'));
    assert.match(next.headers.ratelimit ?? '', /"slack-channel";r=58;/, 'the same channel as its id names');
    assert.equal(platform.events().filter((e) => e.id === id).length, 1);
  });

  it("counts a reaction in its channel's window (`item.channel`): the 61st in one channel is refused by slack-channel, another channel's message passes", async () => {
    const team = `T${randomUUID().slice(0, 8)}`;
    // Slack's own example of reaction_added: its channel only in `item.channel`
    const reaction = () =>
      slackCallback(team, {
        type: 'reaction_added',
        user: 'U123ABC456',
        reaction: 'thumbsup',
        item_user: 'U222222222',
        item: { type: 'message', channel: 'CF', ts: '1360782400.498405', channel_type: 'channel' },
        event_ts: '1360782804.083113',
      });
    const statuses: number[] = [];
    for (let i = 0; i < 61; i++) statuses.push((await slack(reaction())).status);
    assert.deepEqual(statuses, [...Array(60).fill(200), 429], 'the channel window of CF, 60 a minute');
    const refused = await slack(reaction());
    assert.equal(refused.status, 429);
    assert.equal(refused.json().policy, 'slack-channel');
    assert.equal(refused.headers['x-slack-no-retry'], '1');
    const other = await slack(slackEvent(team, 'COTHER'));
    assert.equal(other.status, 200, 'a message in another channel of the workspace is still admitted');
    assert.match(other.headers.ratelimit ?? '', /"slack-workspace";r=239;/, '300 - 60 reactions - this message');
    assert.match(other.headers.ratelimit ?? '', /"slack-channel";r=59;/);
  });

  it('finds the channel where each event type puts it: `channel_id`, `item.channel`, `assistant_thread.channel_id`', async () => {
    const team = `T${randomUUID().slice(0, 8)}`;
    const events: [string, (channel: string) => Record<string, unknown>][] = [
      [
        'file_shared',
        (c) => ({ type: 'file_shared', channel_id: c, file_id: 'F1', user_id: 'U1', file: { id: 'F1' } }),
      ],
      ['call_rejected', (c) => ({ type: 'call_rejected', call_id: 'R1', user_id: 'U1', channel_id: c })],
      [
        'message_metadata_posted',
        (c) => ({ type: 'message_metadata_posted', app_id: 'A1', user_id: 'U1', team_id: team, channel_id: c }),
      ],
      [
        'pin_added',
        (c) => ({
          type: 'pin_added',
          user: 'U1',
          channel_id: c,
          item: { type: 'message', channel: c, created_by: 'U1' },
        }),
      ],
      ['reaction_removed', (c) => ({ type: 'reaction_removed', user: 'U1', item: { type: 'message', channel: c } })],
      ['star_added (a channel)', (c) => ({ type: 'star_added', user: 'U1', item: { type: 'channel', channel: c } })],
      [
        'assistant_thread_started',
        (c) => ({
          type: 'assistant_thread_started',
          assistant_thread: { user_id: 'U1', context: { channel_id: 'CCONTEXT' }, channel_id: c, thread_ts: '1.2' },
        }),
      ],
    ];
    for (const [index, [what, event]] of events.entries()) {
      const channel = `CWHERE${index}`;
      const answer = await slack(slackCallback(team, event(channel)));
      assert.equal(answer.status, 200, `${what}: ${answer.body}`);
      assert.match(answer.headers.ratelimit ?? '', /"slack-channel";r=59;/, `${what}: counted in its channel`);
      const next = await slack(slackEvent(team, channel));
      assert.match(next.headers.ratelimit ?? '', /"slack-channel";r=58;/, `${what}: the window of ${channel}`);
    }
  });

  it("limits an event in no channel per user (user_change, team_join: `user` an object; dnd_updated: an id; file_public: `user_id`), apart from any channel's window", async () => {
    const team = `T${randomUUID().slice(0, 8)}`;
    const userChange = (id: string) =>
      slackCallback(team, {
        type: 'user_change',
        user: { id, team_id: team, name: 'flood', profile: { status_text: 'toggling' } },
        cache_ts: 1_700_000_000,
        event_ts: '1700000000.000100',
      });
    const statuses: number[] = [];
    for (let i = 0; i < 61; i++) statuses.push((await slack(userChange('UFLOOD'))).status);
    assert.deepEqual(statuses, [...Array(60).fill(200), 429], 'the window of user UFLOOD, 60 a minute');
    const refused = await slack(userChange('UFLOOD'));
    assert.equal(refused.json().policy, 'slack-channel');
    assert.equal(refused.headers['x-slack-no-retry'], '1');
    for (const [what, event] of [
      ['dnd_updated (`user` an id)', { type: 'dnd_updated', user: 'UFLOOD', dnd_status: { dnd_enabled: true } }],
      ['file_public (`user_id`)', { type: 'file_public', file_id: 'F1', user_id: 'UFLOOD', file: { id: 'F1' } }],
    ] as const) {
      const answer = await slack(slackCallback(team, event));
      assert.equal(answer.status, 429, `${what}: the same user's window`);
      assert.equal(answer.json().policy, 'slack-channel');
    }
    const other = await slack(userChange('UOTHER'));
    assert.equal(other.status, 200, 'another user of the workspace passes');
    assert.match(other.headers.ratelimit ?? '', /"slack-channel";r=59;/);
    const joined = await slack(slackCallback(team, { type: 'team_join', user: { id: 'UNEW', name: 'new' } }));
    assert.match(joined.headers.ratelimit ?? '', /"slack-channel";r=59;/, "a new user's own window");
    const sameName = await slack(slackEvent(team, 'UFLOOD'));
    assert.equal(sameName.status, 200, "a channel whose id is the user's never shares the user's window");
    assert.match(sameName.headers.ratelimit ?? '', /"slack-channel";r=59;/);
    const neither = await slack(slackCallback(team, { type: 'emoji_changed', subtype: 'add', name: 'x' }));
    assert.equal(neither.status, 200, 'an event naming neither channel nor user');
    assert.doesNotMatch(neither.headers.ratelimit ?? '', /slack-channel/, 'counted in the workspace window only');
    assert.match(neither.headers.ratelimit ?? '', /"slack-workspace";r=\d+;/);
  });

  it('answers 400 to a malformed channel or user wherever the event puts it, as to a malformed `channel`: nothing counted, nothing handed on', async () => {
    const team = `T${randomUUID().slice(0, 8)}`;
    const cases: [string, Record<string, unknown>][] = [
      [
        'item.channel an object',
        { type: 'reaction_added', user: 'U1', item: { type: 'message', channel: { id: 'C1' } } },
      ],
      ['item.channel too long', { type: 'reaction_added', user: 'U1', item: { channel: 'C'.repeat(129) } }],
      ["item.channel another key's state", { type: 'reaction_added', user: 'U1', item: { channel: 'C1:holds' } }],
      ['channel_id an array', { type: 'file_shared', channel_id: ['C1'], user_id: 'U1' }],
      ['channel_id past a safe integer', { type: 'pin_added', channel_id: 1e300, user: 'U1' }],
      [
        'assistant_thread.channel_id an object',
        { type: 'assistant_thread_started', assistant_thread: { channel_id: {} } },
      ],
      ['user an object without its id', { type: 'user_change', user: { name: 'x' } }],
      ['user id too long', { type: 'team_join', user: { id: 'U'.repeat(129) } }],
      ['user id with a space', { type: 'dnd_updated', user: 'U1 U2' }],
      ["user another key's state", { type: 'dnd_updated', user: 'U1:rate' }],
      ['user_id an object', { type: 'file_public', user_id: { id: 'U1' } }],
    ];
    for (const [what, event] of cases) {
      const id = `Ev${randomUUID().slice(0, 12)}`;
      const answer = await slack(slackCallback(team, event, id));
      assert.equal(answer.status, 400, `${what}: ${answer.body}`);
      assert.equal(answer.json().error, 'bad_request');
      assert.equal(platform.events().filter((e) => e.id === id).length, 0, `${what}: not handed on`);
    }
    const first = await slack(slackEvent(team, 'C1'));
    assert.match(first.headers.ratelimit ?? '', /"slack-workspace";r=299;/, 'none of them was counted');
  });

  it('logs a refused event by its event_id: it is dropped (X-Slack-No-Retry), and the log is all that is left of it', async () => {
    const team = `T${randomUUID().slice(0, 8)}`;
    for (let i = 0; i < 60; i++) assert.equal((await slack(slackEvent(team, 'CLOGGED'))).status, 200);
    const { logger } = sharedPlatform();
    const lines: string[] = [];
    const original = { info: logger.info, warn: logger.warn, error: logger.error };
    for (const level of ['info', 'warn', 'error'] as const) {
      logger[level] = ((...args: unknown[]) => void lines.push(JSON.stringify(args))) as never;
    }
    const id = `Ev${randomUUID().slice(0, 12)}`;
    try {
      const refused = await slack(slackEvent(team, 'CLOGGED', id));
      assert.equal(refused.status, 429);
      assert.equal(refused.headers['x-slack-no-retry'], '1');
    } finally {
      Object.assign(logger, original);
    }
    assert.ok(
      lines.some((line) => line.includes(id) && line.includes(team)),
      `a log line names the dropped event ${id}: ${lines.join('\n')}`,
    );
  });

  it("neither counts nor forwards a retried event_id again once handed on: 200 duplicate at once and after the claim's pending time", async () => {
    const team = `T${randomUUID().slice(0, 8)}`;
    const body = slackEvent(team, 'C1', 'EvRetry1');
    const first = await slack(body);
    assert.equal(first.status, 200);
    assert.match(first.headers.ratelimit ?? '', /"slack-channel";r=59;/);
    const key = `wh:{slack:${team}}:seen:EvRetry1`;
    assert.match(String(await claimStore().get(key)), /:d$/, 'the claim is marked delivered before the 200');
    const retried = () => slack(body, { ...signSlackBody(SLACK_SECRET, body), 'X-Slack-Retry-Num': '1' });
    const soon = await retried();
    assert.equal(soon.status, 200, 'handed on and marked so: no 409');
    assert.deepEqual(soon.json(), { ok: true, duplicate: true });
    await agedPastPending(claimStore(), key);
    const retry = await retried();
    assert.equal(retry.status, 200);
    assert.deepEqual(retry.json(), { ok: true, duplicate: true });
    const next = await slack(slackEvent(team, 'C1'));
    assert.match(next.headers.ratelimit ?? '', /"slack-channel";r=58;/, 'the retries were not counted');
    assert.equal(platform.events().filter((e) => e.id === 'EvRetry1').length, 1);
  });

  it("hands on a retried event whose first delivery died mid-put (its claim never marked): 409 within the claim's pending time, then taken over", async () => {
    const team = `T${randomUUID().slice(0, 8)}`;
    const body = slackEvent(team, 'C1', 'EvOrphan1');
    const key = `wh:{slack:${team}}:seen:EvOrphan1`;
    // what a delivery that died between its check and its put leaves: its claim, unmarked, just taken
    // (stamped 2 s ahead of Redis' time, within its ~2.1 s pending time, pendingMsOf: pending for ~4 s,
    // so the 409 below holds however slow the host)
    const [seconds, micros] = await claimStore().time();
    await claimStore().set(
      key,
      `dead-attempt:${Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) + 2000}`,
      'PX',
      60_000,
    );
    const retried = () => slack(body, { ...signSlackBody(SLACK_SECRET, body), 'X-Slack-Retry-Num': '1' });
    const soon = await retried();
    assert.equal(soon.status, 409, 'pending: the first delivery may still be putting it');
    assert.equal(soon.json().error, 'delivery_in_progress');
    await agedPastPending(claimStore(), key);
    const retry = await retried();
    assert.equal(retry.status, 200);
    assert.deepEqual(retry.json(), { ok: true }, 'admitted: not a duplicate');
    assert.equal(platform.events().filter((e) => e.id === 'EvOrphan1').length, 1, 'handed on, not lost');
    assert.deepEqual((await retried()).json(), { ok: true, duplicate: true });
  });
});

/** Where the platform keeps its claims: its home region's Redis. */
function claimStore() {
  const { homeRedis, redis } = sharedPlatform();
  return homeRedis ?? redis;
}

/** A value that does not belong where a string or an id does: objects, arrays, prototype names, numbers, null. */
const hostile = fc.oneof(
  fc.anything({ withObjectString: true, withNullPrototype: true }),
  fc.constantFrom(
    { toString: 1 },
    { valueOf: null, toString: null },
    { __proto__: { polluted: true } },
    [],
    ['C1'],
    '__proto__',
    'constructor',
    'toString',
    -0,
    1e300,
    '',
    'x'.repeat(200),
    // own properties named after Object.prototype's members, as JSON.parse makes them (and JSON.stringify sends them)
    JSON.parse('{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}},"toString":"x","hasOwnProperty":1}'),
  ),
  // nested past the webhooks' 64 levels (and within): 400 too_deep, never a 5xx
  fc.tuple(fc.integer({ min: 1, max: 3000 }), fc.boolean()).map(([depth, arrays]) => {
    let value: unknown = 'x';
    for (let i = 0; i < depth; i++) value = arrays ? [value] : { a: value };
    return value;
  }),
);

/** A JSON body from an object whose fields are given by `fields`, as JSON.stringify would send it. */
const bodyOf = (fields: fc.Arbitrary<Record<string, unknown>>) => fields.map((value) => JSON.stringify(value) ?? '{}');

/** Never a 5xx or a stack: a signed payload of the wrong shape is a 400 (or an answer for what fits). */
function assertAnswered(answer: { status: number; body: string }, what: string): void {
  assert.ok(answer.status < 500, `${what}: ${answer.status} ${answer.body}`);
  assert.doesNotMatch(answer.body, /TypeError|ReferenceError|\bat .*\.ts:\d+/);
}

describe('Telegram webhook (POST /webhooks/telegram/{bot})', () => {
  it('answers 401 to a wrong or missing secret token, and to an unknown bot', async () => {
    assert.equal((await telegram('demo', { update_id: 1 }, 'wrong')).status, 401);
    assert.equal((await telegram('demo', { update_id: 1 }, '')).status, 401);
    assert.equal((await telegram('no-such-bot', { update_id: 1 })).status, 401);
  });

  it('counts only a wrong secret token in the per-IP window, never a verified update', async () => {
    const from = NARROW_IP;
    for (let i = 0; i < 5; i++) {
      const update = { update_id: Date.now() * 10 + i, message: { chat: { id: 31_337 } } };
      assert.equal((await telegram('demo', update, TELEGRAM_SECRET, from)).status, 200);
    }
    assert.equal(await ipWindowLeft('telegram-ip', from), 3);
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await telegram('demo', { update_id: 1 }, 'wrong', from)).status);
    assert.deepEqual(statuses, [401, 401, 401, 429]);
    const badBot = await call(platform.base, {
      method: 'POST',
      path: '/webhooks/telegram/not%20a%20bot',
      body: '{}',
      headers: { 'X-Telegram-Bot-Api-Secret-Token': TELEGRAM_SECRET },
      from,
    });
    assert.equal(badBot.status, 429, 'a bad bot id is an unverified request too: counted, refused past the window');
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

  it("limits a business chat's updates, a chat-less update's user (an inline query) and a channel's anonymous vote each to a chat's window", async () => {
    // Prepare: two kinds of update Telegram sends outside `message`: a business chat's, and an inline query
    // (no chat: its user's window, the id of their private chat with the bot)
    const base = Date.now() * 10;
    const vote = (channel: number) => ({ poll_id: 'p', voter_chat: { id: channel }, user: { id: 136817688 } });
    const kinds = [
      (i: number) => ({ update_id: base + i, business_message: { chat: { id: 5001 } } }),
      (i: number) => ({ update_id: base + 100 + i, inline_query: { id: `q${i}`, from: { id: 5002 }, query: 'x' } }),
      // a channel's anonymous vote: its chat, not the placeholder user every such vote carries
      (i: number) => ({ update_id: base + 200 + i, poll_answer: vote(-1005003) }),
    ];
    for (const update of kinds) {
      // Act
      const statuses: number[] = [];
      for (let i = 0; i < 61; i++) statuses.push((await telegram('updates', update(i), UPDATES_BOT_SECRET)).status);

      // Assess: 60 a minute (telegram-chat), then refused, though the bot's window (300) has room
      assert.deepEqual(statuses, [...Array(60).fill(200), 429], JSON.stringify(update(0)));
    }
    // another channel's vote, with the same placeholder user, is in its own chat's window
    const other = await telegram('updates', { update_id: base + 300, poll_answer: vote(-1005004) }, UPDATES_BOT_SECRET);
    assert.equal(other.status, 200);
  });

  it('keeps accepting a stored secret token shorter than the rule, and warns once by its name, never its value', async () => {
    const { logger } = sharedPlatform();
    const lines: string[] = [];
    const original = logger.warn;
    logger.warn = ((...args: unknown[]) => void lines.push(JSON.stringify(args))) as never;
    const statuses: number[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const update = { update_id: Date.now() * 10 + i, message: { chat: { id: 4242 } } };
        statuses.push((await telegram('legacy', update, LEGACY_BOT_SECRET)).status);
      }
      statuses.push((await telegram('legacy', { update_id: 1 }, 'wrong')).status);
    } finally {
      logger.warn = original;
    }
    assert.deepEqual(statuses, [200, 200, 200, 401]);
    const warnings = lines.filter((line) => line.includes('telegram-bot-legacy'));
    assert.equal(warnings.length, 1, `one warning per bot and container: ${lines.join('\n')}`);
    assert.match(warnings[0] as string, /at least 32 characters/);
    assert.ok(!lines.some((line) => line.includes(LEGACY_BOT_SECRET)), 'no log line holds the token');
  });

  it('answers a redelivered update_id with 200 without counting or forwarding it again', async () => {
    const update = { update_id: Date.now() + 5000, message: { chat: { id: 777 } } };
    const first = await telegram('demo', update);
    assert.equal(first.status, 200);
    assert.deepEqual(
      (await telegram('demo', update)).json(),
      { ok: true, duplicate: true },
      'marked delivered: no 409',
    );
    await agedPastPending(claimStore(), `wh:{telegram:demo}:seen:${update.update_id}`);
    const again = await telegram('demo', update);
    assert.deepEqual(again.json(), { ok: true, duplicate: true });
    assert.equal(platform.events().filter((e) => e.id === String(update.update_id)).length, 1);
  });
});

/** `depth` nested arrays around `inner`, as text (JSON.stringify itself would overflow at 200,000). */
const nestedText = (depth: number, inner = '1') => `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`;

describe('Webhooks: bodies past their bounds (192 KiB, 64 levels) are refused before anything counts', () => {
  const telegramRaw = (bot: string, body: string, from: string) =>
    call(platform.base, {
      method: 'POST',
      path: `/webhooks/telegram/${bot}`,
      body,
      headers: { 'X-Telegram-Bot-Api-Secret-Token': TELEGRAM_SECRET },
      from,
    });

  it('answers a signed Slack body 200,000 levels deep, 65 levels deep, or past 192 KiB with 4xx and X-Slack-No-Retry: nothing debited, nothing claimed', async () => {
    const team = `T${randomUUID().slice(0, 8)}`;
    const id = `Ev${randomUUID().slice(0, 12)}`;
    const from = loopbackAddress();
    const event = (extra: string) =>
      `{"type":"event_callback","team_id":"${team}","event_id":"${id}","event":{"type":"message","channel":"CB","extra":${extra}}}`;
    for (const [extra, status, error] of [
      [nestedText(200_000), 413, 'too_large'], // 400 KB of brackets: past the size first
      [nestedText(63), 400, 'too_deep'], // 65 levels with the envelope's object and event
      [`"${'x'.repeat(192 * 1024)}"`, 413, 'too_large'],
    ] as const) {
      const body = event(extra);
      const answer = await slack(body, signSlackBody(SLACK_SECRET, body), from);
      assert.equal(answer.status, status, `${body.length} bytes: ${answer.body.slice(0, 200)}`);
      assert.equal(answer.json().error, error);
      assert.equal(answer.headers['x-slack-no-retry'], '1', 'Slack is told not to retry what would be refused again');
    }
    assert.equal(platform.events().filter((e) => e.id === id).length, 0, 'nothing handed on');
    const body = event(nestedText(62)); // 64 levels: within the bound
    const admitted = await slack(body, signSlackBody(SLACK_SECRET, body), from);
    assert.equal(admitted.status, 200, admitted.body);
    assert.deepEqual(admitted.json(), { ok: true }, 'not a duplicate: the refused deliveries left no claim');
    const limits = admitted.headers.ratelimit ?? '';
    assert.match(limits, /"slack-workspace";r=299;/, 'the workspace debited once, by the admitted event only');
    assert.match(limits, /"slack-channel";r=59;/);
    assert.equal(
      await ipWindowLeft('slack-ip', from),
      600,
      "the refused bodies took nothing of the sender's IP window either",
    );
  });

  it('answers a Telegram update with the right secret token 200,000 levels deep, too deep or too large with 4xx: nothing debited, nothing claimed', async () => {
    const chat = 70_000_000 + Math.floor(Math.random() * 1_000_000);
    const updateId = 900_000_000 + Math.floor(Math.random() * 1_000_000);
    const from = loopbackAddress();
    const update = (extra: string) =>
      `{"update_id":${updateId},"message":{"message_id":1,"chat":{"id":${chat}},"text":"hi","extra":${extra}}}`;
    const before = await telegram('demo', { update_id: updateId + 1, message: { chat: { id: chat + 1 } } });
    assert.equal(before.status, 200, before.body);
    const botLeft = Number(/"telegram-bot";r=(\d+);/.exec(before.headers.ratelimit ?? '')?.[1]);
    for (const [extra, status] of [
      [nestedText(200_000), 413],
      [nestedText(63), 400],
      [`"${'x'.repeat(192 * 1024)}"`, 413],
    ] as const) {
      const answer = await telegramRaw('demo', update(extra), from);
      assert.equal(answer.status, status, answer.body.slice(0, 200));
    }
    assert.equal(platform.events().filter((e) => e.id === String(updateId)).length, 0, 'nothing handed on');
    const admitted = await telegramRaw('demo', update(nestedText(10)), from);
    assert.equal(admitted.status, 200, admitted.body);
    assert.deepEqual(admitted.json(), { ok: true }, 'not a duplicate: no claim was left behind');
    assert.match(admitted.headers.ratelimit ?? '', /"telegram-chat";r=(\d+);/);
    const botNow = Number(/"telegram-bot";r=(\d+);/.exec(admitted.headers.ratelimit ?? '')?.[1]);
    assert.ok(botNow >= botLeft - 1, `the bot's window debited by the admitted update only (${botLeft} → ${botNow})`);
  });
});

// Last: the fuzz fills the demo bot's window, which the Telegram tests above need.
describe('Webhooks: signed hostile payloads reach the parsing', () => {
  it('answers 400 to the signed Slack payloads that once answered 500', async () => {
    for (const body of [
      '{"type":{"toString":1}}',
      '{"type":"url_verification","challenge":{"toString":1}}',
      '{"type":"event_callback","team_id":{"toString":1},"event_id":"Ev1"}',
      '{"type":"event_callback","team_id":"T1","event_id":"Ev1","event":{"channel":["C1"]}}',
      '{"type":"event_callback","team_id":"T1","event_id":"Ev1","event":"C1"}',
      // an id the limiter refuses as a grouped key (another key's state is named so): the sender's fault, not ours
      '{"type":"event_callback","team_id":"T1","event_id":"Ev1","event":{"channel":"C1:holds"}}',
      '{"type":"event_callback","team_id":"T1","event_id":"Ev1","event":{"channel":"C1:rate"}}',
    ]) {
      const answer = await slack(body);
      assert.equal(answer.status, 400, `${body}: ${answer.body}`);
      assert.equal(answer.json().error, 'bad_request');
    }
  });

  it('never answers a signed Slack payload with a 5xx, whatever its fields hold', async (t) => {
    const runs = 400;
    await fc.assert(
      fc.asyncProperty(
        bodyOf(
          fc.record(
            {
              type: fc.oneof(fc.constantFrom('event_callback', 'url_verification', 'app_rate_limited'), hostile),
              challenge: hostile,
              team_id: fc.oneof(fc.constantFrom('T1', 'TFUZZ'), hostile),
              event_id: fc.oneof(
                fc.uuid().map((u) => `Ev${u.slice(0, 8)}`),
                hostile,
              ),
              event: fc.oneof(
                fc.record(
                  {
                    channel: fc.oneof(
                      fc.constant('CF'),
                      fc.record({ id: fc.oneof(fc.constant('CF'), hostile) }),
                      hostile,
                    ),
                    channel_id: fc.oneof(fc.constant('CF'), hostile),
                    item: fc.oneof(fc.record({ channel: fc.oneof(fc.constant('CF'), hostile) }), hostile),
                    assistant_thread: fc.oneof(
                      fc.record({ channel_id: fc.oneof(fc.constant('CF'), hostile) }),
                      hostile,
                    ),
                    user: fc.oneof(fc.constant('UF'), fc.record({ id: fc.oneof(fc.constant('UF'), hostile) }), hostile),
                    user_id: fc.oneof(fc.constant('UF'), hostile),
                  },
                  { requiredKeys: [] },
                ),
                hostile,
              ),
            },
            { requiredKeys: [] },
          ),
        ),
        async (body) => assertAnswered(await slack(body), body),
      ),
      { numRuns: runs },
    );
    t.diagnostic(`${runs} signed Slack payloads, none answered 5xx`);
  });

  it('counts a signed event in the window of the channel or user it names, in the documented order, and answers 400 to any malformed one', async (t) => {
    const runs = 150;
    /** A field's value, and the id it names (undefined: malformed, a 400). */
    type Field = { readonly value: unknown; readonly id: string | undefined };
    const validId = fc.oneof(
      fc.stringMatching(/^[A-Z0-9._-]{1,16}$/),
      fc.nat().map(String), // Slack's ids are strings; a safe integer is taken as its digits
    );
    const asSent = (id: string): unknown => (/^(0|[1-9]\d{0,14})$/.test(id) ? Number(id) : id);
    // never an id (SenderId) nor an object with one: a 400 wherever it is (an id the limiter refuses as a key, `C1:holds`,
    // is a 400 only when it is the key: the 400 tests above)
    const malformedId = fc.oneof(
      fc.constantFrom<unknown>(null, true, 1.5, 1e300, '', 'C 1', 'x'.repeat(129), [], ['C1'], {}),
      hostile.filter(
        (value) =>
          !(typeof value === 'string' && /^[A-Za-z0-9._:-]{1,128}$/.test(value)) &&
          !(typeof value === 'number' && Number.isSafeInteger(value)) &&
          !(typeof value === 'object' && value !== null && Object.hasOwn(value, 'id')),
      ),
    );
    // mostly well-formed, so that about half the events are admitted and their keys compared
    const id: fc.Arbitrary<Field> = fc.oneof(
      { arbitrary: validId.map((v) => ({ value: asSent(v), id: v })), weight: 10 },
      { arbitrary: malformedId.map((value) => ({ value, id: undefined })), weight: 1 },
    );
    /** `channel` and `user` may also be the channel or user itself, an object with its id. */
    const idOrObject: fc.Arbitrary<Field> = fc.oneof(
      { arbitrary: id, weight: 6 },
      { arbitrary: validId.map((v) => ({ value: { id: asSent(v), name: 'n' }, id: v })), weight: 3 },
      { arbitrary: malformedId.map((bad) => ({ value: { id: bad, name: 'n' }, id: undefined })), weight: 1 },
    );
    const seen = { refused: 0, workspaceOnly: 0, channel: 0, user: 0 };
    type Fields = Partial<
      Record<'channel' | 'channel_id' | 'item_channel' | 'assistant_thread_channel_id' | 'user' | 'user_id', Field>
    >;
    const fields: fc.Arbitrary<Fields> = fc.oneof(
      fc.record(
        {
          channel: idOrObject,
          channel_id: id,
          item_channel: id,
          assistant_thread_channel_id: id,
          user: idOrObject,
          user_id: id,
        },
        { requiredKeys: [] },
      ),
      // an event in no channel (user_change, file_public, …)
      fc.record({ user: idOrObject, user_id: id }, { requiredKeys: [] }),
    );
    await fc.assert(
      fc.asyncProperty(fields, async (f) => {
        const team = `T${randomUUID().slice(0, 8)}`;
        const event: Record<string, unknown> = { type: 'fuzzed_event' };
        if (f.channel) event.channel = f.channel.value;
        if (f.channel_id) event.channel_id = f.channel_id.value;
        if (f.item_channel) event.item = { type: 'message', channel: f.item_channel.value };
        if (f.assistant_thread_channel_id)
          event.assistant_thread = { channel_id: f.assistant_thread_channel_id.value, thread_ts: '1.2' };
        if (f.user) event.user = f.user.value;
        if (f.user_id) event.user_id = f.user_id.value;
        const body = slackCallback(team, event);
        const answer = await slack(body);
        const given = Object.values(f).filter((field) => field !== undefined);
        if (given.some((field) => field.id === undefined)) {
          assert.equal(answer.status, 400, `a malformed field: ${body} → ${answer.status} ${answer.body}`);
          seen.refused++;
          return;
        }
        assert.equal(answer.status, 200, `${body}: ${answer.body}`);
        const channel = f.channel?.id ?? f.channel_id?.id ?? f.item_channel?.id ?? f.assistant_thread_channel_id?.id;
        const user = f.user?.id ?? f.user_id?.id;
        const key = channel ?? (user === undefined ? undefined : `user/${user}`);
        if (key === undefined) {
          assert.doesNotMatch(answer.headers.ratelimit ?? '', /slack-channel/, `${body}: workspace window only`);
          seen.workspaceOnly++;
          return;
        }
        seen[channel === undefined ? 'user' : 'channel']++;
        assert.match(answer.headers.ratelimit ?? '', /"slack-channel";r=59;/, body);
        const peeked = await sharedPlatform().limiter.peek([{ policy: 'slack-channel', key }], { scope: team });
        assert.ok(peeked.decided, peeked.outcome);
        assert.equal(peeked.limits[0]?.remaining, 59, `${body}: counted under ${key}`);
      }),
      { numRuns: runs },
    );
    t.diagnostic(`${runs} signed events, each counted under the key its fields name: ${JSON.stringify(seen)}`);
  });

  it('answers 400 to a Telegram update whose chat id the limiter refuses as a key', async () => {
    for (const id of ['42:holds', '42:rate', '42:grants']) {
      const answer = await telegram('demo', { update_id: Date.now(), message: { chat: { id } } });
      assert.equal(answer.status, 400, `${id}: ${answer.body}`);
      assert.equal(answer.json().error, 'bad_request');
    }
  });

  it('never answers a Telegram update with the right secret token with a 5xx, whatever its fields hold', async (t) => {
    const runs = 400;
    const chatBearing = fc.oneof(fc.record({ chat: fc.oneof(fc.record({ id: hostile }), hostile) }), hostile);
    const userBearing = (field: string) =>
      fc.oneof(fc.record({ [field]: fc.oneof(fc.record({ id: hostile }), hostile) }), hostile);
    await fc.assert(
      fc.asyncProperty(
        fc.record(
          {
            update_id: fc.oneof(fc.integer({ min: 1 }), hostile),
            message: chatBearing,
            channel_post: chatBearing,
            business_message: chatBearing,
            callback_query: fc.oneof(
              fc.record({ message: chatBearing, from: fc.oneof(fc.record({ id: hostile }), hostile) }),
              hostile,
            ),
            inline_query: userBearing('from'),
            poll_answer: userBearing('user'),
          },
          { requiredKeys: [] },
        ),
        async (update) => assertAnswered(await telegram('demo', update), JSON.stringify(update)),
      ),
      { numRuns: runs },
    );
    t.diagnostic(`${runs} Telegram updates with the right secret token, none answered 5xx`);
  });
});
