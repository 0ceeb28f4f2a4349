/**
 * POST /webhooks/slack — docs/design.md, "The limits" (Messenger inbound), fail-closed.
 *
 * 1. The v0 signature over the raw body with the signing secret
 *    (`secrets/slack/slack-signing-secret`), timestamp within 5 min: else 401,
 *    counted in the per-IP window `slack-ip` (429 past it). Only such requests
 *    spend it: Slack sends every workspace's events from a few shared
 *    addresses, where one workspace's traffic would refuse the others'.
 * 2. `url_verification`: the challenge, echoed.
 * 3. An event: per-workspace (`team_id`) and per-channel windows,
 *    all-or-nothing, scoped by the workspace; the channel window is keyed by
 *    the event's channel or, for one in no channel, its user (`channelKeyOf`).
 *    A retried `event_id` already accepted answers 200 and is neither counted
 *    nor forwarded again.
 *
 * 0. Before anything is counted: a body past 192 KiB is 413, one nested past
 *    64 levels 400, both with `X-Slack-No-Retry: 1` (WEBHOOK_BODY_BOUNDS). A
 *    function with no event queue (EVENT_QUEUE_URL unset) answers 503.
 *
 * A refusal is 429 with Retry-After and `X-Slack-No-Retry: 1`: Slack would
 * otherwise retry at +1 min and +5 min into a channel that is over its limit;
 * the event is dropped, counted (Limited) and logged by id. The limiter down
 * is 503 without it, so Slack retries later. The per-channel limit (per user
 * for an event in no channel) keeps a flooding channel or user from starving
 * the workspace, so the app's deliveries stay mostly 2xx (Slack disables
 * subscriptions whose deliveries mostly fail).
 */
import { header } from '@platform/rate-limit/middleware';
import * as v from 'valibot';
import { httpError, json, jsonObjectBody, parseBody, rawBody, routeHandler, SenderId } from '../shared/http.ts';
import { platform } from '../shared/platform.ts';
import { acceptOnce, boundedWebhookBody, refuseUnverified, sinkConfigured } from '../shared/webhook.ts';
import { route } from './route.ts';
import { verifySlackSignature } from './signature.ts';

/** What every payload must say: its type (other fields are read per type). */
const Envelope = v.looseObject({ type: v.pipe(v.string(), v.maxLength(64)) });

const UrlVerification = v.looseObject({
  type: v.literal('url_verification'),
  challenge: v.pipe(v.string(), v.maxLength(512)),
});

/**
 * A channel or user as an event names it: its id, or the channel or user
 * itself, an object with its id (`channel` in channel_created,
 * channel_rename, group_rename, im_created, shared_channel_invite_*; `user`
 * in user_change, team_join, user_profile_changed, user_status_changed,
 * user_huddle_changed).
 */
const IdOrObject = v.union([
  SenderId,
  v.pipe(
    v.looseObject({ id: SenderId }),
    v.transform((named) => named.id),
  ),
]);

/**
 * The fields of an event that may name its channel or its user, each an id
 * (SenderId: a malformed one is a 400, wherever it is); the rest of the
 * event is not read.
 */
const SlackEvent = v.looseObject({
  channel: v.optional(IdOrObject),
  channel_id: v.optional(SenderId),
  item: v.optional(v.looseObject({ channel: v.optional(SenderId) })),
  assistant_thread: v.optional(v.looseObject({ channel_id: v.optional(SenderId) })),
  user: v.optional(IdOrObject),
  user_id: v.optional(SenderId),
});
type SlackEvent = v.InferOutput<typeof SlackEvent>;

/** An Events API delivery: only what the limits key on is read; the rest is handed on as sent. */
const EventCallback = v.looseObject({
  type: v.literal('event_callback'),
  team_id: SenderId,
  event_id: SenderId,
  event: v.optional(SlackEvent),
});

/**
 * Where a user's key in the channel window starts: `/` is in no id
 * (SenderId), so no channel's key is ever a user's.
 */
const USER_KEY = 'user/';

/**
 * What an event's `slack-channel` window is keyed by: its channel, where
 * Slack puts it (`channel`, `channel_id`, `item.channel`,
 * `assistant_thread.channel_id`, looked at in this order); for an event in
 * no channel, its user (`user`, then `user_id`) as `user/<id>`, so no single
 * user spends the workspace's window alone; undefined for an event naming
 * neither (the workspace's window only). Which events put them where, and
 * why: docs/consumers.md, "Slack" (the one place that says so).
 */
function channelKeyOf(event: SlackEvent | undefined): string | undefined {
  const channel = event?.channel ?? event?.channel_id ?? event?.item?.channel ?? event?.assistant_thread?.channel_id;
  if (channel !== undefined) return channel;
  const user = event?.user ?? event?.user_id;
  return user === undefined ? undefined : `${USER_KEY}${user}`;
}

/** The workspace and channel windows, decided together, as the route declares them. */
const [[WORKSPACE, CHANNEL], [UNVERIFIED_IP]] = route.inHandler;

/** Slack's answer to a refusal it should not retry: the same delivery would be refused again. */
const NO_RETRY = { 'X-Slack-No-Retry': '1' };

export const handler = routeHandler(
  route,
  async (event) => {
    const secret = platform().policies.secret('slack-signing-secret');
    if (!secret) throw httpError(503, 'not_configured', 'The Slack signing secret is not configured.');
    const body = rawBody(event);
    const check = verifySlackSignature(
      secret,
      header(event, 'X-Slack-Request-Timestamp'),
      header(event, 'X-Slack-Signature'),
      body,
    );
    if (check === 'stale') {
      await refuseUnverified(
        event,
        UNVERIFIED_IP,
        httpError(401, 'stale_request', 'The request timestamp is missing or too old.'),
      );
    }
    if (check !== 'valid') {
      await refuseUnverified(
        event,
        UNVERIFIED_IP,
        httpError(401, 'bad_signature', 'The request signature does not match.'),
      );
    }
    const { type } = parseBody(event, Envelope);
    if (type === 'url_verification') return json(200, { challenge: parseBody(event, UrlVerification).challenge });
    if (type !== 'event_callback') return json(200, { ok: true, ignored: type });
    const fields = parseBody(event, EventCallback);
    const team = fields.team_id;
    const id = fields.event_id;
    const channel = channelKeyOf(fields.event);
    const payload = jsonObjectBody(event); // handed on as Slack sent it
    return acceptOnce(
      {
        source: 'slack',
        id,
        scope: team,
        payload,
        limits: [
          { policy: WORKSPACE, key: team },
          ...(channel === undefined ? [] : [{ policy: CHANNEL, key: channel }]),
        ],
      },
      NO_RETRY,
    );
  },
  // a body too large or too deep, or a function with no queue, is refused before anything counts it
  { before: [boundedWebhookBody(NO_RETRY), sinkConfigured()] },
);
