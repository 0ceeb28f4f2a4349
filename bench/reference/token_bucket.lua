-- Reference: the "best possible client" line. A token bucket (GCRA, one
-- integer per key) that answers only allowed (1) or denied (0): no remaining,
-- no retry-after, no validation, nothing general.
-- KEYS[1] the bucket; ARGV[1] capacity; ARGV[2] µs per token.
-- Reply: 1 or 0. Complexity: O(1).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + interval
if new_tat - now > tonumber(ARGV[1]) * interval then return 0 end
redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
return 1
