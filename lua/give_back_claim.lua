-- give_back_claim: gives back a once-only claim (layer/src/core/claim.ts),
-- only when it is still the one this attempt took. A blind DEL would also
-- delete a claim another delivery holds (a redelivery whose check timed out
-- and then ran late, answering `duplicate`): the event would be forwarded
-- twice.
-- fragments: none
-- KEYS[1]   the claim key
-- ARGV[1]   the attempt's token: its check set the claim to '<token>:<ms taken>'
-- Reply: 1 when the claim was this attempt's and is gone, 0 otherwise
--   (another attempt's, lapsed, or never taken).
-- Complexity: O(1). GET and DEL are not deny-OOM: a give-back works at maxmemory.
local claim_key = KEYS[1]
local token = ARGV[1]

local held = redis.call('GET', claim_key)
if held and string.match(held, '^[^:]*') == token then return redis.call('DEL', claim_key) end
return 0
