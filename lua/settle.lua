-- settle: applies a call's actual cost to the budget it reserved from.
-- fragments: lib/token_bucket lib/holds
-- Reply: { outcome, remaining, reset µs }, outcome:
--   1 settled: the hold is replaced by the actual cost (refund or extra debit);
--   2 late: the hold had expired and was given back, so the actual cost is debited now;
--   3 duplicate: this id was settled already, nothing changes;
--   4 unknown: no hold and no memory of this id, nothing changes.
-- The balance may go past empty (remaining < 0): later reservations wait
-- until it is paid back. Complexity: O(log n + k) time (see lib/holds).
local budget_key = KEYS[1]
local holds_key = KEYS[2]
local amounts_key = KEYS[3]
local released_key = KEYS[4]
local settled_key = KEYS[5]
local id = ARGV[1] -- the reservation's id
local actual = tonumber(ARGV[2]) -- the call's actual cost, whole units (0 allowed: a failed call)
local capacity = tonumber(ARGV[3])
local interval_us = tonumber(ARGV[4])
local retention_us = tonumber(ARGV[5])

local now = now_us()
holds_expire(budget_key, holds_key, amounts_key, released_key, settled_key, interval_us, retention_us, now)
local outcome
if redis.call('ZSCORE', settled_key, id) then
  outcome = 3
else
  local held = tonumber(redis.call('HGET', amounts_key, id))
  if held then
    if actual > held then holds_charge(budget_key, actual - held, interval_us, now) end
    if actual < held then holds_refund(budget_key, held - actual, interval_us, now) end
    redis.call('ZREM', holds_key, id)
    redis.call('HDEL', amounts_key, id)
    outcome = 1
  elseif redis.call('ZSCORE', released_key, id) then
    if actual > 0 then holds_charge(budget_key, actual, interval_us, now) end
    redis.call('ZREM', released_key, id)
    outcome = 2
  else
    outcome = 4
  end
  if outcome ~= 4 then
    redis.call('ZADD', settled_key, now, id)
    holds_keep({ settled_key }, math.ceil(retention_us / 1000))
  end
end
local remaining, reset_us = holds_standing(budget_key, capacity, interval_us, now)
return { outcome, remaining, reset_us }
