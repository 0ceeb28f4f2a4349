/**
 * POST /webhooks/telegram/{bot} — docs/design.md, "The limits" (Messenger inbound), fail-closed.
 *
 * 0. Before anything is counted: a body past 192 KiB is 413, one nested past
 *    64 levels 400 (WEBHOOK_BODY_BOUNDS): no update Telegram builds is either.
 *    A function with no event queue (EVENT_QUEUE_URL unset) answers 503.
 * 1. The bot's id in the path, else 400.
 * 2. `X-Telegram-Bot-Api-Secret-Token` (set with setWebhook(secret_token))
 *    compared in constant time with the bot's secret
 *    (`secrets/telegram/telegram-bot-<bot>`): wrong, missing, or an unknown
 *    bot: 401, counted in the per-IP window `telegram-ip` (429 past it). Only
 *    such requests spend it: Telegram sends every bot's updates from a few
 *    shared addresses, where one bot's traffic would refuse the others'.
 * 3. Per-bot and per-chat windows, all-or-nothing, scoped by the bot. An
 *    `update_id` already accepted answers 200 and is not counted again.
 *
 * A refusal is 429 with Retry-After: Telegram keeps the update (24 h) and
 * redelivers it later, so a refusal is back-pressure without loss.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { header } from '@platform/rate-limit/middleware';
import * as v from 'valibot';
import { secretValueProblem } from '../../config/secrets.ts';
import { httpError, jsonObjectBody, parseBody, routeHandler, SenderId, safeId } from '../shared/http.ts';
import { platform } from '../shared/platform.ts';
import { acceptOnce, boundedWebhookBody, refuseUnverified, sinkConfigured } from '../shared/webhook.ts';
import { route } from './route.ts';

/** Equal-length digests, so the comparison takes the same time whatever was sent. */
function sameSecret(given: string | undefined, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return given !== undefined && timingSafeEqual(digest(given), digest(expected));
}

/**
 * A stored secret token that breaks today's rule (config/secrets.ts: 32+ of
 * Telegram's alphabet; `npm run secrets:put` refuses one) is still accepted:
 * refusing it would take a live bot down until someone rotated it, so it is
 * logged once per bot a container reads it for (by name, never the value),
 * for the operator to rotate.
 */
const weakSecretsLogged = new Set<string>();
function warnIfWeak(name: string, secret: string): void {
  if (weakSecretsLogged.has(name)) return;
  weakSecretsLogged.add(name);
  const rule = secretValueProblem(name, secret);
  if (rule !== undefined)
    platform().logger.warn('a Telegram secret token breaks its rule: rotate it (setWebhook, npm run secrets:put)', {
      secret: name,
      rule,
    });
}

/** A part of an update that may name its chat. */
const ChatBearing = v.optional(v.looseObject({ chat: v.optional(v.looseObject({ id: SenderId })) }));
/** A part of an update that names its user (`from`, or `user` in some). */
const FromBearing = v.optional(v.looseObject({ from: v.optional(v.looseObject({ id: SenderId })) }));
const UserBearing = v.optional(v.looseObject({ user: v.optional(v.looseObject({ id: SenderId })) }));

/**
 * An update: its id, and the fields that name its chat or, for an update
 * in no chat (an inline query, a poll answer, a callback on an inline
 * message, a payment query), its user; only these are read, the rest is
 * handed on as Telegram sent it.
 */
const Update = v.looseObject({
  update_id: SenderId,
  message: ChatBearing,
  edited_message: ChatBearing,
  channel_post: ChatBearing,
  edited_channel_post: ChatBearing,
  business_message: ChatBearing,
  edited_business_message: ChatBearing,
  deleted_business_messages: ChatBearing,
  my_chat_member: ChatBearing,
  chat_member: ChatBearing,
  chat_join_request: ChatBearing,
  message_reaction: ChatBearing,
  message_reaction_count: ChatBearing,
  chat_boost: ChatBearing,
  removed_chat_boost: ChatBearing,
  callback_query: v.optional(
    v.looseObject({ message: ChatBearing, from: v.optional(v.looseObject({ id: SenderId })) }),
  ),
  inline_query: FromBearing,
  chosen_inline_result: FromBearing,
  shipping_query: FromBearing,
  pre_checkout_query: FromBearing,
  purchased_paid_media: FromBearing,
  poll_answer: v.optional(
    v.looseObject({
      user: v.optional(v.looseObject({ id: SenderId })),
      voter_chat: v.optional(v.looseObject({ id: SenderId })),
    }),
  ),
  business_connection: UserBearing,
});
/** The update types that name a chat (Bot API 9), in the order they are looked at: the chat's window is theirs. */
const CHAT_UPDATES = [
  'message',
  'edited_message',
  'channel_post',
  'edited_channel_post',
  'business_message',
  'edited_business_message',
  'deleted_business_messages',
  'my_chat_member',
  'chat_member',
  'chat_join_request',
  'message_reaction',
  'message_reaction_count',
  'chat_boost',
  'removed_chat_boost',
] as const;
type Update = v.InferOutput<typeof Update>;

/**
 * The chat an update belongs to; for one in no chat, its user (a user's id
 * is also the id of their private chat with the bot: one window for both).
 * Undefined only for updates that name neither (a poll's new state).
 */
function chatOf(update: Update): string | undefined {
  for (const field of CHAT_UPDATES) {
    const chat = update[field]?.chat?.id;
    if (chat !== undefined) return chat;
  }
  const callback = update.callback_query;
  return (
    callback?.message?.chat?.id ??
    callback?.from?.id ??
    update.inline_query?.from?.id ??
    update.chosen_inline_result?.from?.id ??
    update.shipping_query?.from?.id ??
    update.pre_checkout_query?.from?.id ??
    update.purchased_paid_media?.from?.id ??
    // a chat's anonymous vote names the chat, and a placeholder user (the same for every such vote): the chat first
    update.poll_answer?.voter_chat?.id ??
    update.poll_answer?.user?.id ??
    update.business_connection?.user?.id
  );
}

/** The bot and chat windows, decided together, as the route declares them. */
const [[BOT, CHAT], [UNVERIFIED_IP]] = route.inHandler;

export const handler = routeHandler(
  route,
  async (event) => {
    let bot: string;
    try {
      bot = safeId(event.pathParameters?.bot, 'the bot');
    } catch (error) {
      // no bot of ours is named so: an unverified request, counted like a wrong token
      return refuseUnverified(event, UNVERIFIED_IP, error as Error);
    }
    const secretName = `telegram-bot-${bot}`;
    const secret = platform().policies.secret(secretName);
    if (secret) warnIfWeak(secretName, secret);
    if (!secret || !sameSecret(header(event, 'X-Telegram-Bot-Api-Secret-Token'), secret)) {
      await refuseUnverified(
        event,
        UNVERIFIED_IP,
        httpError(401, 'bad_secret_token', 'The secret token does not match.'),
      );
    }
    const update = parseBody(event, Update);
    const chat = chatOf(update);
    return acceptOnce({
      source: 'telegram',
      id: update.update_id,
      scope: bot,
      payload: jsonObjectBody(event), // handed on as Telegram sent it
      limits: [{ policy: BOT, key: bot }, ...(chat === undefined ? [] : [{ policy: CHAT, key: chat }])],
    });
  },
  // a body too large or too deep (Telegram itself never builds one), or a function with no queue, is refused before anything counts it
  { before: [boundedWebhookBody(), sinkConfigured()] },
);
