-- settle: applies a call's actual cost to the budget it reserved from.
-- fragments: lib/token_bucket lib/holds
-- Reply: { outcome, remaining, reset µs }, outcome:
--   1 settled: the hold is replaced by the actual cost (refund or extra debit);
--   2 late: the hold had lapsed (and stayed charged); it is replaced by the
--     actual cost now, the same way;
--   3 duplicate: this id was settled already, nothing changes;
--   4 unknown: no hold and no memory of this id, nothing changes.
-- The balance may go past empty (remaining < 0): later reservations wait
-- until it is paid back. Complexity: O(log n + k) time (see lib/holds).
local budget_key = KEYS[1]
local holds_key = KEYS[2]
local amounts_key = KEYS[3]
local settled_key = KEYS[4]
local id = ARGV[1] -- the reservation's id
local actual = tonumber(ARGV[2]) -- the call's actual cost, whole units (0: nothing was spent)
local capacity = tonumber(ARGV[3])
local interval_us = tonumber(ARGV[4])
local retention_us = tonumber(ARGV[5])

local now = now_us()
holds_forget(holds_key, amounts_key, settled_key, retention_us, now)
local outcome = 4
if redis.call('ZSCORE', settled_key, id) then
  outcome = 3
else
  local held = tonumber(redis.call('HGET', amounts_key, id))
  if held then
    outcome = (tonumber(redis.call('ZSCORE', holds_key, id)) or now) > now and 1 or 2
    holds_true_up(budget_key, held, actual, interval_us, now)
    redis.call('ZREM', holds_key, id)
    redis.call('HDEL', amounts_key, id)
    redis.call('ZADD', settled_key, now, id)
    holds_keep({ settled_key }, math.ceil(retention_us / 1000))
  end
end
local remaining, reset_us = holds_standing(budget_key, capacity, interval_us, now)
return { outcome, remaining, reset_us }
