-- settle_claim: settles a once-only claim (layer/src/core/claim.ts) after its
-- attempt knows the event's fate, only while the claim is still the one this
-- attempt took:
--   'given-back': the event was not handed on; the claim is deleted, so a
--     redelivery counts again. A blind DEL would also delete a claim another
--     delivery holds (a redelivery whose check timed out and then ran late):
--     the event would be forwarded twice.
--   'delivered': the event was handed on (or refused, its claim kept: decided
--     for good); the claim is marked so (its value gains ':d', its TTL kept),
--     and a redelivery stays `duplicate` after the claim's pending time. An
--     unmarked claim past it is taken over by the next delivery
--     (lua/check.lua): its attempt died mid-put.
-- fragments: none
-- KEYS[1]   the claim key
-- ARGV[1]   the attempt's token: its check set the claim to '<token>:<ms taken>'
-- ARGV[2]   'given-back' or 'delivered'
-- Reply: 1 when the claim was this attempt's and is now settled, 0 otherwise
--   (another attempt's, lapsed, never taken, or already marked delivered);
--   an error reply for any other settlement, before the claim is read.
-- Complexity: O(1). GET and DEL are not deny-OOM: a give-back works at
--   maxmemory; the mark's SET is (at OOM the claim stays unmarked, and a
--   redelivery past its pending time is handed on again: twice, not lost).
local claim_key = KEYS[1]
local token = ARGV[1]
local settlement = ARGV[2]

if settlement ~= 'delivered' and settlement ~= 'given-back' then
  return redis.error_reply('ERR rate limit: unknown claim settlement ' .. tostring(settlement))
end

local held = redis.call('GET', claim_key)
-- only an unmarked claim of this attempt: '<token>:<digits>'
if not held or string.match(held, '^([^:]*):%d+$') ~= token then return 0 end
if settlement == 'delivered' then
  redis.call('SET', claim_key, held .. ':d', 'KEEPTTL')
  return 1
end
return redis.call('DEL', claim_key)
