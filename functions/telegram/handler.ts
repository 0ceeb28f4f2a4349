/**
 * POST /webhooks/telegram/{bot} — SPEC §4 "Messenger inbound", fail-closed.
 *
 * 1. Before verification: the per-IP window `telegram-ip` (the route's middleware).
 * 2. `X-Telegram-Bot-Api-Secret-Token` (set with setWebhook(secret_token))
 *    compared in constant time with the bot's secret
 *    (`secrets/telegram-bot-<bot>`): wrong, missing, or an unknown bot: 401.
 * 3. Per-bot and per-chat windows, all-or-nothing, scoped by the bot. An
 *    `update_id` already accepted answers 200 and is not counted again.
 *
 * A refusal is 429 with Retry-After: Telegram keeps the update (24 h) and
 * redelivers it later, so a refusal is back-pressure without loss.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { header } from '@platform/rate-limit/middleware';
import { httpError, jsonObjectBody, routeHandler, safeId } from '../shared/http.ts';
import { platform } from '../shared/platform.ts';
import { acceptOnce } from '../shared/webhook.ts';

/** Equal-length digests, so the comparison takes the same time whatever was sent. */
function sameSecret(given: string | undefined, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return given !== undefined && timingSafeEqual(digest(given), digest(expected));
}

const CHAT_BEARING = [
  'message',
  'edited_message',
  'channel_post',
  'edited_channel_post',
  'my_chat_member',
  'chat_member',
  'chat_join_request',
  'message_reaction',
];

/** The chat an update belongs to, if any. */
function chatOf(update: Record<string, unknown>): unknown {
  for (const field of CHAT_BEARING) {
    const chat = (update[field] as { chat?: { id?: unknown } } | undefined)?.chat;
    if (chat?.id !== undefined) return chat.id;
  }
  const callback = update.callback_query as { message?: { chat?: { id?: unknown } } } | undefined;
  return callback?.message?.chat?.id;
}

export const handler = routeHandler('telegram', async (event) => {
  const bot = safeId(event.pathParameters?.bot, 'the bot');
  const secret = platform().policies.secret(`telegram-bot-${bot}`);
  if (!secret || !sameSecret(header(event, 'X-Telegram-Bot-Api-Secret-Token'), secret)) {
    throw httpError(401, 'bad_secret_token', 'The secret token does not match.');
  }
  const update = jsonObjectBody(event);
  const id = safeId(update.update_id, 'update_id');
  const chat = chatOf(update);
  return acceptOnce({
    source: 'telegram',
    id,
    scope: bot,
    payload: update,
    limits: [
      { policy: 'telegram-bot', key: bot },
      ...(chat === undefined ? [] : [{ policy: 'telegram-chat', key: safeId(chat, 'the chat id') }]),
    ],
  });
});
