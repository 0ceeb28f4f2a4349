-- Holds of a cost budget: what reservations hold until they are settled.
-- A budget is a token bucket of cost units (lib/token_bucket); a hold is part
-- of its debt that a call reserved before it knew its true cost.
--   holds     sorted set: reservation id -> µs its hold expires
--   amounts   hash:       reservation id -> units held
--   released  sorted set: reservation id -> µs its hold was given back unsettled
--   settled   sorted set: reservation id -> µs it was settled
-- A hold past its expiry is given back (refunded) by the next reserve or
-- settle of the same budget: lazily, at most HOLDS_RELEASED_PER_CALL per call,
-- so one call's work stays bounded. Released and settled ids are remembered
-- for `retention_us`, so a late settle is applied once and a second settle of
-- the same id changes nothing.
-- Complexity: O(log n + k) per call, k <= HOLDS_RELEASED_PER_CALL; memory O(ids within the retention).

local HOLDS_RELEASED_PER_CALL = 100

-- Gives `units` back to the budget: its debt shrinks, but a budget never holds
-- more than its capacity (a refund after the bucket refilled is not banked).
local function holds_refund(budget_key, units, interval_us, now)
  tb_store(budget_key, tb_debt(budget_key, now) - units * interval_us, now)
end

-- Adds `units` to the budget's debt, past its capacity if need be (a call that
-- cost more than it reserved): later reservations wait until it is paid back.
local function holds_charge(budget_key, units, interval_us, now)
  tb_store(budget_key, tb_debt(budget_key, now) + units * interval_us, now)
end

-- Releases expired holds (refunding them) and forgets ids older than the retention.
local function holds_expire(budget_key, holds_key, amounts_key, released_key, settled_key, interval_us, retention_us, now)
  local expired = redis.call('ZRANGEBYSCORE', holds_key, '-inf', now, 'LIMIT', 0, HOLDS_RELEASED_PER_CALL)
  for _, id in ipairs(expired) do
    local units = tonumber(redis.call('HGET', amounts_key, id)) or 0
    holds_refund(budget_key, units, interval_us, now)
    redis.call('ZREM', holds_key, id)
    redis.call('HDEL', amounts_key, id)
    redis.call('ZADD', released_key, now, id)
  end
  redis.call('ZREMRANGEBYSCORE', released_key, '-inf', now - retention_us)
  redis.call('ZREMRANGEBYSCORE', settled_key, '-inf', now - retention_us)
end

-- Where the budget stands now: whole units left (below 0 while owed) and its debt in µs.
local function holds_standing(budget_key, capacity, interval_us, now)
  local debt = tb_debt(budget_key, now)
  return math.floor((capacity * interval_us - debt) / interval_us), debt
end

-- Every key of the budget lives as long as a hold or a remembered id may need it.
local function holds_keep(keys, ms)
  for _, key in ipairs(keys) do redis.call('PEXPIRE', key, key_ttl_ms(ms)) end
end
